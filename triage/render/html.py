"""`--format html`: one self-contained page (no script, font, stylesheet or image fetched from
anywhere; it works from file:// and as a mail attachment) with the report and its timeline.

The Report is already redacted (commands/output.py) as every output is. Every value from the
log goes through Jinja's autoescape, and the SVG (render/timeline_svg.py) escapes its own
texts, so no log line becomes markup. Links (`<a href>`) go only to the catalogue's http(s)
references (upstream threads), never to anything the log says.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup

from triage.core.models import Evidence, Failure, Finding, Report, Workaround
from triage.core.terminal import printable
from triage.render.markdown import (
    ENGINE_NAMES,
    MAX_EVIDENCE_CHARS,
    MAX_EVIDENCE_LINES,
    PACKAGE_NAMES,
    derived_settings,
    do_now,
    seconds,
    size,
    where,
)
from triage.render.timeline_svg import LABELS, draw, series, timed

_TEMPLATES = Path(__file__).resolve().parent / "templates"


def change_text(w: Workaround) -> str:
    """The change a workaround asks for, as plain words (the template escapes it)."""
    parts = []
    if w.flags:
        parts.append("add " + " ".join(w.flags))
    if w.remove_flags:
        parts.append("remove " + " ".join(w.remove_flags))
    if w.env:
        parts.append("set " + " ".join(w.env))
    if w.action:
        parts.append(w.action.rstrip(". "))
    return "; ".join(parts) or w.title


def evidence_rows(items: list[Evidence]) -> list[tuple[int, str]]:
    rows = []
    for e in items[:MAX_EVIDENCE_LINES]:
        text = printable(e.text).replace("\t", "    ")
        if len(text) > MAX_EVIDENCE_CHARS:
            text = f"{text[:MAX_EVIDENCE_CHARS]} ... [{len(text) - MAX_EVIDENCE_CHARS:,} more characters]"
        rows.append((e.line, text))
    return rows


def link(url: str | None) -> str | None:
    """A catalogue reference that may become a link: http(s) only (no javascript:, data:, file:)."""
    return url if url and url.startswith(("https://", "http://")) and '"' not in url else None


def _derived(f: Failure, r: Report) -> list[tuple[str, str | None]]:
    return [(name, None if v is None else str(v)) for name, v in derived_settings(f, r)]


def _where(f: Failure) -> str:
    return where(f) + (f" at {f.time}" if f.time else "")


def _verdict(r: Report, top: Finding | None) -> str:
    if r.host is not None and r.host.attribution.verdict:
        return r.host.attribution.verdict
    if not r.failures and not r.findings:
        return f"No failure found in {r.lines:,} lines."
    if r.exit_code == 0:
        return "The server did not die: no process-level failure; the request-level errors it survived are below."
    if top is not None and not top.generic:
        return f"{top.title} ({top.signature}, confidence {top.confidence:.2f})."
    f = r.failures[0]
    return f"Unknown failure: {f.exception}" + (f": {f.message[:200]}" if f.message else "") + \
        ". No specific catalogue signature matches."


def _do_now(r: Report, top: Finding | None) -> tuple[str, str] | None:
    if r.host is not None and r.host.attribution.do_now:
        return r.host.attribution.do_now, ""
    w = do_now(r, top)
    return (change_text(w), w.measured_cost or w.cost) if w is not None else None


def _chart_note(r: Report) -> str:
    c = r.chart
    if c is None:
        return "The timeline was not built."
    if not c.points:
        return "No load figures: the log prints no load lines (SGLang's Decode batch, vLLM's throughput stats), so " \
               "there is no load series to draw; the phases and failures are placed on the log's " + \
               ("time." if timed(c) else "lines.")
    axis = f"time since the log's first timestamp ({c.start})" if timed(c) and c.start else "line number (the log has no timestamps)"
    shown = ", ".join(LABELS.get(k, k) for k in series(c.points))
    return (f"{c.load_lines:,} load lines, drawn as {len(c.points):,} points (each the minimum to maximum of its stretch of "
            f"the log, the line its last value); x axis: {axis}. Lanes: {shown}.")


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_TEMPLATES)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(change=change_text, evidence=evidence_rows, link=link, where=_where, seconds=seconds, size=size,
                       package_name=lambda p: PACKAGE_NAMES.get(p, p), derived=_derived)
    return env.get_template("report.html.j2")


def render_html(r: Report) -> str:
    """The page for one log's report."""
    top = r.findings[0] if r.findings else None
    by_failure: dict[int, list[Finding]] = {}
    for x in r.findings:
        if x.failure is not None:
            by_failure.setdefault(x.failure, []).append(x)
    chart = r.chart
    main = draw(chart) if chart is not None else ""
    zoom = draw(chart, zoom=True) if chart is not None and chart.zoom else ""
    env = r.environment
    env_rows = [(k, v) for k, v in (("engine", ENGINE_NAMES.get(env.engine or "", env.engine)), ("version", env.version),
                                    ("model", env.model), ("GPU", env.gpu), ("GPUs", env.gpu_count),
                                    ("TP / DP / PP", " / ".join(str(x or 1) for x in (env.tp_size, env.dp_size, env.pp_size))),
                                    ("attention backend", env.attention_backend), ("quantization", env.quantization),
                                    ("KV-cache dtype", env.kv_cache_dtype), ("CUDA graphs", env.cuda_graph))
                if v not in (None, "")]
    return _template().render(
        r=r, top=top, verdict=_verdict(r, top), do_now=_do_now(r, top), by_failure=by_failure,
        applied=[change_text(w) for w in (top.workarounds if top is not None else []) if w.status == "already-applied"],
        fatal=[(i, f) for i, f in enumerate(r.failures) if f.fatal],
        requests=[(i, f) for i, f in enumerate(r.failures) if not f.fatal],
        loose=[x for x in r.findings if x.failure is None], env_rows=env_rows,
        timeline_svg=Markup(main), zoom_svg=Markup(zoom), chart_note=_chart_note(r),
    )
