"""One batch of logs in, its per-group aggregates out: what a pool process or a Ray task runs.

Each log goes through the library pipeline (`triage.pipeline.analyze`) with the catalogue
loaded once per process. A log that cannot be analysed is tried once more, then reported
with the reason; it never ends the batch.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from triage.catalogue.load import Catalogue, load_catalogue
from triage.commands.analyze import looks_like_a_log, non_log_kind
from triage.commands.fleet.board import Group, Tally
from triage.commands.fleet.source import LogFile, is_url
from triage.commands.fleet.when import from_mtime, real_time
from triage.commands.many import filed
from triage.core.models import Failure, Finding, Report
from triage.pipeline.analyze import Options, analyze_file

_CATALOGUES: dict[tuple[str, ...], Catalogue] = {}

# How far into a log its host name is looked for: NCCL prints it while the server starts.
HEAD_BYTES = 64 * 1024
# NCCL's line prefix `<host>:<pid>:<tid> [<device>] NCCL INFO`, and a `hostname=`/`Hostname:` setting
_HOST = re.compile(
    r"(?m)(?:^|[\s\]])(?P<nccl>[A-Za-z][A-Za-z0-9._-]{0,252}):\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)"
    r"|\b[Hh]ostname\s*[=:]\s*['\"]?(?P<named>[A-Za-z][A-Za-z0-9._-]{0,252})"
)
_PLACEHOLDER_HOSTS = {"localhost", "hostname", "host", "none", "null"}


@dataclass(frozen=True)
class Job:
    """What every worker needs besides its files (small: it is sent with every batch)."""

    catalogue_dirs: tuple[str, ...] = ()
    since: datetime | None = None
    prefer_hyperscan: bool = True


def catalogue(dirs: tuple[str, ...], fresh: bool = False, cache: bool = False) -> Catalogue:
    """The catalogue, loaded once per process (a forked pool inherits the driver's); `fresh`:
    load it again (the driver, at the start of each run), through the on-disk cache with
    `cache` (which keys it by the entries' files: an edited entry is read again)."""
    cat = None if fresh else _CATALOGUES.get(dirs)
    if cat is None:
        cat = _CATALOGUES[dirs] = load_catalogue(list(dirs), cache=cache)
    return cat


def analyse_batch(files: list[LogFile], job: Job) -> Tally:
    tally = Tally()
    cat = catalogue(job.catalogue_dirs)
    opts = Options(workers=1, prefer_hyperscan=job.prefer_hyperscan)
    for lf in files:
        if lf.error is not None:  # known unreadable when listed: reported, not opened
            tally.fail(lf.path, lf.error)
            continue
        skip = _skip(lf, job)
        if skip:
            tally.skipped += 1
            tally.skipped_old += skip == "old"
            continue
        why = ""
        for _attempt in range(2):
            try:
                report, host = analyse_file(lf, cat, opts)
                break
            except Exception as e:  # noqa: BLE001 - one bad log is reported, never ends the batch
                why = describe(e, lf.path)
        else:
            tally.fail(lf.path, why)
            continue
        tally.read += 1
        if not looks_like_a_log(report):
            tally.not_a_log(lf.path, "no log lines" if is_url(lf.path) else non_log_kind(lf.path))
        add_report(tally, report, lf, host, job.since)
    return tally


def describe(e: BaseException, path: str | None = None) -> str:
    """Why `path` (or a batch) could not be analysed, without the path itself: the leaderboard
    lists the reason beside it (the reader's messages start with it, for one line on stderr)."""
    from triage.core.errors import TriageError

    if isinstance(e, TriageError):
        why = str(e)
        for named in (path, shlex.quote(path)) if path else ():
            if why.startswith(named + ": "):
                return why[len(named) + 2:]
        return why
    if isinstance(e, OSError):
        return f"read error ({e.strerror or e})"
    return f"internal error: {type(e).__name__}: {e}"


def _skip(lf: LogFile, job: Job) -> str | None:
    """Why a file is not analysed, if it is not: "empty", "old" (last written before --since:
    nothing in it can be newer), "own" (triage's own report: a leaderboard written into the
    archive quotes its crashes)."""
    if lf.size == 0:
        return "empty"
    if not is_url(lf.path):
        from triage.core.output import is_own_output

        if is_own_output(lf.path):
            return "own"
    written = from_mtime(lf.mtime)
    return "old" if job.since is not None and written is not None and written < job.since else None


def analyse_file(lf: LogFile, cat: Catalogue, opts: Options) -> tuple[Report, str | None]:
    if not is_url(lf.path):
        rep = analyze_file(lf.path, cat, opts)
        if lf.records:
            from triage.pipeline.host.correlate import apply, host_records

            apply(rep, host_records(rep, lf.path, list(lf.records)))
        return rep, host_of(lf.path)
    import os
    import shutil
    import tempfile

    from triage.commands.fleet.source import filesystem

    # an object is copied to local disk, then read like any log (.gz detected by its bytes)
    fs, path = filesystem(lf.path)
    fd, tmp = tempfile.mkstemp(prefix="triage-fleet-")
    try:
        with os.fdopen(fd, "wb") as out, fs.open(path, "rb") as src:
            shutil.copyfileobj(src, out, 1024 * 1024)
        return analyze_file(tmp, cat, opts), host_of(tmp)
    finally:
        os.unlink(tmp)


def host_of(path: str) -> str | None:
    """The host name the log prints near its start, if any."""
    from triage.pipeline.read import open_source

    try:
        with open_source(path) as fh:
            head = fh.read(HEAD_BYTES)
    except Exception:  # noqa: BLE001 - the analysis reads the file again and reports errors
        return None
    for m in _HOST.finditer(head.decode("utf-8", "replace")):
        name = m["nccl"] or m["named"]
        if name and name.lower() not in _PLACEHOLDER_HOSTS:
            return name
    return None


def add_report(tally: Tally, rep: Report, lf: LogFile, host: str | None, since: datetime | None) -> None:
    """One log's failures into the batch's groups: a failure counts once per occurrence, a log
    and a server once per group. A failure without a timestamp is placed at the file's mtime."""
    written = from_mtime(lf.mtime)
    if rep.host is not None and rep.host.attribution.cause is not None:
        _add_host_cause(tally, rep, lf, host, written)
        return
    mine: dict[str, tuple[Finding | None, list[tuple[Failure, datetime | None]]]] = {}
    for key, f, finding in filed(rep):  # the same rule as `analyze DIR` (commands/many.py)
        when = real_time(f.time, lf.mtime) or written
        if since is not None and when is not None and when < since:
            continue
        mine.setdefault(key, (finding, []))[1].append((f, when))
    if mine:
        tally.with_failure += 1
    env = rep.environment
    engine = f"{env.engine} {env.version}" if env.engine and env.version else env.engine
    for key, (finding, occurrences) in mine.items():
        g = tally.groups.get(key)
        if g is None:
            first = occurrences[0][0]
            g = tally.groups[key] = Group(key=key, signature=finding.signature if finding else None,
                                          fingerprint=None if finding else first.fingerprint,
                                          severity=finding.severity if finding else None)
        g.logs += 1
        g.fatal_logs += any(f.fatal for f, _ in occurrences)
        g.servers.add(host or lf.place)
        if engine:
            g.engines[engine] += 1
        if env.gpu:
            g.gpus[env.gpu] += 1
        for f, when in occurrences:
            g.failures += f.count
            if when is not None:
                g.first_seen = when if g.first_seen is None else min(g.first_seen, when)
                g.last_seen = when if g.last_seen is None else max(g.last_seen, when)
        f, when = occurrences[-1]
        g.offer_example(when, lf.path, finding.title if finding else f"{f.exception}: {f.message}"[:160])
        if finding is not None:
            _add_advice(g, finding)


def _add_host_cause(tally: Tally, rep: Report, lf: LogFile, host: str | None, written: datetime | None) -> None:
    """A log whose failure its host records blame on the host (a GPU off the bus, a container
    killed at its memory limit) counts under that cause, not under the server's own error."""
    assert rep.host is not None and rep.host.attribution.cause is not None
    att = rep.host.attribution
    ev = rep.host.events[att.cause]  # type: ignore[index]
    key = f"host: Xid {ev.xid}" if ev.xid is not None else f"host: {ev.kind}"
    tally.with_failure += 1
    g = tally.groups.get(key)
    if g is None:
        g = tally.groups[key] = Group(key=key, signature=key, fingerprint=None, severity="crash")
    g.logs += 1
    g.fatal_logs += 1
    g.failures += 1
    g.servers.add(host or lf.place)
    env = rep.environment
    if env.engine:
        g.engines[f"{env.engine} {env.version}" if env.version else env.engine] += 1
    if env.gpu:
        g.gpus[env.gpu] += 1
    when = real_time(ev.time, lf.mtime) if ev.time else written
    if when is not None:
        g.first_seen = when if g.first_seen is None else min(g.first_seen, when)
        g.last_seen = when if g.last_seen is None else max(g.last_seen, when)
    g.offer_example(when, lf.path, (att.verdict or key)[:160])
    g.offer_fix({"no_upstream_fix": f"a host fault: {att.do_now or ev.action or 'see the host records'}"})


def _add_advice(g: Group, finding: Finding) -> None:
    """The first workaround the log was offered (counted, the most offered one is the group's
    top workaround) and the signature's proper fix."""
    # only advice that fits the log (pipeline/fit.py): one it contradicts is never the group's top
    offered = [w for w in finding.workarounds if w.status == "recommended"]
    if offered:
        w = offered[0]
        g.offer_workaround({"id": w.id, "title": w.title, "flags": list(w.flags), "remove_flags": list(w.remove_flags),
                            "env": list(w.env), "action": w.action, "cost": w.cost})
    fix: dict[str, Any] = {k: v for k, v in (("fixed_in", finding.fixed_in), ("fix_pr", finding.fix_pr), ("affects", finding.affects),
                             ("open_issue", finding.open_issue), ("no_upstream_fix", finding.no_upstream_fix))
           if v}
    if finding.references:
        fix["references"] = list(finding.references)
    if fix:
        g.offer_fix(fix)
