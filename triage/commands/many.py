"""Many logs at once: analysed in parallel across cores, failures grouped across logs.

Logs of the hosts of one deployment usually show the same crash; the summary groups
failures by the specific signature that explains them, else by fingerprint, with how often,
in which logs, and when it was first and last seen.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from triage.catalogue.load import Catalogue
from triage.core.models import Failure, Finding, Report
from triage.core.record import Record
from triage.pipeline.analyze import Options, analyze_file

# Set in each pool worker by _init_worker (the parent never sets it), inherited through fork.
_worker: tuple[Catalogue, Options] | None = None


@dataclass(kw_only=True, eq=False, repr=False)  # a Record, like the report's types (core/record.py)
class Group(Record):
    """One failure across logs: how many, in which logs, from when to when."""

    key: str  # signature id, or "fingerprint:<hash>"
    title: str
    signature: str | None = None
    fingerprint: str | None = None
    count: int = 0  # failures (one per log and distinct failure)
    logs: list[str] = field(default_factory=list)
    ranks: int = 0
    first_seen: str | None = None
    last_seen: str | None = None


@dataclass(kw_only=True, eq=False, repr=False)
class Summary(Record):
    """The failures of many logs, grouped; the logs that could not be read."""

    logs: int
    failed: int
    groups: list[Group]
    errors: dict[str, str] = field(default_factory=dict)  # log -> why it could not be read


def _init_worker(cat: Catalogue, opts: Options) -> None:
    global _worker
    _worker = (cat, opts)


def _in_worker(path: str) -> tuple[str, Report | None, str | None]:
    assert _worker is not None
    return _one(path, *_worker)


def _one(path: str, cat: Catalogue, opts: Options) -> tuple[str, Report | None, str | None]:
    from triage.core.errors import TriageError

    try:
        return path, analyze_file(path, cat, opts), None
    except TriageError as e:
        return path, None, str(e)
    except OSError as e:  # /proc/self/mem, a disk error: this log's error, never the whole run's
        return path, None, f"{path}: read error ({e.strerror or e})"


def analyze_many(paths: list[str], cat: Catalogue, opts: Options, jobs: int = 0) -> tuple[list[Report], dict[str, str]]:
    """Reports in input order; unreadable logs are reported, not fatal for the others."""
    jobs = jobs or (os.cpu_count() or 1)
    # one file per process; the byte-range split is for one big file only
    opts = Options(**{**opts.__dict__, "workers": 1}) if len(paths) > 1 and jobs > 1 else opts
    results: list[tuple[str, Report | None, str | None]]
    if len(paths) > 1 and jobs > 1 and "-" not in paths:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(min(jobs, len(paths)), initializer=_init_worker, initargs=(cat, opts)) as pool:
            results = pool.map(_in_worker, paths, chunksize=max(1, len(paths) // (jobs * 8)))
    else:
        results = [_one(p, cat, opts) for p in paths]
    reports = [r for _, r, _ in results if r is not None]
    errors = {p: e for p, _, e in results if e is not None}
    return reports, errors


def filed(rep: Report) -> list[tuple[str, Failure, Finding | None]]:
    """The one grouping rule of `analyze DIR` and `fleet` (tests/test_advice_fits.py holds them to
    it): each failure under the best-ranked specific finding that explains it (the findings are
    ranked best first: the first one wins, never the last), else under its fingerprint. A
    consequence (a wrapper, an "engine died" line) is already folded into its cause by the
    pipeline, so it is never a group of its own."""
    specific: dict[int, Finding] = {}
    for x in rep.findings:
        if x.failure is not None and not x.generic and not x.unlikely:
            specific.setdefault(x.failure, x)
    out = []
    for i, f in enumerate(rep.failures):
        finding = specific.get(i)
        out.append((finding.signature if finding is not None else f"fingerprint:{f.fingerprint}", f, finding))
    return out


def summarise(reports: list[Report], errors: dict[str, str] | None = None) -> Summary:
    groups: dict[str, Group] = {}
    for rep in reports:
        for key, f, finding in filed(rep):
            title = finding.title if finding is not None else f"{f.exception}: {f.message}"[:160]
            g = groups.get(key)
            if g is None:
                g = groups[key] = Group(key=key, title=title, signature=finding.signature if finding else None,
                                        fingerprint=None if finding else f.fingerprint)
            g.count += 1
            g.ranks += max(1, len(f.ranks))
            if rep.source not in g.logs:
                g.logs.append(rep.source)
            when = f.time or rep.timeline.crash_time
            if when:
                g.first_seen = min(g.first_seen or when, when)
                g.last_seen = max(g.last_seen or when, when)
    ordered = sorted(groups.values(), key=lambda g: (-len(g.logs), -g.count, g.key))
    return Summary(logs=len(reports) + len(errors or {}), failed=sum(1 for r in reports if r.failures),
                   groups=ordered, errors=errors or {})


def summary_markdown(s: Summary) -> str:
    from triage.render.markdown import inline

    out = [f"# Triage: {s.logs} logs, {s.failed} with a failure", ""]
    if s.groups:
        out += ["| failure | logs | failures | ranks | first seen | last seen |", "|---|---:|---:|---:|---|---|"]
        for g in s.groups:
            name = f"`{g.signature}` {inline(g.title)}" if g.signature else f"unknown `{g.fingerprint}`: {inline(g.title)}"
            out.append(f"| {name} | {len(g.logs)} | {g.count} | {g.ranks} | {g.first_seen or ''} | {g.last_seen or ''} |")
        out.append("")
        for g in s.groups:
            shown = ", ".join(inline(x) for x in g.logs[:12]) + (f" and {len(g.logs) - 12} more" if len(g.logs) > 12 else "")
            out.append(f"- `{g.key}`: {shown}")
        out.append("")
    else:
        out += ["No failure in any log.", ""]
    for path, err in s.errors.items():
        out.append(f"- could not analyse {inline(path)}: {inline(err)}")
    return "\n".join(out) + "\n"
