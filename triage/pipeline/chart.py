"""The HTML report's timeline as numbers: the scan's load buckets placed on one time axis (or
line axis, for a log without timestamps) with the phases, failures, restarts and host events.

The renderer only draws what this holds; every timestamp is read here, where the log's own
formats are known (pipeline/parse), so that render/ never parses log text.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from triage.core.models import Chart, ChartMark, ChartPoint, Report
from triage.pipeline.loadseries import Bucket, SeriesFold, bounded
from triage.pipeline.parse.lines import LogLine, parse_line
from triage.pipeline.parse.timeline import (
    FIRED_UP,
    READY_PHASE,
    SERVING,
    STARTING,
    next_phase,
    seconds_between,
)

# the crash's window: this many buckets before the crash's and after it, at the global grain
ZOOM_BEFORE, ZOOM_AFTER = 24, 6
# wider than this, those buckets are read back from the file and folded again, finer; the
# window then shrinks to the crash's bucket and its neighbours (a 1 GiB log: about 1% of it)
REFOLD_BYTES = 4 * 1024 * 1024
REFOLD_BEFORE, REFOLD_AFTER = 2, 1
ZOOM_POINTS = 400


def _points(buckets: list[Bucket], start: str | None) -> list[ChartPoint]:
    out = []
    for b in buckets:
        ts = parse_line(b.stamp_line, b.stamp).ts if b.stamp else None
        out.append(ChartPoint(line=b.first_line, end_line=b.last_line, values=b.values,
                              seconds=seconds_between(start, ts) if start and ts else None))
    _spread(out)
    return out


def _spread(points: list[ChartPoint]) -> None:
    """Points that share a whole-second timestamp (SGLang prints no fraction; a busy server
    logs ten load lines a second) spread over that second in their order, instead of stacking
    on one x where the chart would draw them as a vertical stroke."""
    i = 0
    while i < len(points):
        s = points[i].seconds
        j = i + 1
        while j < len(points) and s is not None and points[j].seconds == s:
            j += 1
        if s is not None and j - i > 1 and s == int(s):
            for k in range(i, j):
                points[k].seconds = s + (k - i) / (j - i)
        i = j


def _zoom(buckets: list[Bucket], crash_line: int, source: tuple[str, int] | None) -> list[Bucket]:
    """The buckets around the crash: the global ones, or those bytes folded again finer."""
    i = next((k for k, b in enumerate(buckets) if b.last_line >= crash_line), len(buckets) - 1)
    lo, hi = max(0, i - ZOOM_BEFORE), min(len(buckets), i + ZOOM_AFTER + 1)
    window = buckets[lo:hi]
    if source is None or sum(b.end - b.offset for b in window) <= REFOLD_BYTES:
        return window
    lo, hi = max(0, i - REFOLD_BEFORE), min(len(buckets), i + REFOLD_AFTER + 1)
    first, last = buckets[lo], buckets[hi - 1]
    path, _size = source
    fold = SeriesFold(width=max(512, (last.end - first.offset) // ZOOM_POINTS))
    try:
        with open(path, "rb") as fh:
            fh.seek(first.offset)
            data = fh.read(last.end - first.offset)
    except OSError:
        return buckets[lo:hi]  # the file went away since the scan: the coarse window still says something
    fold.feed(data, len(data), first.first_line, first.offset)
    return bounded(fold.finish(), ZOOM_POINTS)


# a line with no timestamp of its own (a glog-style `E0624 22:38:41` torch line, a traceback's
# body) takes the time of the next stamped line within this many lines, else the last before it
NEAR_AFTER = 24


def _nearest_time(stamped: list[tuple[int, str]], numbers: list[int], line: int) -> str | None:
    """The time of `line` from the kept lines around it. The next stamped line comes first: a
    failure's own lines follow it at once, while the last stamped line before it can be a load
    line minutes older (an NCCL watchdog fires ten minutes after the last batch)."""
    i = bisect.bisect_left(numbers, line)
    if i < len(numbers) and numbers[i] - line <= NEAR_AFTER:
        return stamped[i][1]
    return stamped[i - 1][1] if i else None


def _restarts(lines: list[LogLine]) -> list[LogLine]:
    """The launch lines after the first: the server started again in the same log."""
    from triage.pipeline.parse.config import start_lines

    return start_lines(lines)[1:]


def build_chart(report: Report, buckets: list[Bucket], load_lines: int, lines: list[LogLine],
                source: tuple[str, int] | None) -> Chart:
    """The chart of an analysed log: `buckets` from the scan (already finished), `lines` the
    parsed lines the stages read, `source` the regular file they came from (None: a stream)."""
    tl = report.timeline
    start = tl.first_time
    stamped = [(ln.no, ln.ts) for ln in lines if ln.ts]  # collect_lines gives them in line order
    numbers = [no for no, _ in stamped]

    def at(line: int | None, ts: str | None = None) -> float | None:
        if not ts and line is not None and stamped:
            ts = _nearest_time(stamped, numbers, line)
        return seconds_between(start, ts) if start and ts else None

    chart = Chart(start=start, points=_points(buckets, start), load_lines=load_lines,
                  first_line=tl.first_line or 1, last_line=report.lines)
    chart.last_seconds = max((s for s in (at(ln.no) for ln in reversed(lines[-50:])) if s is not None), default=None)
    if chart.points and chart.points[-1].seconds is not None:
        chart.last_seconds = max(chart.last_seconds or 0.0, chart.points[-1].seconds)
    phases = list(tl.phases)
    # the last phase lasts until ready; never ready: until the crash, or the log's end
    if tl.ready is not None:
        last_end, last_end_s = tl.ready.line, at(tl.ready.line)
    elif tl.crash is not None:
        last_end, last_end_s = tl.crash.line, at(tl.crash.line, tl.crash_time)
    else:
        last_end, last_end_s = report.lines, chart.last_seconds
    for k, p in enumerate(phases):
        nxt = phases[k + 1] if k + 1 < len(phases) else None
        end_line = nxt.line if nxt else last_end
        end_s = at(nxt.line, nxt.time) if nxt else last_end_s
        chart.marks.append(ChartMark(kind="phase", label=p.name, line=p.line, seconds=at(p.line, p.time),
                                     end_line=end_line, end_seconds=end_s))
    if tl.ready is not None:
        crash = tl.crash.line if tl.crash else None
        chart.marks.append(ChartMark(kind="phase", label="serving", line=tl.ready.line, seconds=at(tl.ready.line),
                                     end_line=crash or report.lines, end_seconds=at(crash) if crash else chart.last_seconds))
    for f in report.failures:
        label = f.exception + (f" ({f.count} times, the last at line {f.last_line})" if f.count > 1 and f.last_line else "")
        chart.marks.append(ChartMark(kind="failure" if f.fatal else "request-error", label=label,
                                     line=f.line, seconds=at(f.line, f.time), strong=tl.crash is not None and f.line == tl.crash.line))
    restarts = _restarts(lines)
    for k, ln in enumerate(restarts):
        chart.marks.append(ChartMark(kind="restart", label="server started again", line=ln.no, seconds=at(ln.no)))
        upto = restarts[k + 1].no if k + 1 < len(restarts) else report.lines
        chart.marks += _phases_after(lines, ln.no, upto, at, chart.last_seconds if upto == report.lines else at(upto))
    if tl.crash is not None and buckets:
        chart.zoom = _points(_zoom(buckets, tl.crash.line, source), start)
    _within_seconds(chart)
    return chart


def _phases_after(lines: list[LogLine], first: int, upto: int, at: Callable[[int | None, str | None], float | None],
                  end_s: float | None) -> list[ChartMark]:
    """A restart's phases, by the same phase machine as the first start's (parse/timeline.py),
    each lasting until the next; once ready, serving until the next start or the log's end."""
    sglang = any(ln.dialect == "sglang" or FIRED_UP in ln.message for ln in lines)
    phase = STARTING
    marks: list[ChartMark] = []
    for ln in lines:
        if not first < ln.no <= upto:
            continue
        target = next_phase(phase, ln.message, sglang)
        if target is None:
            continue
        phase = target
        if marks:
            marks[-1].end_line, marks[-1].end_seconds = ln.no, at(ln.no, ln.ts)
        marks.append(ChartMark(kind="phase", label=SERVING if target == READY_PHASE else target, line=ln.no,
                               seconds=at(ln.no, ln.ts)))
        if target == READY_PHASE:
            break
    if marks:
        marks[-1].end_line, marks[-1].end_seconds = upto, end_s
    return marks


def _within_seconds(chart: Chart) -> None:
    """A mark in a second whose load points were spread over it (_spread) goes between them by
    its line: a crash right after the second's last load line is drawn after it, not before."""
    by_second: dict[int, list[int]] = {}
    zoomed: dict[int, list[int]] = {}  # the crash's window is finer where it has the second
    for grid, into in ((chart.points, by_second), (chart.zoom, zoomed)):
        for p in grid:
            if p.seconds is not None:
                into.setdefault(int(p.seconds), []).append(p.end_line)
    by_second.update(zoomed)

    def placed(line: int | None, s: float | None) -> float | None:
        if line is None or s is None or s != int(s) or len(by_second.get(int(s), ())) < 2:
            return s
        lines = by_second[int(s)]  # the points sit at s + k/n (_spread): a mark goes halfway between two
        return s + max(bisect.bisect_right(lines, line) - 0.5, 0.0) / len(lines)

    for m in chart.marks:
        m.seconds = placed(m.line, m.seconds)
        m.end_seconds = placed(m.end_line, m.end_seconds)


def add_host_events(report: Report) -> None:
    """The host records' events (`analyze --with`) on the chart's clock: placed from their
    distance to the failure, which the host stage measured on the server log's clock."""
    chart, host = report.chart, report.host
    if chart is None or host is None or not host.events:
        return
    base = seconds_between(chart.start, host.failure_time) if chart.start and host.failure_time else None
    for k, ev in enumerate(host.events):
        placed = base is not None and ev.seconds_before_failure is not None
        seconds = base - ev.seconds_before_failure if placed else None  # type: ignore[operator]
        label = ev.kind + (f" Xid {ev.xid}" if ev.xid is not None else "")
        chart.marks.append(ChartMark(kind="host", label=label, seconds=seconds,
                                     strong=ev.hardware or k == host.attribution.cause))

