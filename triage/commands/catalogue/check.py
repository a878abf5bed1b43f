"""`triage catalogue check`: lint every entry, then run every example through the pipeline.

Checks: schema (file, line, field), unique ids, workaround references resolve, regexes
compile, every pattern carries one of its keywords (so the prefilter can never hide a
match), no pattern backtracks catastrophically, workaround flags exist in the engine's CLI,
every workaround says whether `triage run --retry` may apply it unattended (`auto:`), and each
signature's examples produce (or, for near misses, do not produce) its finding.
"""

from __future__ import annotations

import time
from pathlib import Path

import regex
from packaging.version import Version

from triage.catalogue.flags import FlagIndex, flag_index, flag_name
from triage.catalogue.load import Catalogue, Signature, builtin_dirs, line_with, load_catalogue, load_roots
from triage.core.errors import CatalogueError
from triage.core.lazyre import lazy_regex
from triage.core.terminal import one_line

# Nested quantifiers such as (a+)+ or (\w*)* and adjacent unbounded wildcards: the shapes
# that make backtracking engines explode.
_NESTED = lazy_regex(r"\((?:[^()\\]|\\.)*[+*}]\)[+*{]")
_DOUBLE_WILD = lazy_regex(r"\.[*+]\??\s*\.[*+]")
ADVERSARIAL_TIMEOUT = 0.25


def literal_of(pattern: str) -> str:
    """Pattern source with escapes of punctuation undone, for the keyword check."""
    return regex.sub(r"\\([^A-Za-z0-9])", r"\1", pattern)


def pattern_problems(sig: Signature) -> list[str]:
    out = []
    spec = sig.spec
    for src, rx in zip(spec.patterns, sig.patterns, strict=True):
        lit = literal_of(src)
        if not any(k in lit for k in spec.keywords):
            out.append(f"pattern {src!r} contains none of the keywords {spec.keywords}: the prefilter could hide its matches")
        if src.lstrip("(?:").startswith("^"):
            out.append(f"pattern {src!r} is anchored with ^, but lines keep their prefixes")
        if _NESTED.search(src):
            out.append(f"pattern {src!r} has a nested quantifier that can backtrack catastrophically")
        if _DOUBLE_WILD.search(src):
            out.append(f"pattern {src!r} has two adjacent wildcards that can backtrack catastrophically")
        # dynamic probe: the keyword followed by a long run that almost matches
        for k in spec.keywords[:2]:
            probe = k + (" a" * 20000) + "\x00"
            t0 = time.perf_counter()
            try:
                rx.search(probe, timeout=ADVERSARIAL_TIMEOUT)
            except TimeoutError:
                out.append(f"pattern {src!r} took over {ADVERSARIAL_TIMEOUT}s on a 40 kB line")
                break
            if time.perf_counter() - t0 > ADVERSARIAL_TIMEOUT:
                out.append(f"pattern {src!r} is slow on a 40 kB line")
                break
    return out


def todo_problems(sig: Signature) -> list[str]:
    """Fields that still say TODO (a `triage new` skeleton not yet filled in). Match examples
    are real log text and are not looked at."""
    out = []
    data = sig.spec.model_dump(exclude={"examples": {"match"}})
    stack: list[tuple[str, object]] = [(k, v) for k, v in data.items()]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str) and "TODO" in v:
            out.append(f"field '{where}' still says TODO: fill it in before adding the entry")
        elif isinstance(v, dict):
            stack.extend((f"{where}.{k}", x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((f"{where}.{i}", x) for i, x in enumerate(v))
    return sorted(out)


def hyperscan_rejects(cat: Catalogue) -> list[str]:
    try:
        import hyperscan
    except ImportError:
        return []
    out = []
    for s in cat.signatures.values():
        for p in s.spec.patterns:
            db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            try:
                db.compile(expressions=[p.encode()], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_ALLOWEMPTY])
            except Exception:  # noqa: BLE001 - hyperscan raises its own error type
                out.append(f"{s.spec.id}: {p[:70]}")
    return out


def _flag_problems(cat: Catalogue) -> list[tuple[str, str]]:
    out = []
    for wid, w in cat.workarounds.items():
        path = cat.workaround_paths[wid]
        if w.engine == "any" and (w.flags.add or w.flags.remove):
            out.append((path, f"{wid}: engine 'any' cannot carry flags; give the engine the flags belong to"))
            continue
        idx = flag_index(w.engine) if w.engine != "any" else None
        for f in w.flags.add + w.flags.remove:
            if idx is None:
                out.append((path, f"{wid}: no flag list for engine {w.engine!r} to check {flag_name(f)} against"))
            elif not idx.exists(f):
                out.append((path, f"{wid}: flag {flag_name(f)} does not exist in {w.engine}'s CLI"))
    return out


def _fit_problems(cat: Catalogue) -> list[tuple[str, str]]:
    """What pipeline/fit.py reads: a release range belongs to one engine's releases; a phase is
    listed once (the schema has already checked the names and compiled points_at)."""
    out = []
    for wid, w in cat.workarounds.items():
        if w.versions and w.engine in ("any", "docker"):
            out.append((cat.workaround_paths[wid], f"{wid}: versions: {w.versions!r} needs an engine, not {w.engine!r}"))
        if len(set(w.phases)) != len(w.phases):
            out.append((cat.workaround_paths[wid], f"{wid}: a phase is listed twice in phases: {w.phases}"))
    return out


def _auto_problems(cat: Catalogue) -> list[tuple[str, str]]:
    """The loader takes a missing `auto:` as false so that an older entry still loads; the check
    insists on an explicit answer, so that nobody gets the unattended behaviour by omission."""
    return [(f"{cat.workaround_paths[wid]}:1", f"{wid}: missing 'auto: true|false' (may `triage run --retry` "
             "apply it unattended? true only for a pure flag or env change that is safe to apply blindly)")
            for wid, w in cat.workarounds.items() if w.auto is None]


ENGINES_OF_ANY = ("sglang", "vllm")  # an engine-any crash must help at least the two main engines


COMMON = "common"  # the folder for entries of every engine (engine: any, docker)


def folder_problems(cat: Catalogue) -> list[tuple[str, str]]:
    """The `engine:` field is the one statement of an entry's engine; the folder only organises
    the files and must agree with it (sglang/ for sglang, common/ for any and docker). Only
    entries under a signatures/ or workarounds/ tree are held to it; the id carries no meaning."""
    out = []
    entries: list[tuple[str, str, str, str]] = [(s.path, sid, "signature", s.spec.engine)
                                                for sid, s in cat.signatures.items()]
    entries += [(cat.workaround_paths[wid], wid, "workaround", w.engine) for wid, w in cat.workarounds.items()]
    for path, eid, kind, engine in entries:
        p = Path(path)
        if p.parent.parent.name not in ("signatures", "workarounds"):
            continue  # a bare directory of entries, or a flat signatures/ folder: no engine folders
        want = COMMON if engine in ("any", "docker") else engine
        if p.parent.name != want:
            out.append((path, f"{eid}: {kind} for engine {engine!r} is in folder {p.parent.name}/; "
                              f"move it to {p.parent.parent.name}/{want}/"))
    return out


def _depth_problems(cat: Catalogue) -> list[tuple[str, str]]:
    """Every signature says what the proper fix is, and a crash offers a change for each
    engine it covers (or says why there is none): the two questions on-call asks first."""
    out = []
    for sid, s in cat.signatures.items():
        spec = s.spec
        if not (spec.fixed_in or spec.affects or spec.open_issue or spec.no_upstream_fix):
            out.append((s.path, f"{sid}: no proper fix stated: give fixed_in (the first fixed release) and fix_pr, "
                                "affects (the affected versions), open_issue (the upstream thread), or no_upstream_fix "
                                "(why none)"))
        if spec.fixed_in and spec.fixed_in.startswith("https://"):
            out.append((s.path, f"{sid}: fixed_in {spec.fixed_in} is a URL: give the first release that holds the fix "
                                "(checked in the released package) and put the pull request in fix_pr"))
        if spec.fix_pr and not spec.fixed_in:
            out.append((s.path, f"{sid}: fix_pr without fixed_in: name the first release that holds it"))
        if spec.severity not in ("crash", "hang") or spec.no_workaround:
            continue
        engines = ENGINES_OF_ANY if spec.engine == "any" else (spec.engine,)
        applies = {w.engine for wid in spec.workarounds if (w := cat.workarounds.get(wid)) is not None}
        universal = applies & {"any", "docker"}
        missing = [e for e in engines if e not in applies and not universal]
        if missing:
            out.append((s.path, f"{sid}: no workaround for {', '.join(missing)} (add one, or say why none exists "
                                "in no_workaround)"))
    return out


def _run_examples(cat: Catalogue) -> tuple[int, list[tuple[str, str]]]:
    from triage.pipeline.analyze import Options, analyze_text

    n = 0
    out = []
    # an example is checked for which signatures match it; where its message is raised is
    # not asked (the source-atlas warnings below read the atlas themselves)
    opts = Options(prefer_hyperscan=True, keep_generic=True, locate=False)
    for sid, s in cat.signatures.items():
        for i, text in enumerate(s.spec.examples.match):
            n += 1
            rep = analyze_text(text, cat, name=f"{sid}:match[{i}]", options=opts)
            if not any(f.signature == sid for f in rep.findings):
                got = ", ".join(f.signature for f in rep.findings) or "nothing"
                out.append((s.path, f"{sid}: examples.match[{i}] does not produce this signature (got {got})"))
        for i, text in enumerate(s.spec.examples.no_match):
            n += 1
            rep = analyze_text(text, cat, name=f"{sid}:no_match[{i}]", options=opts)
            if any(f.signature == sid for f in rep.findings):
                out.append((s.path, f"{sid}: examples.no_match[{i}] is matched, but must not be"))
    return n, out


def _bounds(rng: str | None) -> tuple[Version | None, Version | None]:
    """(lowest release, first release past the range) of a `>=a,<b` range; None when open."""
    lo = hi = None
    for part in (rng or "").split(","):
        part = part.strip()
        if part.startswith(">="):
            lo = Version(part[2:])
        elif part.startswith("<") and not part.startswith("<="):
            hi = Version(part[1:])
    return lo, hi


def _switch_flag_problem(idx: FlagIndex, flag: str, rng: str | None) -> str | None:
    """The flag must exist over the whole range: first seen at or before its start, not removed
    before its end (the flag history's first_seen / removed_in)."""
    name = flag_name(flag).split(".", 1)[0]  # vLLM's dotted JSON keys: --structured-outputs-config.backend
    info = idx.get(name)
    if info is None:
        return f"flag {name} does not exist in the flag history"
    lo, hi = _bounds(rng)
    first = None if not info.first_seen or info.first_seen.startswith("<=") else Version(info.first_seen)
    if first is not None and (lo is None or lo < first):
        return f"flag {name} first appeared in {info.first_seen}, but the switch's range {rng or '(any)'} starts before it"
    if info.removed_in and (hi is None or hi > Version(info.removed_in)):
        return (f"flag {name} was removed in {info.removed_in}, but the switch's range {rng or '(any)'} "
                "goes past it")
    return None


def feature_problems() -> tuple[int, list[tuple[str, str]]]:
    """The shipped feature map: it loads, every switch's flags exist over its release range (flag
    histories), a feature's switch ranges do not overlap, ids are unique."""
    from triage.catalogue.features import feature_map

    try:
        fmap = feature_map(validate=True)
    except CatalogueError as e:
        return 0, [("feature map", str(e))]
    out: list[tuple[str, str]] = []
    n = 0
    for engine, feats in fmap.items():
        idx = flag_index(engine)
        for feat in feats:
            n += 1
            where = f"{feat.path}:{line_with(feat.path, feat.id, 'id')}"
            spans = []
            for sw in feat.spec.switch:
                for f in sw.flags + sw.remove_flags:
                    if idx is None:
                        out.append((where, f"{feat.id}: no flag history for {engine} to check {flag_name(f)} against"))
                    elif (why := _switch_flag_problem(idx, f, sw.versions)) is not None:
                        out.append((where, f"{feat.id}: {why}"))
                spans.append(_bounds(sw.versions))
            if len(spans) > 1 and any(sw.versions is None for sw in feat.spec.switch):
                out.append((where, f"{feat.id}: several switches, one without a release range"))
                continue
            ordered = sorted(spans, key=lambda b: b[0] or Version("0"))
            for (_, a_hi), (b_lo, _) in zip(ordered, ordered[1:], strict=False):
                if a_hi is None or (b_lo is not None and a_hi > b_lo):
                    out.append((where, f"{feat.id}: the release ranges of its switches overlap"))
                    break
    return n, out


def check(dirs: list[str] | None, extra: list[str], verbose: bool = True) -> tuple[int, str]:
    roots = [Path(d) for d in dirs] if dirs else builtin_dirs()
    roots += [Path(d) for d in extra]
    problems: list[tuple[str, str]] = []
    cat = load_roots(roots, problems)
    # a user's catalogue may reference the built-in workarounds
    if dirs and not any(Path(d).resolve() in [b.resolve() for b in builtin_dirs()] for d in dirs):
        try:
            base = load_catalogue(cache=True)  # the built-in entries, for references only: as analyze reads them
            for wid, w in base.workarounds.items():
                if wid not in cat.workarounds:
                    cat.workarounds[wid] = w
                    cat.workaround_paths[wid] = base.workaround_paths[wid]
        except CatalogueError as e:
            problems.append(("built-in catalogue", str(e)))
    for s in cat.signatures.values():
        for ref in s.spec.workarounds:
            if ref not in cat.workarounds:
                problems.append((f"{s.path}:{line_with(s.path, ref)}", f"{s.spec.id}: unknown workaround id {ref!r}"))
        for p in pattern_problems(s):
            problems.append((s.path, f"{s.spec.id}: {p}"))
        problems.extend((s.path, f"{s.spec.id}: {p}") for p in todo_problems(s))
    problems.extend(_flag_problems(cat))
    problems.extend(_auto_problems(cat))
    problems.extend(_fit_problems(cat))
    problems.extend(_depth_problems(cat))
    problems.extend(folder_problems(cat))
    # the feature map is shipped with the package: checked with the built-in catalogue
    builtin = not dirs or any(Path(d).resolve() in [b.resolve() for b in builtin_dirs()] for d in dirs)
    n_features = 0
    if builtin:
        n_features, f_problems = feature_problems()
        problems.extend(f_problems)
    n_examples = 0
    if not any("unknown workaround" in p for _, p in problems):
        n_examples, ex_problems = _run_examples(cat)
        problems.extend(ex_problems)
    lines = []
    for path, msg in problems:  # one line each: a newline in a file name cannot forge another
        lines.append(one_line(f"FAIL {msg if msg.startswith(path) else f'{path}: {msg}'}"))
    from triage.catalogue.atlas import shipped
    from triage.commands.catalogue.atlas_check import check as atlas_check

    atlas = shipped()
    warnings = atlas_check(cat, atlas) if atlas is not None else []
    for aw in warnings:  # leads to verify against the engine's source, not failures
        lines.append(one_line(f"warn {aw.path}: {aw.signature}: {aw.text}"))
    if verbose:
        rejects = hyperscan_rejects(cat)
        if rejects:
            lines.append(f"note: {len(rejects)} pattern(s) Hyperscan cannot compile; they are confirmed on keyword hits by `regex`:")
            lines.extend(f"  {r}" for r in rejects)
    engines: dict[str, int] = {}
    for s in cat.signatures.values():
        engines[s.spec.engine] = engines.get(s.spec.engine, 0) + 1
    spread = ", ".join(f"{k} {v}" for k, v in sorted(engines.items()))
    features = f"{n_features} mapped features, " if n_features else ""
    fixed = sum(1 for s in cat.signatures.values() if s.spec.fixed_in)
    lines.append(f"{len(cat.signatures)} signatures ({spread}; {fixed} with the release that fixes them), "
                 f"{len(cat.workarounds)} workarounds, {features}"
                 f"{n_examples} examples run: {len(problems)} problem{'s' if len(problems) != 1 else ''}"
                 + (f", {len(warnings)} source-atlas warning{'s' if len(warnings) != 1 else ''}" if warnings else ""))
    return len(problems), "\n".join(lines) + "\n"
