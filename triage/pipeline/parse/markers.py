"""Failures that are not Python tracebacks: one line says it.

Each marker has a kind and a rank: primary markers (NCCL, CUDA, C++ aborts, watchdogs)
are failures in their own right; secondary ones (SIGQUIT to the parent, `Killed`, the
engine-dead wrappers) usually follow a primary failure and are attached to it instead.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from triage.core.lazyre import lazy
from triage.core.vocabulary import CONTENT_PREFIXES
from triage.pipeline.parse.lines import LogLine


@dataclass(frozen=True)
class Marker:
    """A failure that is not a Python traceback (NCCL, CUDA, a signal, the OOM killer), as a rule."""

    kind: str
    exception: str
    rx: re.Pattern[str]
    primary: bool
    # weak: a line at error level that says something failed, with no more specific shape; it
    # stands as a failure only where no traceback or stronger marker is next to it
    weak: bool = False
    # needs the line to be at an error level (or to carry no level at all)
    error_level: bool = False
    # needs the line to be at an error level: a level-less line is not enough
    needs_level: bool = False
    # literals one of which the line must hold before the pattern runs (the gitleaks idea)
    needs: tuple[str, ...] = ()


def _m(kind: str, exception: str, pattern: str, primary: bool = True, weak: bool = False,
       error_level: bool = False, needs_level: bool = False, needs: tuple[str, ...] = ()) -> Marker:
    return Marker(kind, exception, lazy(pattern), primary, weak, error_level, needs_level, needs)


# Benign lines that contain a marker's words; checked first.
BENIGN = lazy(
    r"NCCL WARN (?:NET/Plugin|Could not find|Failed to open libibverbs|NCCL_SOCKET_IFNAME)|"
    r"Setup Custom allreduce failed|Ignore import error|cannot open shared object file|"
    r"out-of-memory error occurs during cudagraph capture|If out-of-memory error occurs|"
    r"Error: 0 errors|\b(?:GET|POST) /\S* HTTP/[\d.]+\" [45]\d\d"
)

# A Python exception named at the start of what is left of a line once its prefixes are peeled:
# dotted module path, a class name that says it is an error, an optional message.
EXC_NAME = r"(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|Exit|Interrupt)|Exception|KeyboardInterrupt)"
# Levels at which a line reports a failure (glog's E/F, vLLM's ERROR, Rust tracing's ERROR ...)
ERROR_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL", "E", "F"})

LEADING_EXC = lazy(r"^\s*(?P<type>" + EXC_NAME + r")[:(]")

def applies(mk: Marker, ln: LogLine) -> bool:
    """May this marker's pattern run on this line? Its literals first (the cheap prefilter that
    keeps the patterns off ordinary lines), then the level it needs."""
    if mk.needs and not any(k in ln.message for k in mk.needs):
        return False
    level = ln.level.upper() if ln.level is not None else None
    if mk.error_level and level is not None and level not in ERROR_LEVELS:
        return False
    # the catch-all needs the writer to have said ERROR
    return not ((mk.weak or mk.needs_level) and (level is None or level not in ERROR_LEVELS))


MARKERS: list[Marker] = [
    _m("nccl", "NCCL watchdog timeout", r"Watchdog caught collective operation timeout: (?P<msg>.+)", needs=('Watchdog caught',)),
    _m("nccl", "NCCL error", r"NCCL WARN (?P<msg>.+)", needs=('NCCL WARN',)),
    _m("nccl", "NCCL error", r"(?P<msg>(?:NCCL error|nccl\w*Error)\b.*?(?:unhandled|internal|remote|system|invalid|timeout|error).*)", needs=('NCCL', 'nccl')),
    _m("cxx", "C++ exception", r"terminate called after throwing an instance of '(?P<type>[^']+)'", needs=('terminate called',)),
    _m("cxx", "C++ exception", r"what\(\):\s+(?P<msg>\S.*)", needs=('what()',)),
    _m("cuda", "CUDA error", r"(?P<msg>CUDA error: .+|Cuda failure .+|CUDA_ERROR_\w+.*|CUBLAS_STATUS_(?!SUCCESS)\w+.*|cudaError\w+.*|CUresult error.*)", needs=('CUDA', 'Cuda', 'CUBLAS', 'cudaError', 'CUresult')),
    _m("segfault", "Fatal Python error", r"Fatal Python error: (?P<msg>.+)", needs=('Fatal Python error',)),
    _m("segfault", "Segmentation fault", r"(?P<msg>Segmentation fault(?: \(core dumped\))?|Bus error(?: \(core dumped\))?|Aborted \(core dumped\))\s*$", needs=('Segmentation fault', 'Bus error', 'Aborted')),
    _m("segfault", "Signal", r"(?P<msg>(?:Caught|Received|received) signal (?:11|6|7|SIGSEGV|SIGABRT|SIGBUS)\b.*|\*\*\* (?:SIGSEGV|SIGABRT|SIGBUS|SIGFPE|SIGILL) .*|"
       r"\*\*\* Process received signal \*\*\*.*|.{0,120}\(core dumped\).*|.{0,200}\bexited on signal \d+.*)", needs=('signal', 'SIG', 'Process received', 'core dumped')),
    _m("engine-fatal", "Process died", r"(?P<msg>Child process unexpectedly failed with an exit code \d+.*)", primary=False, needs=('Child process unexpectedly',)),
    _m("watchdog", "Watchdog timeout", r"(?P<msg>(?:\w+ )?[Ww]atchdog timeout \(self\.watchdog_timeout=.*)", needs=('atchdog timeout',)),
    _m("oom-kill", "Killed", r"(?P<msg>Out of memory: Kill(?:ed)? process \d+.*|line \d+:\s+\d+ Killed\b.*|^Killed\s*$)", primary=False, needs=('Kill',)),
    _m("sigquit", "SIGQUIT", r"(?P<msg>Received sigquit from a child proces+\b.*|SIGQUIT received\..*)", primary=False, needs=('sigquit', 'SIGQUIT')),
    _m("engine-fatal", "EngineCore fatal error", r"(?P<msg>EngineCore (?:encountered a fatal error|failed to start)\.?.*)", primary=False, needs=('EngineCore',)),
    _m("engine-fatal", "Engine core initialization failed", r"(?P<msg>Engine core initialization failed\..*)", primary=False, needs=('Engine core initialization',)),
    _m("engine-fatal", "Process died", r"(?P<msg>(?:Engine core proc|Worker proc|RayWorkerProc|Engine core process) .* died unexpectedly.*)", primary=False, needs=('died unexpectedly',)),
    _m("engine-fatal", "Scheduler dead", r"(?P<msg>Rank \d+ scheduler (?:is dead|died during initialization).*)", primary=False, needs=('scheduler',)),
    _m("shard", "ShardCannotStart", r"(?P<msg>Error: ShardCannotStart|Shard \d+ failed to start.*)", primary=False, needs=('ShardCannotStart', 'failed to start')),
    _m("error-line", "ERROR", r"(?P<msg>UNAVAILABLE: .+)", needs=('UNAVAILABLE: ',)),
    # the engines' own error vocabulary, not Python
    _m("engine-error", "TensorRT-LLM error", r"\[TensorRT-LLM\]\[(?:ERROR|FATAL)\]\s*(?P<msg>\S.*)", needs=('[TensorRT-LLM][',)),
    _m("engine-error", "TensorRT-LLM error", r"\[TRT-LLM\]\s*\[E\]\s*(?P<msg>\S.*)", needs=('[TRT-LLM]',)),
    _m("engine-error", "TensorRT error", r"\[TRT\]\s*\[E\]\s*(?P<msg>\S.*)", needs=('[TRT]',)),
    _m("engine-error", "TurboMind error", r"\[TM\]\[(?:ERROR|FATAL)\]\s*(?P<msg>\S.*)", needs=('[TM][',)),
    _m("engine-error", "Assertion failed", r"(?P<msg>\bAssertion failed\b.*|Assertion [`'].{1,300}' failed.*)", needs=('Assertion',)),
    # failures announced inside a sentence
    _m("exception", "", r"(?P<msg>.{0,200}?\bwith exception (?P<type>" + EXC_NAME + r")\b.*)", needs=('with exception',)),
    # asyncio: future: <Future finished exception=AssertionError('expected running sequences')>
    _m("exception", "", r"(?P<msg>.{0,80}\bexception=(?P<type>" + EXC_NAME + r")\(.*)", needs=('exception=',)),
    _m("exception", "Exception in worker",
       r"(?P<msg>Exception in worker \S.{0,120}? while processing method \w+.*)", needs=('Exception in worker',)),
    # any Python exception line, with or without a traceback around it
    _m("exception", "", r"^\s*(?P<type>" + EXC_NAME + r")(?::\s?(?P<msg>.*)|\((?P<repr>.*)|\s*$)", error_level=True, needs=('Error', 'Exception', 'Exit', 'Interrupt')),
    # an error-level line that quotes the exception behind it: "ERROR: Failed to create instance: TypeError: ..."
    _m("exception", "", r"(?<=: )(?P<type>" + EXC_NAME + r"): (?P<msg>\S.*)", error_level=True, needs_level=True, needs=('Error', 'Exception', 'Exit', 'Interrupt')),
    # an error-level line that says something failed (the catch-all; weakest)
    _m("error-line", "Error", r"(?i)(?P<msg>.{0,300}?\b(?:failed|failure|fatal|exception|error|abort(?:ed|ing)?|"
       r"crash(?:ed)?|died|cannot|can't|unable to|timed out|timeout)\b.*)", weak=True, error_level=True, needs=()),
]

@dataclass
class MarkerHit:
    """A line on which a marker fired."""

    marker: Marker
    line: LogLine
    message: str
    exception: str


def find_markers(lines: list[LogLine], inside: list[tuple[int, int]] | None = None) -> list[MarkerHit]:
    """Marker lines, outside the (start, end) line spans of parsed tracebacks: a line of a
    traceback is that traceback's, whatever words it holds."""
    out: list[MarkerHit] = []
    spans: list[tuple[int, int]] = []
    for a, b in sorted(inside or []):  # interleaved ranks' tracebacks overlap: merge them
        if spans and a <= spans[-1][1]:
            spans[-1] = (spans[-1][0], max(b, spans[-1][1]))
        else:
            spans.append((a, b))
    starts = [a for a, _ in spans]
    for ln in lines:
        if spans:
            i = bisect.bisect_right(starts, ln.no) - 1
            if i >= 0 and ln.no <= spans[i][1]:
                continue
        msg = ln.message
        if msg.startswith(CONTENT_PREFIXES):
            continue
        if BENIGN.search(ln.text) and not LEADING_EXC.match(msg):
            continue  # a benign warning's words; an exception that says the same is still a failure
        for mk in MARKERS:
            if not applies(mk, ln):
                continue
            m = mk.rx.search(msg)
            if m:
                gd = m.groupdict()
                exc = gd.get("type") or mk.exception
                text = (gd.get("msg") or gd.get("repr") or m.group(0) or "").strip()
                if gd.get("repr"):
                    text = text[:-1] if text.endswith(")") else text  # Type('message') -> 'message'
                named = LEADING_EXC.match(msg)
                if named and not gd.get("type"):
                    # "RuntimeError: CUDA error: ..." is a CUDA failure that Python names RuntimeError
                    exc = named["type"]
                out.append(MarkerHit(mk, ln, text, exc))
                break
    return out
