"""Startup milestones, load figures and the phase the server was in when it failed."""

from __future__ import annotations

from datetime import datetime

from triage.core.models import Evidence, LoadFigures, PhaseSpan, Timeline
from triage.core.recache import re_compile
from triage.pipeline.parse.lines import LogLine

WEIGHTS = re_compile(r"Load weight end|Loading weights took|Model loading took")
GRAPH_BEGIN = re_compile(r"Capture (?:cuda graph|\w+ \w+ CUDA graph|piecewise CUDA graph) begin|Capturing CUDA graphs?|Capturing cudagraphs|Capturing the model for CUDA graphs")
GRAPH_END = re_compile(r"Capture cuda graph end|CUDA graph end\.|Graph capturing finished")
READY = re_compile(r"The server is fired up and ready to roll|Application startup complete")
FIRED_UP = "The server is fired up and ready to roll"
KV_TOKENS = re_compile(r"KV Cache is allocated\.?.*?#tokens: (\d{1,18})(?!\d)|GPU KV cache size: (\d[\d,]{0,23}) tokens"
                       r"|max_total_num_tokens=(\d{1,18})(?!\d)")
LOADING = re_compile(r"Load weight begin|Init torch distributed begin|Starting to load model|Loading model weights|Loading safetensors")

_INT = r"(\d{1,18})(?!\d)"  # a longer run of digits is no figure (and int() refuses 4,300)
_FLOAT = r"(\d{1,18}(?:\.\d{1,18})?)(?![\d.])"  # "1.2.3" is none either
_NUM = {
    "running": re_compile(rf"#running-req: {_INT}|Running: {_INT} reqs"),
    "queued": re_compile(rf"#queue-req: {_INT}|(?:Waiting|Pending): {_INT} reqs"),
    "token_usage": re_compile(rf"token usage: {_FLOAT}|GPU KV cache usage: {_FLOAT}%"),
    "throughput": re_compile(rf"gen throughput \(token/s\): {_FLOAT}|Avg generation throughput: {_FLOAT}"),
}
_GRAPH = re_compile(r"cuda graph: (True|False)")


# The phases a server goes through, in order. One machine for `analyze` (after the fact) and
# `watch` (line by line), so that both name the same phase for the same line.
STARTING = "starting"
LOADING_WEIGHTS = "loading weights"
KV_CACHE = "allocating KV cache"
CUDA_GRAPHS = "capturing CUDA graphs"
WARMING_UP = "warming up"
READY_PHASE = "ready"
SERVING = "serving"  # what a report calls the phase after ready


def next_phase(phase: str, msg: str, sglang: bool) -> str | None:
    """The phase a milestone line moves the server to, or None when it moves nothing.
    Phases only move forward; `sglang` says whether the log is SGLang's, whose uvicorn line
    "Application startup complete" comes before its warm-up request (only "fired up" means it
    serves), while vLLM has no such request."""
    if phase == READY_PHASE:
        return None
    if READY.search(msg):
        if sglang and FIRED_UP not in msg:
            return WARMING_UP if phase != WARMING_UP else None
        return READY_PHASE
    if LOADING.search(msg):
        return LOADING_WEIGHTS if phase == STARTING else None
    if WEIGHTS.search(msg):
        return KV_CACHE if phase in (STARTING, LOADING_WEIGHTS) else None
    if GRAPH_BEGIN.search(msg):
        return CUDA_GRAPHS if phase != CUDA_GRAPHS else None
    if GRAPH_END.search(msg):
        return WARMING_UP if phase != WARMING_UP else None
    return None


def _parse_time(ts: str | None) -> datetime | None:
    if not ts:
        return None
    if (len(ts) == 19 or ts[19:20] == "." and 21 <= len(ts) <= 26 and ts[20:].isdigit()) and ts[4] == "-" and ts[10] == " ":
        # SGLang's and most loggers' `2025-09-14 06:13:49[.123]`: the C parser, without
        # strptime's import and its regex compile per format (a hundredth of a small log's run)
        try:
            dt = datetime.fromisoformat(ts)
        except ValueError:
            dt = None
        if dt is not None and dt.tzinfo is None:
            return dt
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%m-%d %H:%M:%S", "%H:%M:%S", "%H:%M:%S.%f"):
        text = ts
        if fmt.startswith("%m-%d"):
            # vLLM prints no year; a day without a year is deprecated in strptime (Python 3.13)
            # and breaks in 3.15. A leap year keeps 02-29 valid; only differences are used.
            text, fmt = f"2000-{ts}", f"%Y-{fmt}"
        try:
            return datetime.strptime(text, fmt)
        except ValueError:
            continue
    return None


def seconds_between(a: str | None, b: str | None) -> float | None:
    ta, tb = _parse_time(a), _parse_time(b)
    if ta is None or tb is None:
        return None
    d = (tb - ta).total_seconds()
    return d if d >= 0 else None


def load_figures(no: int, text: str, ts: str | None = None) -> LoadFigures:
    vals: dict[str, float | int | None] = {}
    for k, rx in _NUM.items():
        m = rx.search(text)
        if m:
            raw = m.group(1) or m.group(2)
            vals[k] = float(raw) if k in ("token_usage", "throughput") else int(raw)
    g = _GRAPH.search(text)
    return LoadFigures(line=no, time=ts, cuda_graph=(g.group(1) == "True") if g else None, **vals)  # type: ignore[arg-type]


def build_timeline(lines: list[LogLine], crash_line: int | None) -> Timeline:
    tl = Timeline()
    if lines:
        tl.first_line = lines[0].no
        tl.first_time = next((ln.ts for ln in lines if ln.ts), None)
    sglang = any(ln.dialect == "sglang" or FIRED_UP in ln.message for ln in lines)
    phase = STARTING
    phase_at_crash = None
    last_ts = None
    spans: list[PhaseSpan] = []
    for ln in lines:
        last_ts = ln.ts or last_ts
        if crash_line is not None and ln.no >= crash_line and phase_at_crash is None:
            phase_at_crash = phase
        msg = ln.message
        if tl.kv_cache_tokens is None and (km := KV_TOKENS.search(msg)):
            tl.kv_cache_tokens = int((km.group(1) or km.group(2) or km.group(3)).replace(",", ""))
        if tl.weights_loaded is None and WEIGHTS.search(msg):
            tl.weights_loaded = Evidence(line=ln.no, text=ln.text)
        if GRAPH_END.search(msg) and phase != READY_PHASE:
            tl.cuda_graphs = Evidence(line=ln.no, text=ln.text)
        target = next_phase(phase, msg, sglang)
        if target is None:
            continue
        phase = target
        if target == READY_PHASE:
            tl.ready = Evidence(line=ln.no, text=ln.text)
            tl.ready_seconds = seconds_between(tl.first_time, last_ts)
        spans.append(PhaseSpan(name=target, line=ln.no, time=ln.ts or last_ts))
    for a, b in zip(spans, spans[1:], strict=False):
        a.seconds = seconds_between(a.time, b.time)
    tl.phases = [s for s in spans if s.name != READY_PHASE] if tl.ready else spans
    if crash_line is not None and phase_at_crash is None:
        phase_at_crash = phase
    if phase_at_crash == READY_PHASE:
        phase_at_crash = SERVING
    # "starting" only means no milestone was seen: say nothing rather than guess
    tl.phase_at_crash = phase_at_crash if crash_line is not None and phase_at_crash != STARTING else None
    return tl
