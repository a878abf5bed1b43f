"""Line prefixes of the engines' dialects: timestamp, rank, level, process stream.

Wrappers are peeled from the outside in (container and Ray prefixes, Markdown quoting),
then one engine prefix is recognised. `message` is what is left: the text a traceback
parser or a signature pattern cares about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from triage.core.recache import re_compile

ANSI = re_compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|(?<![\w\]])\[(?:\d{1,3};)*\d{1,3}m")

_WRAPPERS = [
    # Kubernetes / containerd: 2025-01-01T00:00:00.123+08:00 stdout F
    re_compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)? (?:stdout|stderr) [FP] "),
    # docker logs --timestamps: RFC3339 stamp then a space
    re_compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z (?=\S)(?!\s*(?:INFO|WARN|ERROR|DEBUG|TRACE)\b)"),
    # docker compose: service-1  |
    re_compile(r"[\w.-]+-\d+\s+\| "),
    # Buildkite / generic pipe gutter, and the box-drawing gutter of rich consoles
    re_compile(r"\s{0,4}[|│┃] (?=\S)"),
    # CI timestampers and log shippers: [2025-11-06T02:10:00.702Z] msg
    re_compile(r"\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\] ?"),
    # syslog / journald: Apr  3 17:38:57 host prog[123]: msg
    re_compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w./@-]+(?:\[\d+\])?: "),
]
# cloud log viewers put the severity and an RFC 3339 stamp first: ERROR 2026-06-15T14:10:59.39Z msg
_CLOUD = re_compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL|DEFAULT) \d{4}-\d\d-\d\dT[\d:.]+Z? "
                       r"(?:\[[\w.]+: [^\]]{0,80}\] )*")

# Ray / vLLM process prefixes: (VllmWorker rank=0 pid=123), (EngineCore_DP0 pid=4), (SGLangEngine pid=9, ip=1.2.3.4)
_PROC = re_compile(
    r"\((?P<proc>[A-Za-z_][\w]*)(?: rank=(?P<rank>\d+))? pid=(?P<pid>\d+)(?:, ip=[^)]*)?\)\s?"
)
# torch: [rank0]: and the c10d glog tail [rank0]:[E219 12:14:43.351647859 ProcessGroupNCCL.cpp:1595]
_TORCH_RANK = re_compile(r"\[rank(?P<rank>\d+)\]:(?:\[[EWIF]\d{3,4} [\d:.]+ [\w.]+:\d+\] ?)?")
# vLLM: INFO 05-12 10:11:12 [file.py:123] msg   (<=0.7: INFO 05-12 10:11:12 file.py:123] msg)
_VLLM = re_compile(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? "
    r"\[?(?P<src>[\w./-]+\.py:\d+)\] ?"
)
# SGLang: [2025-06-24 22:26:45 DP15 TP15] msg, [12:00:00 TP0], [TP5 EP5], [2025-06-24 22:26:45.123]
_SGL = re_compile(
    r"\[(?P<ts>(?:\d{4}-\d\d-\d\d |\d\d-\d\d )?\d\d:\d\d:\d\d(?:\.\d+)?)?"
    r"(?P<ranks>(?:\s?(?:DP|PP|TP|EP|ATTN_CP|MOE_DP)\d+)*)\] ?"
)
_SGL_GPU = re_compile(r"\[gpu_id=(?P<gpu>\d+)\] ?")
# glog (Triton, c10d): I0110 21:30:54.920681 60 server.cc:592]
_GLOG = re_compile(r"(?P<level>[IWEF])\d{4} (?P<ts>\d\d:\d\d:\d\d\.\d+)\s+\d+ [\w.]+:\d+\] ?")
# Rust tracing (TGI): 2024-03-06T17:53:22.335714Z  INFO shard-manager: ...
_TRACING = re_compile(
    r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)\s+(?P<level>TRACE|DEBUG|INFO|WARN|ERROR) "
)
_UVICORN = re_compile(r"(?P<level>INFO|WARNING|ERROR|DEBUG):\s{2,}")
# Python logging's common formats (LMDeploy, Triton's Python models, many wrappers):
# 2024-07-08 10:00:00,123 - lmdeploy - ERROR - engine.py:123 - msg   /   2024-07-08 10:00:00 ERROR msg
_PYLOG = re_compile(
    r"(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?)\s+(?:-\s+[\w.]+\s+-\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?:\s+\d+)?(?:\s+\[?[\w./-]+\.py:\d+\])?"
    r"\s*(?:-\s+(?:[\w./-]+:\d+\s+-\s+)?|:\s+|\s|$)"
)


@dataclass(slots=True)
class LogLine:
    """One kept line of the log: number, text, and its prefix (time, rank, logger) split off."""

    no: int  # 1-based line number in the source
    text: str  # the whole line, ANSI and \r removed
    message: str  # the line without wrappers and engine prefix
    ts: str | None = None
    rank: str | None = None  # "TP3", "DP1 TP3", "rank0", "Worker_TP1" ...
    stream: str | None = None  # key that separates interleaved writers
    level: str | None = None
    dialect: str | None = None  # sglang | vllm | torch | glog | tracing | None
    prefixed: bool = False  # an engine prefix was found (a traceback body line has none)
    joined: int = 0  # lines of a hard-wrapped paste joined onto this one


# What pasting a log into an issue, a chat or a ticket adds around it: code fences and stray
# backticks, Markdown bold, collapsible-section tags, quote markers. Removed here, once, so that
# every later stage sees the log as the server wrote it; line numbers are the original ones.
_PASTE_FENCE = re_compile(r"^\s*```(?:[\w+-]+\s*$)?|```\s*$")
_PASTE_TAGS = re_compile(r"</?(?:details|summary|pre|code|br|p)\b[^>]{0,80}>", re.I)
_PASTE_BOLD = re_compile(r"(?:^|(?<=\s))\*\*(?=[^\s*])(.{1,400}?)(?<=[^\s*])\*\*(?=\s|$|[:.,;])")
_PASTE_QUOTE = re_compile(r"^(?:>[ \t]?)+")


def clean(raw: str) -> str:
    if "\x1b" in raw or "[" in raw:
        raw = ANSI.sub("", raw)
    raw = raw.replace("\r", "").replace("^M", "").replace("\x00", "")
    if "`" in raw:
        raw = _PASTE_FENCE.sub("", raw)
        if raw.count("`") == 2 and raw[:1] == "`" and raw.rstrip()[-1:] == "`":
            raw = raw.rstrip()[1:-1]  # the whole line pasted as inline code
        elif raw.count("`") % 2:  # one stray backtick at an edge; paired ones are the log's own
            if raw[:1] == "`":
                raw = raw[1:]
            elif raw.rstrip()[-1:] == "`":
                raw = raw.rstrip()[:-1]
    if "<" in raw:
        raw = _PASTE_TAGS.sub("", raw)
    if "**" in raw:
        if raw.startswith("**") and raw.rstrip().endswith("**") and len(raw.rstrip()) > 4:
            raw = raw.rstrip()[2:-2]  # a whole line pasted in bold
        else:
            raw = _PASTE_BOLD.sub(r"\1", raw)
    if raw[:1] == ">":
        raw = _PASTE_QUOTE.sub("", raw)
    return raw


def _rank_from_proc(proc: str, rank: str | None, pid: str) -> str:
    if rank is not None:
        return f"rank{rank}"
    m = re.search(r"(?:DP\d+_?)?(?:PP\d+_?)?TP\d+(?:_EP\d+)?$", proc)
    if m:
        return m.group(0).replace("_", " ")
    return f"{proc}:{pid}"


def parse_line(no: int, raw: str) -> LogLine:
    text = clean(raw)
    rest = text
    ts = rank = stream = level = dialect = None
    prefixed = False
    # peel wrappers (each at most once, outermost first)
    for w in _WRAPPERS:
        m = w.match(rest)
        if m:
            rest = rest[m.end() :]
    m = _CLOUD.match(rest)
    if m:
        level = m["level"]
        rest = rest[m.end() :]
    # process prefixes may be doubled when two workers share a stream; the last one wins
    while True:
        m = _PROC.match(rest)
        if not m:
            break
        rest = rest[m.end() :]
        stream = m.group(0).strip()
        rank = _rank_from_proc(m["proc"], m["rank"], m["pid"])
        prefixed = True
    m = _TORCH_RANK.match(rest)
    if m:
        rank = rank or f"rank{m['rank']}"
        stream = stream or f"rank{m['rank']}"
        rest = rest[m.end() :]
        dialect = "torch"
        prefixed = True
    m = _VLLM.match(rest)
    if m:
        level, ts, dialect = m["level"], m["ts"], "vllm"
        rest = rest[m.end() :]
        prefixed = True
        # vLLM >= 0.32 puts the process prefix after nothing; older wrap before; both handled
        m2 = _PROC.match(rest)
        if m2:
            rest = rest[m2.end() :]
            stream = m2.group(0).strip()
            rank = _rank_from_proc(m2["proc"], m2["rank"], m2["pid"])
    else:
        m = _SGL.match(rest)
        if m and (m["ts"] or m["ranks"]):
            ts, dialect = m["ts"], "sglang"
            ranks = (m["ranks"] or "").strip()
            if ranks:
                rank = " ".join(ranks.split())
                stream = stream or rank  # a Ray/worker prefix already names the writer
            rest = rest[m.end() :]
            prefixed = True
        else:
            m = _SGL_GPU.match(rest)
            if m:
                rank = stream = f"gpu{m['gpu']}"
                dialect = "sglang"
                rest = rest[m.end() :]
                prefixed = True
            else:
                for rx, name in ((_TRACING, "tracing"), (_GLOG, "glog"), (_UVICORN, "uvicorn"), (_PYLOG, "pylog")):
                    m = rx.match(rest)
                    if m:
                        level = m["level"]
                        ts = m.groupdict().get("ts")
                        dialect = name
                        rest = rest[m.end() :]
                        prefixed = True
                        break
    return LogLine(no, text, rest, ts, rank, stream, level, dialect, prefixed)


# -- hard-wrapped pastes -------------------------------------------------------------------------

_FRAME_START = re_compile(r'^\s*File "[^"]*$')
_FRAME_DONE = re_compile(r'^\s*File "[^"]+", line \d+')
_CONTINUES = re_compile(r'^[^\s\[(<>|]\S*')  # a wrapped tail starts mid-word, not with a prefix
WRAP_MIN = 60


def _wrap_widths(lines: list[LogLine]) -> set[int]:
    """The width a terminal, an e-mail client or a ticket system cut the paste at: no line is
    longer, and several lines are exactly that long. Logs that were not wrapped have lines of
    every length, so their longest length rarely recurs."""
    longest = max((len(ln.text) for ln in lines), default=0)
    if longest < WRAP_MIN:
        return set()
    return {longest} if sum(1 for ln in lines if len(ln.text) == longest) >= 3 else set()


def rejoin_wrapped(lines: list[LogLine]) -> list[LogLine]:
    """Join a line cut at a fixed width to its tail, when the join is unambiguous: the line
    is an unterminated `File "...` that the next line completes, or it is exactly a recurring
    wrap width long and the next line carries no prefix of its own and starts mid-word. The
    joined line keeps the first line's number; the tail's number is simply not used."""
    if len(lines) < 2:
        return lines
    widths = _wrap_widths(lines)
    out: list[LogLine] = []
    i = 0
    while i < len(lines):
        cur = lines[i]
        while i + 1 < len(lines) and lines[i + 1].no == cur.no + _span(cur):
            nxt = lines[i + 1]
            if nxt.prefixed or not nxt.text:
                break
            frame = _FRAME_START.match(cur.message) and _FRAME_DONE.match(cur.message + nxt.text)
            width = len(cur.text) in widths and _CONTINUES.match(nxt.text)
            if not (frame or width):
                break
            cur = parse_line(cur.no, cur.text + nxt.text)
            cur.joined = _span(lines[i]) + _span(nxt) - 1 + (cur.joined or 0)
            i += 1
        out.append(cur)
        i += 1
    return out


def _span(ln: LogLine) -> int:
    return 1 + (ln.joined or 0)
