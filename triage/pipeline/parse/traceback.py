"""Python tracebacks inside log prefixes: demultiplex interleaved writers, parse, chain.

Two interleaving styles exist. vLLM and torch repeat their prefix on every line, so a
line's stream key says whose it is. SGLang prints the rank only on the header line and
N ranks' bodies interleave in runs; since those bodies are (nearly) the same text, an
unprefixed line is given to the open stream whose next expected line it is, judged by the
stream that got furthest. Each stream is then parsed on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import regex

from triage.pipeline.parse.lines import LogLine

HEADER = "Traceback (most recent call last)"
TRUNCATED = "(traceback cut off)"
THREAD_DUMP = "Fatal Python error"  # faulthandler's frames: the process died in C code
CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred",
    "The above exception was the direct cause of the following exception",
)
FRAME = regex.compile(
    r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d{1,9}),? in (?P<func>[^\s]+)'
    # IPython / Jupyter: File /path/x.py:105, in LLM.__init__(self, ...)
    r'|^\s*File (?P<file>[/~\w.-][^\s:]*\.py):(?P<line>\d{1,9}), in (?P<func>[\w.<>]+)'
)
FAULTHANDLER_FRAME = regex.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d{1,9}) in (?P<func>\S+)')
# A Python exception line: optional dotted module path, a class name, optional ": message"
EXC_LINE = regex.compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Z]\w*)(?::\s?(?P<msg>.*))?$")
WRAPPERS = [
    regex.compile(r"(?i)capture (?:cuda|cpu|npu|piecewise cuda) graph failed:?\s*(?P<inner>.+)"),
]


@dataclass
class Exc:
    """One exception of a traceback's chain: its type, message, line and frames."""

    type: str
    message: str
    line: int
    frames: list[tuple[str, int | None, str | None, str | None]] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)


@dataclass
class Stream:
    """The traceback being read from one rank's (or one process's) lines."""

    key: str
    rank: str | None
    header_line: int
    lines: list[LogLine] = field(default_factory=list)
    state: str = "body"  # body | exc | closed
    blank_after_exc: bool = False


@dataclass
class Traceback:
    """A parsed Python traceback: its rank, first and last line, chain of exceptions and lines."""

    rank: str | None
    line: int
    end_line: int
    chain: list[Exc]
    lines: list[LogLine]

    @property
    def final(self) -> Exc:
        return self.chain[-1]


def _is_tb_text(msg: str) -> bool:
    s = msg.strip()
    if not s:
        return True
    return bool(
        s.startswith(("File ", "Traceback", "^", "~", "During handling", "The above exception"))
        or msg[:1] in (" ", "\t")
        or EXC_LINE.match(s)
    )


def _ends_with_marker(s: Stream) -> bool:
    for ln in reversed(s.lines):
        t = ln.message.strip()
        if t:
            return t.startswith(CHAIN_MARKERS)
    return False


# dialects that repeat their prefix on every line of a traceback (SGLang prints it on the header only)
_EVERY_LINE = frozenset({"vllm", "pylog", "glog", "tracing", "uvicorn", "torch"})


def _stream_key(ln: LogLine) -> str:
    return ln.stream or ln.rank or (ln.dialect if ln.prefixed and ln.dialect in _EVERY_LINE else "plain")


class _Assembler:
    def __init__(self) -> None:
        self.open: dict[str, Stream] = {}
        self.done: list[Stream] = []
        self.last: Stream | None = None
        self.longest: Stream | None = None  # the stream that got furthest: the others' expected next lines

    def _close(self, s: Stream) -> None:
        if s.state != "closed":
            s.state = "closed"
            self.done.append(s)
        self.open.pop(s.key, None)

    def _advance_state(self, s: Stream, msg: str) -> bool:
        """Append bookkeeping; returns False when the line does not belong to s."""
        stripped = msg.strip()
        if s.state == "exc":
            if not stripped:
                s.blank_after_exc = True
                return True
            if stripped.startswith(CHAIN_MARKERS) or stripped.startswith(HEADER):
                s.state = "body"
                s.blank_after_exc = False
                return True
            return not s.blank_after_exc  # else: a continuation of the exception message
        if FRAME.match(msg) or msg[:1] in (" ", "\t") or stripped.startswith((HEADER, "^", "~")):
            return True
        if stripped.startswith(CHAIN_MARKERS) or not stripped:
            return True
        if EXC_LINE.match(stripped):
            s.state = "exc"
            return True
        return True  # stripped indentation: a code line pasted without its spaces

    def _open_headless(self, ln: LogLine) -> None:
        s = Stream(_stream_key(ln), ln.rank, ln.no)
        s.lines.append(ln)
        self._grew(s)
        self.open[s.key] = s
        self.last = s

    def _grew(self, s: Stream) -> None:
        """Keep the longest stream known without looking at them all: streams only grow."""
        if self.longest is None or len(s.lines) > len(self.longest.lines):
            self.longest = s

    def feed(self, ln: LogLine) -> None:
        msg = ln.message
        if HEADER in msg or (msg.strip().startswith(CHAIN_MARKERS) and not self.open):
            if not ln.prefixed:
                chained = [s for s in self.open.values() if _ends_with_marker(s)]
                if chained:
                    s = self._choose(chained, msg) or chained[0]
                    s.state, s.blank_after_exc = "body", False
                    s.lines.append(ln)
                    self._grew(s)
                    self.last = s
                    return
            key = _stream_key(ln)
            cur = self.open.get(key)
            if cur is not None and not _ends_with_marker(cur):
                self._close(cur)
                cur = None
            if cur is None:
                cur = Stream(key, ln.rank, ln.no)
                self.open[key] = cur
            cur.state, cur.blank_after_exc = "body", False
            cur.lines.append(ln)
            self._grew(cur)
            self.last = cur
            return
        # a writer that repeats its prefix on every line: its key says whose line it is
        writer = ln.stream if ln.stream else (ln.dialect if ln.dialect in _EVERY_LINE else None)
        if ln.prefixed and writer is not None and writer in self.open:
            s = self.open[writer]
            if _is_tb_text(msg) and self._advance_state(s, msg):
                s.lines.append(ln)
                self._grew(s)
                self.last = s
            elif s.state == "exc":
                self._close(s)
            return
        if ln.prefixed:
            # a writer that prefixes every line, caught mid-traceback (the excerpt starts inside
            # it, or its header scrolled away): its frames still make a failure
            if (FRAME.match(msg) or FAULTHANDLER_FRAME.match(msg)) and _stream_key(ln) not in self.open:
                self._open_headless(ln)
            return  # another writer's ordinary line cutting in
        # unprefixed: pick the open stream that expects this line
        stripped = msg.strip()
        marker = stripped.startswith(CHAIN_MARKERS)
        candidates = []
        for s in list(self.open.values()):
            if s.state == "exc" and s.blank_after_exc and not marker:
                # finished unless a chain marker follows; a body line belongs to someone else
                continue
            if s.state == "exc" and FRAME.match(msg):
                continue
            candidates.append(s)
        if not candidates:
            if not self.open and (FRAME.match(msg) or FAULTHANDLER_FRAME.match(msg)):
                self._open_headless(ln)  # an excerpt that starts inside a traceback
            return
        chosen = self._choose(candidates, msg)
        if chosen is None:
            return
        if self._advance_state(chosen, msg):
            chosen.lines.append(ln)
            self._grew(chosen)
            self.last = chosen
        else:
            self._close(chosen)

    def _choose(self, candidates: list[Stream], msg: str) -> Stream | None:
        if len(candidates) == 1:
            return candidates[0]
        cons = self.longest.lines if self.longest is not None else []

        def expected(s: Stream) -> str | None:
            n = len(s.lines)
            return cons[n].message if n < len(cons) else None

        last = self.last if self.last in candidates else None
        if (last is not None and last.state == "body" and msg[:1] in (" ", "\t") and not FRAME.match(msg)
                and FRAME.match(last.lines[-1].message) and all(s.state == "exc" for s in candidates if s is not last)):
            # the code line of the frame just read, when every other open stream has had its
            # exception line: a request's error, then a serving line, then the scheduler's crash,
            # whose code lines went to the request's stream (interleaved ranks, all mid-body, are
            # still told apart by the longest stream below)
            return last
        if last is not None and expected(last) == msg:
            return last
        same = [s for s in candidates if expected(s) == msg]
        if same:
            return same[0]
        leaders = [s for s in candidates if expected(s) is None]
        if last is not None and last in leaders:
            return last
        if leaders:
            return leaders[0]
        return last or candidates[0]

    def finish(self) -> list[Stream]:
        for s in list(self.open.values()):
            self._close(s)
        return self.done


def _parse_stream(s: Stream) -> Traceback | None:
    chain: list[Exc] = []
    frames: list[tuple[str, int | None, str | None, str | None]] = []
    cur_exc: Exc | None = None
    in_frames = False
    dump = False
    for ln in s.lines:
        msg = ln.message
        stripped = msg.strip()
        if HEADER in msg:
            in_frames, frames, cur_exc = True, [], None
            continue
        if stripped.startswith(CHAIN_MARKERS):
            cur_exc = None
            in_frames = False
            continue
        m = FAULTHANDLER_FRAME.match(msg)
        if m and not chain:
            dump = True
            in_frames = True
            frames.insert(0, (m["file"], int(m["line"]), m["func"], None))  # printed innermost first
            continue
        m = FRAME.match(msg)
        if m:
            in_frames = True
            cur_exc = None
            frames.append((m["file"], int(m["line"]), m["func"], None))
            continue
        if cur_exc is not None:
            if stripped:
                cur_exc.extra.append(stripped)
            continue
        if not stripped or stripped.startswith(("^", "~")):
            continue
        em = EXC_LINE.match(stripped)
        is_code = msg[:1] in (" ", "\t")
        if em and (not is_code or not frames) and in_frames:
            cur_exc = Exc(em["type"], (em["msg"] or "").strip(), ln.no, frames)
            chain.append(cur_exc)
            frames = []
            in_frames = False
            continue
        if frames and frames[-1][3] is None:
            f = frames[-1]
            frames[-1] = (f[0], f[1], f[2], stripped)
    if chain and frames:
        # a chained traceback cut inside its last part: those frames are where it was when the
        # paste ends; keep them with a cut-off link so the failure can show them
        chain.append(Exc(TRUNCATED, "the log ends before the exception line", s.lines[-1].no, frames))
    if not chain:
        if not frames:
            return None
        if dump:
            chain.append(Exc(THREAD_DUMP, "a thread dump of a process that died in native code "
                             "(the line naming the signal is not in the excerpt)", s.lines[-1].no, frames))
        else:
            # the log (or the excerpt) ends before the exception line: still a failure
            chain.append(Exc(TRUNCATED, "the log ends before the exception line", s.lines[-1].no, frames))
    return Traceback(s.rank, s.header_line, s.lines[-1].no, chain, s.lines)


def parse_tracebacks(lines: list[LogLine]) -> list[Traceback]:
    """Tracebacks found in `lines` (sorted by line number, possibly with gaps)."""
    asm = _Assembler()
    prev = None
    for ln in lines:
        if prev is not None and ln.no != prev + 1:
            # a gap: whatever was open cannot continue across lines nobody collected
            for s in list(asm.open.values()):
                asm._close(s)
        prev = ln.no + ln.joined
        asm.feed(ln)
    out = []
    for s in asm.finish():
        tb = _parse_stream(s)
        if tb is not None:
            out.append(tb)
    out.sort(key=lambda t: t.line)
    return out


def unwrap(message: str) -> tuple[str, str] | None:
    """The real cause inside a wrapper such as `Exception: Capture cuda graph failed: <cause>`."""
    for rx in WRAPPERS:
        m = rx.search(message)
        if m:
            inner = m["inner"].strip()
            im = EXC_LINE.match(inner)
            if im and im["msg"]:
                return im["type"], im["msg"].strip()
            return "", inner
    return None
