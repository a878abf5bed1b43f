"""read -> scan -> parse -> match -> recommend: one log in, one Report out."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from triage.catalogue.load import Catalogue, load_catalogue
from triage.core import vocabulary
from triage.core.errors import TriageError
from triage.core.load_summary import LoadSummary
from triage.core.models import Evidence, Failure, LoadFigures, Report, Timeline
from triage.pipeline.hints import hints_for
from triage.pipeline.locate import locate
from triage.pipeline.match import finding_rank
from triage.pipeline.parse.config import extract
from triage.pipeline.parse.environment import build_environment
from triage.pipeline.parse.failures import build_failures, collect_lines, spans_of
from triage.pipeline.parse.lines import parse_line
from triage.pipeline.parse.markers import EXC_NAME, find_markers
from triage.pipeline.parse.severity import classify
from triage.pipeline.parse.timeline import build_timeline, load_figures
from triage.pipeline.parse.traceback import Traceback, parse_tracebacks
from triage.pipeline.read import is_regular, iter_chunks, open_source
from triage.pipeline.scan import Prefilter, ScanResult, scan


@dataclass
class Options:
    """How one log is analysed: what the caller knows of the server and how to scan."""

    version: str | None = None
    command: str | None = None
    prefer_hyperscan: bool = True
    workers: int = 0  # processes for one big file; 0: one per core
    keep_generic: bool = False  # keep generic findings that a specific one already explains
    locate: bool = True  # look failures up in the source atlas (catalogue check's examples need only the match)
    progress: bool = False  # a progress line on a terminal's stderr for a big file: the CLI's choice
    chart: bool = False  # fold the load series and build Report.chart (the HTML report's timeline)


def prefilter_for(cat: Catalogue, prefer_hyperscan: bool = True,
                  window: tuple[int, int] | None = None) -> Prefilter:
    """The compiled prefilter for a catalogue's keywords, compiled once per process for the
    same keywords (a watch, a corpus or `catalogue check` analyses many logs); `window`: with
    the load probe for those `#running-req` values compiled in (scan.load_window)."""
    return _prefilter(cat.keywords(), prefer_hyperscan, window, cat.cache_dir)


@functools.lru_cache(maxsize=8)
def _prefilter(keywords: frozenset[str], prefer_hyperscan: bool, window: tuple[int, int] | None,
               cache: Path | None) -> Prefilter:
    # keyed by the keywords themselves, not the catalogue object: an id() can be reused by a
    # later, different catalogue once the first is gone
    words = set(keywords) | set(vocabulary.WINDOW) | set(vocabulary.LINE)
    return Prefilter(words, prefer_hyperscan=prefer_hyperscan, flagged=keywords, window=window, cache=cache)


def scan_source(path: str, cat: Catalogue, opts: Options) -> ScanResult:
    import io
    import os

    from triage.pipeline.read import file_size
    from triage.pipeline.scan import load_window, scan_file

    with open_source(path) as fh:
        # a pipe, FIFO, .gz or UTF-16 log is one stream, without a total; so is stdin even when
        # the shell redirected a regular file into it (`< server.log`): the byte-range workers
        # and the prefix cache's read-back reopen the log by name, and `-` names no file
        plain = is_regular(fh) and path != "-"
        size = file_size(path) if plain else None
        # a big log's load figures come out of the Hyperscan pass (scan.LoadProbe)
        window = load_window(path, size or 0) if plain and opts.prefer_hyperscan else None
        pf = prefilter_for(cat, opts.prefer_hyperscan, window)
        workers = opts.workers or (os.cpu_count() or 1)
        if plain and workers > 1:
            res = scan_file(path, pf, workers, progress=opts.progress, series=opts.chart)
            if res is not None:
                return res
        from triage.core.progress import Progress

        progress = Progress(size if opts.progress else None, "scanning")
        from triage.pipeline.read import Prefetch, iter_spans

        decoded = not isinstance(fh, (io.BufferedReader, io.FileIO))
        # a Prefetch reads like the binary file it wraps (read, readinto)
        src = cast(BinaryIO, Prefetch(fh)) if decoded else fh
        # a regular file is read back for the prefix cache's window (pipeline/prefill.py)
        source = (path, size) if plain and size is not None else None
        return scan(progress.wrap(iter_spans(src, name=path)), pf, source=source, series=opts.chart)


def analyze_scan(res: ScanResult, name: str, cat: Catalogue, opts: Options | None = None) -> Report:
    """The stages in order, over one store of parsed lines: each runs once, on what the one
    before it produced."""
    from triage.pipeline.match import MatchContext, match
    from triage.pipeline.recommend import recommend

    opts = opts or Options()
    lines = collect_lines(res.lines)
    by_no = {ln.no: ln for ln in lines}
    tracebacks = parse_tracebacks(lines)
    markers = find_markers(lines, spans_of(tracebacks))
    repeats, headers = _repeats_by_traceback(res, tracebacks)
    failures = build_failures(tracebacks, markers, source=name, repeats=repeats)
    _count_repeats(res, failures, headers)
    cfg = extract(lines)
    env = build_environment(lines, cfg, opts.version, failures)
    mismatch = _command_mismatch(opts.command, env.engine)
    if opts.command and not mismatch:
        env.launch_command = opts.command
    report = Report(source=name, sources=[name], lines=res.total_lines, bytes=res.total_bytes,
                    environment=env, failures=failures)
    if mismatch:
        report.notes.append(mismatch)
    ctx = MatchContext(lines=lines, failures=failures, env=env, keyword_lines=res.keyword_lines,
                       keep_generic=opts.keep_generic)
    report.findings = match(cat, ctx)
    report.notes.extend(ctx.notes)
    if res.scanner_note:
        report.diagnostics.append(res.scanner_note)
    if res.capped:
        report.notes.append("cap on kept lines hit: the log has more distinct error and traceback lines than a "
                            f"report can use; {len(res.lines):,} were kept, from the start and the end of the log, "
                            "and new ones in between skipped")
    _failures_from_findings(report, by_no)
    classify(report.failures, lines, res.last_serving)
    _fold_consequences(report)
    _order_failures(report)
    if opts.locate:
        locate(report.failures, env, lines=by_no, last_line=res.total_lines)
        _versions_by_line(report)
    messages = {no: ln.message for no, ln in by_no.items()}
    for f in report.failures:
        f.hints = hints_for(f, env.engine, env.version, messages)
    load = _load_at_crash(res, report.failures, report.diagnostics)
    report.timeline = _timeline(res, lines, by_no, report.failures, load)
    for x in report.findings:
        x.source = name
    recommend(report, cat, load)
    if res.series is not None:
        from triage.pipeline.chart import build_chart
        from triage.pipeline.loadseries import finished

        report.chart = build_chart(report, finished(res.series), res.series_lines, lines, res.prefill_source)
    return report


def _command_mismatch(command: str | None, engine: str | None) -> str | None:
    """A --command for another engine than the log's would be patched with flags it does not
    know: it is left aside, and the report says so."""
    from triage.pipeline.parse.environment import command_engine

    other = command_engine(command) if command else None
    if other is None or engine is None or other == engine:
        return None
    return (f"--command starts {other}, but this log was written by {engine}: "
            "the command was not used (give the command that started this server)")


def _repeats_by_traceback(res: ScanResult, tracebacks: list[Traceback]) -> tuple[dict[int, tuple[int, int]], dict[int, bytes]]:
    """Windows the scan saw more often than it kept (identical request errors, thousands of
    them in a noisy log), keyed by the first line of the traceback their kept copy became:
    (how many more, the last one's line). build_failures adds them to that traceback's failure,
    whichever failure it is merged into. Also returns the headers no traceback holds."""
    import bisect

    starts = [tb.line for tb in tracebacks]  # parse_tracebacks returns them in line order
    by_tb: dict[int, tuple[int, int]] = {}
    left: dict[int, bytes] = {}
    for header, key in res.window_keys.items():
        more = res.repeats.get(key)
        if more is None:
            continue
        j = bisect.bisect_left(starts, header)
        if j < len(starts) and starts[j] - header <= _HEADER_TO_TRACEBACK:
            tb = tracebacks[j]  # the window opened on (or just above) the traceback's first line
        elif j and tracebacks[j - 1].end_line >= header:
            tb = tracebacks[j - 1]  # opened inside it (a `File "` line)
        else:
            left[header] = key
            continue
        count, last = by_tb.get(tb.line, (0, 0))
        by_tb[tb.line] = (count + more[0], max(last, more[1]))
    return by_tb, left


_HEADER_TO_TRACEBACK = 8  # lines from a window's header down to the traceback parsed in it


def _count_repeats(res: ScanResult, failures: list[Failure], headers: dict[int, bytes]) -> None:
    """Repeats of windows that no traceback holds (a marker's window) count towards the
    failure whose lines hold the header; only the innermost such failure, found by bisection."""
    import bisect

    starts = [f.line for f in failures]  # build_failures returns them in line order
    for header, key in headers.items():
        more = res.repeats[key]
        i = bisect.bisect_right(starts, header) - 1
        if i >= 0 and header <= max(failures[i].end_line or failures[i].line, failures[i].line):
            f = failures[i]
            f.count += more[0]
            f.last_line = max(f.last_line or 0, more[1])


def _versions_by_line(report: Report) -> None:
    """A log that names no version: the releases its first located failure's traceback line
    allows (the engine's own raise, at the line the frame shows)."""
    env = report.environment
    if env.version or not env.engine:
        return
    for f in report.failures:
        site = next((r for r in f.raised_at if r.package == env.engine and r.line_versions), None)
        if site is not None:
            env.versions_by_line, env.versions_basis = site.line_versions, f"{site.file}:{site.line}"
            return


def _load_at_crash(res: ScanResult, failures: list[Failure], diagnostics: list[str]) -> LoadSummary:
    """The load the server was under when it died (up to the last failure-looking line the scan
    kept figures for within the crash), else over the whole log. A noisy log's first failure is
    a request error millions of lines before the crash: its figures would be the start-up's.
    The prefix cache's tokens are those of the window before that line (pipeline/prefill.py)."""
    fatal = next((f for f in failures if f.fatal), None)
    at: int | None = None
    if fatal is not None and res.load_at:
        end = max(fatal.end_line or fatal.line, fatal.line)
        # the last figures within the crash, else those at the first failure-looking line
        at = max((a for a in res.load_at if a <= end), default=min(res.load_at))
    load = res.load if at is None else res.load_at[at]
    if res.prefill_source is None:
        return load  # a stream: the scan summed the window itself
    from triage.pipeline import prefill
    from triage.pipeline.read import iter_spans

    path, size = res.prefill_source
    load = load.copy()
    try:
        if res.total_bytes == size:
            tokens = prefill.read_back(path, res.total_bytes if at is None else res.anchor_offsets[at])
        else:  # a line over MAX_LINE was cut: the scan's offsets are not the file's
            with open(path, "rb") as fh:
                tokens = prefill.restream(iter_spans(fh, name=path, limit=size), at)
    except (OSError, TriageError) as e:
        why = getattr(e, "strerror", None) or e
        diagnostics.append(f"the prefix cache's figures were not read back from {path}: {why}")
        return load
    prefill.apply(load, tokens)
    return load


def _timeline(res: ScanResult, lines: list, by_no: dict, failures: list[Failure], load: LoadSummary) -> Timeline:
    """Built once the failures are final: the crash is the first process-level failure."""
    fatal = [f for f in failures if f.fatal]
    first = fatal[0] if fatal else None
    timeline = build_timeline(lines, first.line if first else None)
    if first is not None:
        header = first.raw[0] if first.raw else Evidence(line=first.line, text=first.message)
        timeline.crash = header
        timeline.crash_time = by_no[header.line].ts if header.line in by_no else None
        anchor = min(res.last_load, default=None, key=lambda k: abs(k - header.line)) if res.last_load else None
        if anchor is not None and res.last_load[anchor][0] < header.line:
            no, text = res.last_load[anchor]
            ts = by_no[no].ts if no in by_no else parse_line(no, text).ts
            timeline.last_load = load_figures(no, text, ts)
        for f in failures:
            f.phase = timeline.phase_at_crash if f is first else None
    elif res.final_load is not None:
        no, text = res.final_load
        timeline.last_load = load_figures(no, text)
    for f in failures:
        f.time = by_no[f.line].ts if f.line in by_no else None
    if load.peak_running:
        timeline.peak_running = LoadFigures(line=load.peak_line or 0, running=load.peak_running)
    hit = load.prefix_hit()
    if hit is not None:
        cached, total, rate = hit
        timeline.prefix_cache = {"cached_tokens": float(cached), "prompt_tokens": float(total), "hit_rate": round(rate, 2)}
        if load.prefill_window:  # only the window before the crash was counted (pipeline/prefill.py)
            timeline.prefix_cache["window_mib"] = round(load.prefill_window / (1 << 20), 3)
    return timeline


def _fold_consequences(report: Report) -> None:
    """An error that only wraps, quotes or reports the death caused by an earlier failure joins
    that failure (its `consequences`, its lines in `followed_by`): counted, titled and grouped once,
    in `analyze`, the many-log summary and `fleet` alike. A cause the engine died of is
    process-level even when a request handler printed it."""
    from triage.core.models import Consequence
    from triage.pipeline.parse.failures import consequence_links

    known: dict[int, set[str]] = {}
    for x in report.findings:
        if x.failure is not None and not x.generic and x.unlikely is None:
            known.setdefault(x.failure, set()).add(x.signature)
    links = consequence_links(report.failures, known)
    if not links:
        return
    for j, (i, why) in sorted(links.items(), key=lambda kv: report.failures[kv[0]].line):
        f, cause = report.failures[j], report.failures[i]
        cause.consequences.append(Consequence(exception=f.exception, message=f.message, line=f.line, why=why))
        if len(cause.followed_by) < 8:
            cause.followed_by.append(f.raw[0] if f.raw else Evidence(line=f.line, text=f.message))
        if f.fatal and not cause.fatal:
            cause.fatal, cause.severity_reason = True, f"the engine died right after it (line {f.line})"
    keep = [k for k in range(len(report.failures)) if k not in links]
    remap = {old: new for new, old in enumerate(keep)}
    for j, (i, _why) in links.items():
        remap[j] = remap[i]
    report.failures = [report.failures[k] for k in keep]
    seen: set[tuple[int | None, str]] = set()
    findings = []
    for x in report.findings:
        if x.failure is not None:
            x.failure = remap[x.failure]
    explained = {x.failure for x in report.findings if x.failure is not None and not x.generic and x.unlikely is None}
    for x in report.findings:  # ranked: a consequence's finding joins its cause unless it has it
        if (x.failure, x.signature) in seen or (x.generic and x.failure in explained):
            continue
        seen.add((x.failure, x.signature))
        findings.append(x)
    report.findings = findings


def _order_failures(report: Report) -> None:
    """Process-level failures first (the one that ended the process is failure 1), then the
    request-level ones; finding indices follow, and findings re-sort by their failure."""
    order = sorted(range(len(report.failures)),
                   key=lambda i: (not report.failures[i].fatal, report.failures[i].line))
    remap = {old: new for new, old in enumerate(order)}
    report.failures = [report.failures[i] for i in order]
    for x in report.findings:
        if x.failure is not None:
            x.failure = remap[x.failure]
    report.findings.sort(key=finding_rank(report.failures))


def analyze_file(path: str, catalogue: Catalogue | None = None, options: Options | None = None,
                 extra_catalogues: list[str] | None = None) -> Report:
    """Analyse one log file (or `-` for stdin): the stages over it, no redaction. The library's
    `triage.analyze` and the `analyze` command go through commands/analyze.analyze_logs."""
    cat = catalogue or load_catalogue(extra_catalogues)
    opts = options or Options()
    res = scan_source(path, cat, opts)
    return analyze_scan(res, path, cat, opts)


def analyze_text(text: str, catalogue: Catalogue, name: str = "<text>", options: Options | None = None) -> Report:
    """Analyse an in-memory log (catalogue examples, tests)."""
    import io

    opts = options or Options()
    pf = prefilter_for(catalogue, opts.prefer_hyperscan)
    res = scan(iter_chunks(io.BytesIO(text.encode("utf-8")), name=name), pf, series=opts.chart)
    return analyze_scan(res, name, catalogue, opts)


def _failures_from_findings(report: Report, by_no: dict) -> None:
    """A crash signature that matched a line outside any parsed failure marks a failure too:
    the log says the server failed there even without a traceback (a warning before a cut-off
    excerpt, an ERROR line, a status table)."""
    import regex

    from triage.core.fingerprint import fingerprint

    exc_rx = regex.compile(r"(?:^|\s)(" + EXC_NAME + r")(?::\s?(.*))?$")
    by_line: dict[int, int] = {}
    # where two findings claim the same line, the most specific one's evidence makes the failure
    for x in sorted(report.findings, key=lambda x: (x.incomplete is not None, x.generic, -x.confidence)):
        if x.failure is not None or x.severity not in ("crash", "hang") or x.unlikely or not x.evidence:
            continue
        ev = x.evidence[0]
        if ev.line in by_line:
            x.failure = by_line[ev.line]
            continue
        ln = by_no.get(ev.line) or parse_line(ev.line, ev.text)
        m = exc_rx.search(ln.message)
        exc, msg = (m.group(1), (m.group(2) or "").strip()) if m else ((ln.level or "Error").title(), ln.message.strip())
        f = Failure(kind="log-line", exception=exc, message=msg, line=ev.line, exception_line=ev.line,
                    end_line=ev.line, ranks=[ln.rank] if ln.rank else [], first_rank=ln.rank,
                    fingerprint=fingerprint(exc, msg, []), raw=list(x.evidence), source=report.source)
        report.failures.append(f)
        x.failure = by_line[ev.line] = len(report.failures) - 1
