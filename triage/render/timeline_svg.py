"""The HTML report's timeline, drawn as inline SVG from Report.chart: one lane per load figure
(its min-max band and its last value; one line per rank where ranks differ), the phases as
bands, failures and restarts as markers, host events on a lane of their own.

Drawn here, in Python, so that the page needs no script and looks the same opened from disk,
in a mail client or printed. Colours are CSS classes, so that the page's light and dark
themes apply to the chart too. Every text (labels, tooltips) is escaped: a mark's label is an
exception name or a host event's kind, which come from the log.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from html import escape

from triage.core.models import Chart, ChartMark, ChartPoint

WIDTH = 1000
LEFT, RIGHT = 128, 16  # the lane labels' column; a margin for the last tick's label
LANE_H, MARK_H, PHASE_H, AXIS_H, GAP = 56, 22, 20, 26, 8
MAX_RANKS = 8  # lines per lane; more ranks than this are summed up in the lane's tooltip

LABELS = {"running": "running requests", "queued": "queued requests", "token_usage": "KV-cache usage %",
          "throughput": "throughput tok/s", "cache_hit": "prefix-cache hit %"}
ORDER = list(LABELS)


@dataclass
class Axis:
    """Seconds from the log's first timestamp, or line numbers when the log has none."""

    lo: float
    hi: float
    timed: bool

    def x(self, v: float) -> float:
        span = (self.hi - self.lo) or 1.0
        return LEFT + (WIDTH - LEFT - RIGHT) * (min(max(v, self.lo), self.hi) - self.lo) / span

    def label(self, v: float) -> str:
        if not self.timed:
            return f"line {int(v):,}"
        s = int(round(v))
        h, rest = divmod(s, 3600)
        return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


class _Placer:
    """Where a line number or a mark goes on the axis: a mark without a time of its own takes
    the time of the load point around its line."""

    def __init__(self, chart: Chart, timed: bool) -> None:
        self.timed = timed
        known = sorted((p.end_line, p.seconds) for p in chart.points + chart.zoom if p.seconds is not None)
        self.lines = [a for a, _ in known]
        self.secs = [b for _, b in known]

    def line(self, line: int | None) -> float | None:
        if line is None:
            return None
        if not self.timed:
            return float(line)
        if not self.lines:
            return None
        i = min(bisect.bisect_left(self.lines, line), len(self.lines) - 1)
        return self.secs[i]

    def point(self, p: ChartPoint) -> float | None:
        return (p.seconds if p.seconds is not None else self.line(p.end_line)) if self.timed else float(p.end_line)

    def mark(self, m: ChartMark, end: bool = False) -> float | None:
        s, ln = (m.end_seconds, m.end_line) if end else (m.seconds, m.line)
        if not self.timed:
            return None if ln is None else float(ln)
        return s if s is not None else self.line(ln)


def timed(chart: Chart) -> bool:
    """A time axis when most load points carry a time (a log without timestamps: line numbers)."""
    pts = chart.points
    if not pts:
        return chart.start is not None and chart.last_seconds is not None
    return sum(p.seconds is not None for p in pts) * 2 > len(pts)


def series(points: list[ChartPoint]) -> dict[str, list[str]]:
    """metric -> its keys to draw: the metric alone, or one key per rank when ranks differ."""
    keys: dict[str, list[str]] = {}
    for p in points:
        for k in p.values:
            base = k.split(" ", 1)[0]
            if k not in keys.setdefault(base, []):
                keys[base].append(k)
    out = {}
    for base in sorted(keys, key=lambda b: ORDER.index(b) if b in ORDER else len(ORDER)):
        ks = sorted(keys[base])
        # every rank printed the same figures wherever a stretch holds several ranks' lines: one
        # line says it (stretches with a single rank's lines can tell nothing either way)
        shared = [{tuple(v) for k in ks if (v := p.values.get(k)) is not None} for p in points
                  if sum(k in p.values for k in ks) > 1]
        if len(ks) > 1 and shared and all(len(s) == 1 for s in shared):
            ks = ks[:1]
        out[base] = ks
    return out


def _lane_label(y: float, h: float, text: str) -> str:
    return f'<text class="lane-label" x="{LEFT - 6}" y="{y + h / 2 + 4:.1f}" text-anchor="end">{escape(text)}</text>'


def _segments(own: list[tuple[float, list[float]]]) -> list[list[tuple[float, list[float]]]]:
    """The points cut where the log printed no load line for a long stretch (the server was
    down, restarting, loading): a line drawn across that gap would show load that was not there."""
    gaps = sorted(g for a, b in zip(own, own[1:], strict=False) if (g := b[0] - a[0]) > 0)
    if not gaps:
        return [own]
    wide = max(12.0, 6 * gaps[len(gaps) // 2])
    out = [[own[0]]]
    for a, b in zip(own, own[1:], strict=False):
        if b[0] - a[0] > wide:
            out.append([])
        out[-1].append(b)
    return out


def _load_lane(base: str, keys: list[str], pts: list[tuple[float, ChartPoint]], axis: Axis, y: float) -> str:
    vals = [v for _, p in pts for k in keys if (v := p.values.get(k)) is not None]
    top = max((v[1] for v in vals), default=0.0) or 1.0
    if base in ("token_usage", "cache_hit"):
        top = max(top, 100.0) if top > 50 else top
    lo_y, span = y + LANE_H - 2, LANE_H - 6

    def yv(v: float) -> float:
        return lo_y - span * (v / top)

    body = [f'<g class="lane lane-load" id="lane-{base}" data-metric="{base}">',
            f'<rect class="lane-bg" x="{LEFT}" y="{y:.1f}" width="{WIDTH - LEFT - RIGHT}" height="{LANE_H}"/>',
            _lane_label(y, LANE_H, LABELS.get(base, base)),
            f'<text class="tick-label" x="{LEFT + 3}" y="{y + 10:.1f}">{_fmt(top)}</text>']
    for n, key in enumerate(keys[:MAX_RANKS]):
        own = [(x, p.values[key]) for x, p in pts if key in p.values]
        if not own:
            continue
        # one figure: the metric's own colour in every lane; per rank: a colour per rank
        cls = f"s{(ORDER.index(base) if base in ORDER else 0) % 6}" if len(keys) == 1 else f"s{n % 6}"
        peak = max(v[1] for _, v in own)
        name = LABELS.get(base, base) + (key[len(base):] if len(keys) > 1 else "")
        for seg in _segments(own):
            if len(keys) == 1 and len(seg) > 1:
                band = [f"{x:.1f},{yv(v[1]):.1f}" for x, v in seg] + [f"{x:.1f},{yv(v[0]):.1f}" for x, v in reversed(seg)]
                body.append(f'<polygon class="band {cls}" points="{" ".join(band)}"/>')
            tip = f"<title>{escape(name)}: peak {_fmt(peak)}</title>"
            coords = [f"{x:.1f},{yv(v[2] if len(keys) == 1 else v[1]):.1f}" for x, v in seg]
            if len(set(coords)) == 1:
                # a lone point between gaps (or several in the same second at the same value): a
                # line through one point has no length, and a browser draws nothing for it
                cx, cy = coords[0].split(",")
                body.append(f'<circle class="dot {cls}" cx="{cx}" cy="{cy}" r="2">{tip}</circle>')
                continue
            body.append(f'<polyline class="series {cls}" points="{" ".join(coords)}">{tip}</polyline>')
    if len(keys) > 1:
        shown = ", ".join(k[len(base):].strip() for k in keys[:MAX_RANKS])
        more = f" (+{len(keys) - MAX_RANKS} more)" if len(keys) > MAX_RANKS else ""
        body.append(f'<text class="tick-label" x="{WIDTH - RIGHT - 3}" y="{y + 10:.1f}" text-anchor="end">'
                    f'per rank: {escape(shown)}{more}</text>')
    body.append("</g>")
    return "\n".join(body)


_PHASE_CLASS = {"loading weights": "phase-0", "allocating KV cache": "phase-1", "capturing CUDA graphs": "phase-2",
                "warming up": "phase-3", "serving": "phase-serving"}


def _phase_lane(marks: list[ChartMark], place: _Placer, axis: Axis, y: float) -> str:
    body = ['<g class="lane lane-phases" id="lane-phases">', _lane_label(y, PHASE_H, "phases")]
    for m in marks:
        a, b = place.mark(m), place.mark(m, end=True)
        if a is None:
            continue
        b = a if b is None else b
        if b < axis.lo or a > axis.hi:
            continue
        x0, x1 = axis.x(a), axis.x(b)
        w = max(x1 - x0, 2.0)
        cls = _PHASE_CLASS.get(m.label, "phase-1")  # by name: a restart's phases look like the first start's
        body.append(f'<rect class="phase {cls}" x="{x0:.1f}" y="{y:.1f}" width="{w:.1f}" height="{PHASE_H}">'
                    f'<title>{escape(m.label)} (line {m.line})</title></rect>')
        if w > 7 * len(m.label):
            body.append(f'<text class="phase-label" x="{x0 + 4:.1f}" y="{y + 14:.1f}">{escape(m.label)}</text>')
    body.append("</g>")
    return "\n".join(body)


_SHAPES = {"failure": "fail", "request-error": "reqerr", "restart": "restart", "host": "host"}


def _marker(m: ChartMark, x: float, y: float, h: float) -> str:
    cls = _SHAPES.get(m.kind, "fail") + (" strong" if m.strong else "")
    where = f" at line {m.line}" if m.line is not None else ""
    tip = f"<title>{escape(m.kind)}: {escape(m.label)}{where}</title>"
    if m.kind == "restart":
        c = y + h / 2
        return (f'<path class="marker {cls}" d="M{x:.1f},{c - 7:.1f} L{x + 7:.1f},{c:.1f} L{x:.1f},{c + 7:.1f} '
                f'L{x - 7:.1f},{c:.1f} Z">{tip}</path>')
    if m.kind == "host":
        return f'<rect class="marker {cls}" x="{x - 4:.1f}" y="{y + h / 2 - 6:.1f}" width="8" height="12">{tip}</rect>'
    size = 8 if m.strong or m.kind == "failure" else 5
    return (f'<path class="marker {cls}" d="M{x:.1f},{y + h - 3:.1f} L{x - size:.1f},{y + 3:.1f} '
            f'L{x + size:.1f},{y + 3:.1f} Z">{tip}</path>')


def _mark_lane(name: str, label: str, marks: list[ChartMark], place: _Placer, axis: Axis, y: float) -> tuple[str, int]:
    body = [f'<g class="lane lane-{name}" id="lane-{name}">',
            f'<rect class="lane-bg" x="{LEFT}" y="{y:.1f}" width="{WIDTH - LEFT - RIGHT}" height="{MARK_H}"/>',
            _lane_label(y, MARK_H, label)]
    placed = 0
    for m in marks:
        v = place.mark(m)
        if v is None or not axis.lo <= v <= axis.hi:
            continue
        body.append(_marker(m, axis.x(v), y, MARK_H))
        placed += 1
    body.append("</g>")
    return "\n".join(body), placed


def _ticks(axis: Axis, y: float, top: float) -> str:
    span = axis.hi - axis.lo
    steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400] if axis.timed \
        else [10 ** e * m for e in range(0, 10) for m in (1, 2, 5)]
    step = next((s for s in steps if span / s <= 8), steps[-1] * max(1, int(span / steps[-1] / 8) + 1))
    first = (int(axis.lo // step) + (axis.lo % step > 0)) * step
    out = ['<g class="axis" id="axis">', f'<line class="axis-line" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>']
    v = first
    while v <= axis.hi + 1e-9:
        x = axis.x(v)
        out.append(f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top:.1f}" y2="{y + 4:.1f}"/>')
        out.append(f'<text class="tick-label" x="{x:.1f}" y="{y + 16:.1f}" text-anchor="middle">{escape(axis.label(v))}</text>')
        v += step
    out.append("</g>")
    return "\n".join(out)


def draw(chart: Chart, zoom: bool = False, title: str = "") -> str:
    """One <svg>: the whole log, or (`zoom`) the crash's window at its finer grain."""
    is_timed = timed(chart)
    points = chart.zoom if zoom else chart.points
    place = _Placer(chart, is_timed)
    crash_mark = next((m for m in chart.marks if m.strong and m.kind == "failure"), None)
    xs = [x for p in points if (x := place.point(p)) is not None]
    if zoom:
        if not xs:
            return ""
        first = place.line(points[0].line)  # the window's first line, before its first load line
        lo, hi = min(xs[0] if first is None else first, *xs), max(xs)
        crash = place.mark(crash_mark) if crash_mark is not None else None
        if crash is not None:
            hi = max(hi, crash)
        pad = (hi - lo) * 0.04 or 1.0
        axis = Axis(lo - pad, hi + pad, is_timed)
    elif is_timed:
        axis = Axis(0.0, max([chart.last_seconds or 0.0, *xs]) or 1.0, True)
    else:
        axis = Axis(float(chart.first_line), float(max(chart.last_line, chart.first_line + 1)), False)
    pts = [(axis.x(x), p) for p in points if (x := place.point(p)) is not None]
    lanes = series(points)
    phases = [m for m in chart.marks if m.kind == "phase"]
    events = [m for m in chart.marks if m.kind in ("failure", "request-error", "restart")]
    host = [m for m in chart.marks if m.kind == "host"]
    parts: list[str] = []
    y = 4.0
    parts.append(_phase_lane(phases, place, axis, y))
    y += PHASE_H + GAP
    lane, _ = _mark_lane("events", "failures, restarts", events, place, axis, y)
    parts.append(lane)
    y += MARK_H + GAP
    for base, keys in lanes.items():
        parts.append(_load_lane(base, keys, pts, axis, y))
        y += LANE_H + GAP
    if host:
        lane, placed = _mark_lane("host", "host events", host, place, axis, y)
        parts.append(lane)
        y += MARK_H + GAP
    if crash_mark is not None and (cx := place.mark(crash_mark)) is not None and axis.lo <= cx <= axis.hi:
        parts.append(f'<line class="crash-line" x1="{axis.x(cx):.1f}" x2="{axis.x(cx):.1f}" y1="4" y2="{y:.1f}"/>')
    if not zoom and chart.zoom:
        z = [x for p in chart.zoom if (x := place.point(p)) is not None]
        if z:
            x0, x1 = axis.x(min(z)), axis.x(max(z))
            parts.append(f'<rect class="zoom-window" x="{x0 - 1:.1f}" y="2" width="{max(x1 - x0, 2) + 2:.1f}" '
                         f'height="{y - 2:.1f}"><title>the window zoomed below</title></rect>')
    parts.append(_ticks(axis, y, 4.0))
    body = "\n".join(parts)
    if zoom:  # ids are unique in a page: the zoomed copy's lanes are zoom-lane-*
        body = body.replace(' id="', ' id="zoom-')
    height = y + AXIS_H
    label = escape(title or ("the crash's window" if zoom else "the whole log"))
    return (f'<svg class="timeline" id="{"timeline-zoom" if zoom else "timeline"}" '
            f'viewBox="0 0 {WIDTH} {height:.0f}" role="img" aria-label="{label}">\n<title>{label}</title>\n'
            + body + "\n</svg>")
