"""`triage catalogue backtest`: the full pipeline on every case of a labelled corpus, scored.

A case is a log excerpt from a public thread (`cases/<id>.log`) and its label (`cases/<id>.yaml`,
format in tests/corpus/README.md). Each case is scored on what an on-call engineer gets from the
report: was a failure found, was its exception named, did a catalogue signature recognise it, was it
the right one, and was the workaround the thread confirmed offered. `--against` runs a second
catalogue over the same cases and lists the cases whose outcome changed, so a reviewer sees what an
entry gains and breaks before it is merged.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from triage.catalogue.load import Catalogue, read_yaml
from triage.core.errors import TriageError
from triage.core.lazyre import lazy

METRICS = ("detected", "exception", "recognised", "specific", "located", "explained", "right1", "fix1", "fixany",
           "clean")
METRIC_TITLES = {
    "detected": "failure detected",
    "exception": "exception named",
    "recognised": "recognised by a signature",
    "specific": "a specific (non-generic) signature",
    "located": "message located in the source atlas",
    "explained": "specific signature or located",
    "right1": "right signature at rank 1",
    "fix1": "workaround offered at rank 1",
    "fixany": "workaround offered at any rank",
    "clean": "healthy logs clean",
}
MISS_CAUSES = ("nothing detected", "detected, not recognised", "wrong signature",
               "right signature, workaround missing", "healthy log not clean")


class LabelledFix(BaseModel):
    flags: list[str] = Field(default_factory=list)
    remove_flags: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    note: str | None = None


class CaseLabel(BaseModel):
    id: str
    source: str
    engine: str
    kind: Literal["crash", "healthy"]
    split: Literal["dev", "test"]
    version: str | None = None
    where: str | None = None
    exception: str | None = None
    exception_type: str | None = None
    failure_class: str = "unknown"
    expected_signature: list[str] = Field(default_factory=list)
    workaround: LabelledFix = Field(default_factory=LabelledFix)
    fixed_in: str | None = None
    note: str | None = None
    label_confidence: str | None = None

    @field_validator("expected_signature", mode="before")
    @classmethod
    def _ids(cls, v: object) -> list[str]:
        if v is None or v == "unknown":
            return []
        items = [v] if isinstance(v, str) else list(v)  # type: ignore[call-overload]
        return [str(x) for x in items if str(x) != "unknown"]

    @field_validator("version", "fixed_in", mode="before")
    @classmethod
    def _text(cls, v: object) -> object:
        return str(v) if isinstance(v, (int, float)) else v


class Case(BaseModel):
    label: CaseLabel
    log: str


class Outcome(BaseModel):
    """What the pipeline said about one case, reduced to what is scored."""

    id: str
    error: str | None = None
    failures: int = 0
    fatal: bool = False
    exceptions: list[str] = Field(default_factory=list)
    signatures: list[str] = Field(default_factory=list)  # findings, best first
    crash_findings: int = 0
    specific: bool = False  # a finding that is not a generic wrapper
    located: bool = False  # a failure's message found in the source atlas (raised_at)
    flags_top: list[str] = Field(default_factory=list)
    env_top: list[str] = Field(default_factory=list)
    flags_any: list[str] = Field(default_factory=list)
    env_any: list[str] = Field(default_factory=list)


class CaseScore(BaseModel):
    id: str
    engine: str
    kind: str
    split: str
    scores: dict[str, bool] = Field(default_factory=dict)  # metric -> hit, for the metrics that apply
    miss: str | None = None
    top: str | None = None
    expected: list[str] = Field(default_factory=list)


class Tally(BaseModel):
    hits: dict[str, int] = Field(default_factory=dict)
    totals: dict[str, int] = Field(default_factory=dict)

    def add(self, scores: dict[str, bool]) -> None:
        for k, ok in scores.items():
            self.totals[k] = self.totals.get(k, 0) + 1
            self.hits[k] = self.hits.get(k, 0) + int(ok)

    def percent(self, metric: str) -> float | None:
        total = self.totals.get(metric, 0)
        return 100.0 * self.hits.get(metric, 0) / total if total else None


class Change(BaseModel):
    id: str
    split: str
    original: str
    new: str


class BacktestResult(BaseModel):
    corpus: str
    split: str
    cases: int
    total: Tally
    by_engine: dict[str, Tally]
    misses: dict[str, list[str]]
    scores: list[CaseScore]
    changes: list[Change] | None = None
    against: str | None = None
    unchanged: int | None = None
    errors: list[str] = Field(default_factory=list)
    # test-split cases counted in the figures but left out of the per-case lists (see hold_back)
    held_back: int = 0
    held_back_changes: int = 0  # of them, how many changed against --against
    # of them, how many missed, per cause: counts only, so the split's misses can be reported
    # (grouped by cause, as a round's closing figures need) without naming a held-out case
    held_back_misses: dict[str, int] = Field(default_factory=dict)


def hold_back(result: BacktestResult) -> BacktestResult:
    """The result without the test split's case ids and labels: its cases still count in every
    figure, but no list names them. Whoever writes signatures must not read the held-out
    cases, and a per-case miss list ("sglang-3226: got X, want Y") is a reading of them."""
    test = {s.id for s in result.scores if s.split == "test"}
    if not test:
        return result
    out = result.model_copy(deep=True)
    out.scores = [s for s in out.scores if s.id not in test]
    out.held_back_misses = {k: n for k, ids in out.misses.items() if (n := sum(i in test for i in ids))}
    out.misses = {k: [i for i in ids if i not in test] for k, ids in out.misses.items()}
    out.errors = [e for e in out.errors if e.split(":", 1)[0] not in test]
    if out.changes is not None:
        out.held_back_changes = sum(c.split == "test" for c in out.changes)
        out.changes = [c for c in out.changes if c.split != "test"]
    out.held_back = len(test)
    return out


# ---- loading -----------------------------------------------------------------------------------

def load_cases(corpus: str | Path, split: str = "all") -> list[Case]:
    root = Path(corpus)
    folder = root / "cases" if (root / "cases").is_dir() else root
    if not folder.is_dir():
        raise TriageError(f"{corpus}: not a corpus directory (expected cases/<id>.yaml and cases/<id>.log)")
    cases: list[Case] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            # the catalogue loader's guards (a regular file, 512 KiB at most, no YAML aliases): a
            # label is as untrusted as an entry, and a label linked to /dev/zero, a FIFO or an
            # alias bomb ran out of memory, blocked, or ran for minutes
            raw, _node = read_yaml(path)
            label = CaseLabel.model_validate(raw)
        except (OSError, yaml.YAMLError) as e:
            raise TriageError(f"{path}: cannot read the label ({str(e).splitlines()[0]})") from None
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err["loc"])
            raise TriageError(f"{path}: {field}: {err['msg']}") from None
        log = path.with_suffix(".log")
        if not log.is_file():
            raise TriageError(f"{path}: no log beside it ({log.name})")
        if split != "all" and label.split != split:
            continue
        cases.append(Case(label=label, log=str(log)))
    if not cases:
        raise TriageError(f"{corpus}: no cases{'' if split == 'all' else f' in the {split} split'}")
    return cases


# ---- running -----------------------------------------------------------------------------------

_FLAG = lazy(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
# Set in each pool worker by _init_worker (the parent never sets it).
_worker_catalogue: Catalogue | None = None


def _norm_flags(items: Iterable[str]) -> set[str]:
    return {m.lower().replace("_", "-") for item in items for m in _FLAG.findall(str(item))}


def _env_names(items: Iterable[str]) -> set[str]:
    return {str(i).split("=", 1)[0].strip() for i in items if str(i).strip()}


def _init_worker(roots: list[str], builtin: bool) -> None:
    global _worker_catalogue
    from triage.catalogue.load import load_catalogue

    _worker_catalogue = load_catalogue(roots, builtin=builtin)


def _outcome_in_worker(case_id: str, log: str) -> Outcome:
    assert _worker_catalogue is not None
    return _outcome(case_id, log, _worker_catalogue)


def _outcome(case_id: str, log: str, cat: Catalogue) -> Outcome:
    from triage.pipeline.analyze import analyze_file

    try:
        report = analyze_file(log, catalogue=cat)
    except TriageError as e:
        return Outcome(id=case_id, error=str(e))
    out = Outcome(id=case_id, failures=len(report.failures), fatal=report.exit_code == 1)
    out.exceptions = sorted({f.exception.split(".")[-1] for f in report.failures}
                            | {c.exception.split(".")[-1] for f in report.failures for c in f.chain})
    out.signatures = [f.signature for f in report.findings]
    out.crash_findings = sum(1 for f in report.findings if f.severity in ("crash", "hang"))
    out.specific = any(not f.generic for f in report.findings)
    out.located = any(f.raised_at for f in report.failures)
    flags_any: set[str] = set()
    env_any: set[str] = set()
    for i, finding in enumerate(report.findings):
        fl: set[str] = set()
        en: set[str] = set()
        for w in finding.workarounds:
            fl |= _norm_flags(w.flags) | _norm_flags(w.remove_flags)
            en |= _env_names(w.env)
        if i == 0:
            out.flags_top, out.env_top = sorted(fl), sorted(en)
        flags_any |= fl
        env_any |= en
    # the feature map's derived switches stand on the failures too: a failure no finding explains
    # has them as its only advice, and the report's first screen offers them ("Do now")
    for j, failure in enumerate(report.fatal_failures):
        fl = {f for w in failure.switches for f in _norm_flags(w.flags) | _norm_flags(w.remove_flags)}
        en = {e for w in failure.switches for e in _env_names(w.env)}
        if j == 0 and not report.findings:
            out.flags_top, out.env_top = sorted(fl), sorted(en)
        flags_any |= fl
        env_any |= en
    out.flags_any, out.env_any = sorted(flags_any), sorted(env_any)
    return out


def run_cases(cases: list[Case], roots: list[str], builtin: bool, jobs: int = 0) -> dict[str, Outcome]:
    from triage.catalogue.load import load_catalogue

    workers = jobs or (os.cpu_count() or 1)
    # loaded here first, pool or not: a catalogue error (a directory of signatures without their
    # workarounds) is the loader's one line, where a worker's initializer raising it left only
    # BrokenProcessPool
    cat = load_catalogue(roots, builtin=builtin)
    if workers == 1 or len(cases) < 4:
        return {c.label.id: _outcome(c.label.id, c.log, cat) for c in cases}
    with ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(roots, builtin)) as pool:
        results = pool.map(_outcome_in_worker, [c.label.id for c in cases], [c.log for c in cases], chunksize=4)
        return {o.id: o for o in results}


# ---- scoring -----------------------------------------------------------------------------------

def score(case: CaseLabel, out: Outcome) -> CaseScore:
    s = CaseScore(id=case.id, engine=case.engine, kind=case.kind, split=case.split,
                  top=out.signatures[0] if out.signatures else None, expected=case.expected_signature)
    if case.kind == "healthy":
        clean = out.error is None and not out.fatal and out.crash_findings == 0
        s.scores["clean"] = clean
        s.miss = None if clean else "healthy log not clean"
        return s
    sc = s.scores
    sc["detected"] = out.failures > 0
    if case.exception_type:
        sc["exception"] = case.exception_type.split(".")[-1] in out.exceptions
    sc["recognised"] = bool(out.signatures)
    sc["specific"] = out.specific
    sc["located"] = out.located
    sc["explained"] = out.specific or out.located
    if case.expected_signature:
        sc["right1"] = s.top in case.expected_signature
    want_flags = _norm_flags(case.workaround.flags) | _norm_flags(case.workaround.remove_flags)
    want_env = _env_names(case.workaround.env)
    if want_flags or want_env:
        sc["fix1"] = want_flags <= set(out.flags_top) and want_env <= set(out.env_top)
        sc["fixany"] = want_flags <= set(out.flags_any) and want_env <= set(out.env_any)
    if not sc["detected"] and not sc["recognised"]:
        s.miss = "nothing detected"
    elif not sc["recognised"]:
        s.miss = "detected, not recognised"
    elif sc.get("right1") is False:
        s.miss = "wrong signature"
    elif sc.get("fixany") is False:
        s.miss = "right signature, workaround missing"
    return s


def _summary(o: Outcome | None) -> str:
    if o is None:
        return "-"
    if o.error:
        return f"error: {o.error}"
    if o.signatures:
        return o.signatures[0]
    return "unknown failure" if o.failures else "nothing found"


def backtest(corpus: str, split: str = "all", catalogue: list[str] | None = None,
             against: str | None = None, jobs: int = 0) -> BacktestResult:
    cases = load_cases(corpus, split)
    outcomes = run_cases(cases, [str(c) for c in catalogue or []], True, jobs)
    total = Tally()
    by_engine: dict[str, Tally] = {}
    misses: dict[str, list[str]] = {k: [] for k in MISS_CAUSES}
    scores: list[CaseScore] = []
    errors: list[str] = []
    for c in cases:
        o = outcomes[c.label.id]
        if o.error:
            errors.append(f"{c.label.id}: {o.error}")
        s = score(c.label, o)
        scores.append(s)
        total.add(s.scores)
        by_engine.setdefault(c.label.engine, Tally()).add(s.scores)
        if s.miss:
            misses[s.miss].append(c.label.id)
    result = BacktestResult(corpus=str(corpus), split=split, cases=len(cases), total=total,
                            by_engine=dict(sorted(by_engine.items())), misses=misses, scores=scores,
                            errors=errors)
    if against:
        root, cleanup = _catalogue_root(against)
        try:
            before = run_cases(cases, [root], False, jobs)
        finally:
            if cleanup:
                cleanup.cleanup()
        result.against = against
        result.changes = []
        for c in cases:
            old, new = _summary(before.get(c.label.id)), _summary(outcomes[c.label.id])
            old_s, new_s = score(c.label, before[c.label.id]), score(c.label, outcomes[c.label.id])
            if old != new or old_s.scores != new_s.scores:
                result.changes.append(Change(id=c.label.id, split=c.label.split, original=old, new=new))
        result.unchanged = len(cases) - len(result.changes)
    return result


def _catalogue_root(ref: str) -> tuple[str, tempfile.TemporaryDirectory | None]:
    """A catalogue directory, or a git revision of this repository's catalogue checked out to a
    temporary directory (signatures/ and workarounds/ only)."""
    if Path(ref).is_dir():
        return ref, None
    # a revision is handed to git: one that starts with `-` would be an option of git's
    # (`--output=FILE` truncated FILE), whatever the checks below
    if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 32 for c in ref):
        raise TriageError(f"--against {ref}: not a directory or a git revision")
    from triage.catalogue.load import builtin_dirs

    repo = next((d for d in builtin_dirs() if (d / ".git").exists()), None)
    if repo is None:
        raise TriageError(f"--against {ref}: not a directory, and the catalogue is not in a git checkout")
    tmp = tempfile.TemporaryDirectory(prefix="triage-against-")
    try:
        # resolved to a commit first (--end-of-options: the revision is never read as an option)
        sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", "--end-of-options",
                              f"{ref}^{{commit}}"], capture_output=True, check=True).stdout.decode().strip()
        archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha, "--", "signatures", "workarounds"],
                                 capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp.name], input=archive.stdout, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        tmp.cleanup()
        stderr = e.stderr if isinstance(e, subprocess.CalledProcessError) else None
        text = stderr.decode(errors="replace").strip() if stderr else ""
        detail = text.splitlines()[0] if text else ("unknown revision" if stderr is not None else str(e))
        raise TriageError(f"--against {ref}: not a directory or a git revision of the catalogue ({detail})") from None
    return tmp.name, tmp


def failed_thresholds(result: BacktestResult, minimums: dict[str, float]) -> list[str]:
    failed = []
    for metric, floor in minimums.items():
        pct = result.total.percent(metric)
        if pct is not None and pct < floor:
            failed.append(f"{metric} {pct:.1f}% < {floor:g}%")
    return failed


def backtest_report(corpus: str, split: str, catalogue: list[str], against: str | None, jobs: int,
                    minimums: dict[str, float], fmt: str, show_test: bool = False) -> tuple[str, int]:
    """`triage catalogue backtest`: the rendered scores, and 1 if a --min-* threshold failed.
    Test-split cases are named only with `show_test`."""
    from triage.commands.catalogue import backtest_out

    if split not in ("dev", "test", "all"):
        raise TriageError(f"--split {split}: expected dev, test or all")
    if jobs < 0:
        raise TriageError(f"--jobs {jobs}: expected 0 (one per core) or more")
    result = backtest(corpus, split, catalogue, against, jobs)
    failed = failed_thresholds(result, minimums)
    if not show_test:
        result = hold_back(result)
    render = backtest_out.render_json if fmt == "json" else backtest_out.render_markdown
    return render(result, failed), 1 if failed else 0
