"""Failures that are not Python tracebacks: one line says it.

Each marker has a kind and a rank: primary markers (NCCL, CUDA, C++ aborts, watchdogs)
are failures in their own right; secondary ones (SIGQUIT to the parent, `Killed`, the
engine-dead wrappers) usually follow a primary failure and are attached to it instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from triage.parse.lines import LogLine


@dataclass(frozen=True)
class Marker:
    kind: str
    exception: str
    rx: regex.Pattern[str]
    primary: bool


def _m(kind: str, exception: str, pattern: str, primary: bool = True) -> Marker:
    return Marker(kind, exception, regex.compile(pattern), primary)


# Benign lines that contain a marker's words; checked first.
BENIGN = regex.compile(
    r"NCCL WARN (?:NET/Plugin|Could not find|Failed to open libibverbs|NCCL_SOCKET_IFNAME)|"
    r"Setup Custom allreduce failed|Ignore import error|cannot open shared object file|"
    r"out-of-memory error occurs during cudagraph capture|If out-of-memory error occurs|"
    r"Error: 0 errors|\b(?:GET|POST) /\S* HTTP/[\d.]+\" [45]\d\d"
)

MARKERS: list[Marker] = [
    _m("nccl", "NCCL watchdog timeout", r"Watchdog caught collective operation timeout: (?P<msg>.+)"),
    _m("nccl", "NCCL error", r"NCCL WARN (?P<msg>.+)"),
    _m("nccl", "NCCL error", r"(?P<msg>(?:NCCL error|nccl\w*Error)\b.*?(?:unhandled|internal|remote|system|invalid|timeout|error).*)"),
    _m("cxx", "C++ exception", r"terminate called after throwing an instance of '(?P<type>[^']+)'"),
    _m("cxx", "C++ exception", r"what\(\):\s+(?P<msg>\S.*)"),
    _m("cuda", "CUDA error", r"(?P<msg>CUDA error: .+|Cuda failure .+|CUDA_ERROR_\w+.*)"),
    _m("segfault", "Fatal Python error", r"Fatal Python error: (?P<msg>.+)"),
    _m("segfault", "Segmentation fault", r"(?P<msg>Segmentation fault(?: \(core dumped\))?|Bus error(?: \(core dumped\))?)\s*$"),
    _m("watchdog", "Watchdog timeout", r"(?P<msg>(?:\w+ )?[Ww]atchdog timeout \(self\.watchdog_timeout=.*)"),
    _m("oom-kill", "Killed", r"(?P<msg>Out of memory: Kill(?:ed)? process \d+.*|line \d+:\s+\d+ Killed\b.*|^Killed\s*$)", primary=False),
    _m("sigquit", "SIGQUIT", r"(?P<msg>Received sigquit from a child proces+\b.*|SIGQUIT received\..*)", primary=False),
    _m("engine-fatal", "EngineCore fatal error", r"(?P<msg>EngineCore (?:encountered a fatal error|failed to start)\.?.*)", primary=False),
    _m("engine-fatal", "Engine core initialization failed", r"(?P<msg>Engine core initialization failed\..*)", primary=False),
    _m("engine-fatal", "Process died", r"(?P<msg>(?:Engine core proc|Worker proc|RayWorkerProc|Engine core process) .* died unexpectedly.*)", primary=False),
    _m("engine-fatal", "Scheduler dead", r"(?P<msg>Rank \d+ scheduler (?:is dead|died during initialization).*)", primary=False),
    _m("shard", "ShardCannotStart", r"(?P<msg>Error: ShardCannotStart|Shard \d+ failed to start.*)", primary=False),
    _m("error-line", "ERROR", r"(?P<msg>UNAVAILABLE: .+)"),
]


@dataclass
class MarkerHit:
    marker: Marker
    line: LogLine
    message: str
    exception: str


def find_markers(lines: list[LogLine]) -> list[MarkerHit]:
    out: list[MarkerHit] = []
    for ln in lines:
        msg = ln.message
        if msg.startswith(("Receive: obj=", "Finish: obj=", "Received request ")) or BENIGN.search(ln.text):
            continue
        for mk in MARKERS:
            m = mk.rx.search(msg)
            if m:
                gd = m.groupdict()
                exc = gd.get("type") or mk.exception
                text = (gd.get("msg") or m.group(0)).strip()
                out.append(MarkerHit(mk, ln, text, exc))
                break
    return out
