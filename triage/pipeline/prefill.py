"""The prefix cache's figures at a failure: the SGLang prefill lines (`#new-token: N,
#cached-token: M`) whose `#new-token` starts in the WINDOW_BYTES of log before it.

Why a window and not the whole log: summing every prefill line was a quarter of a one-core
scan of a big log (half a million lines per GiB, each parsed in Python), and the hit rate over
a run of several days says less about what disabling the radix cache costs now than the rate
just before the crash. So the scan of a regular file sums no prefill line at all: once the
analysis knows which failure ended the process, the window before it is read back from the
file (read_back). A stream (pipe, `.gz`, UTF-16) cannot be read back: its scan keeps running
sums of the prefill lines of the last window (Ring) and hands each failure-looking line the
window before it. Both count the same lines, so a log gives the same figures as a file and
piped into `triage analyze -`. A log shorter than the window is counted whole, as before.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

from triage.core.load_summary import LoadSummary
from triage.core.recache import re_compile

WINDOW_BYTES = 32 * 1024 * 1024
READ_BLOCK = 1024 * 1024
SPAN = 96  # longer than any _PREFILL match and the byte its lookahead reads
# a figure is at most 18 digits (int() refuses over 4,300; a hostile log may hold more)
_PREFILL = re_compile(rb"#new-token: (\d{1,18}), #cached-token: (\d{1,18})(?!\d)")


@dataclass
class Tokens:
    """The prefill lines of one window: prompt tokens computed anew, taken from the cache."""

    new: int = 0
    cached: int = 0
    lines: int = 0
    window: int = 0  # >0: the window's size, when it starts after the log's first byte (older lines not counted)


def apply(summary: LoadSummary, tokens: Tokens) -> None:
    """A window's tokens into `summary`, in place of any it had."""
    summary.new_tokens, summary.cached_tokens, summary.prefill_lines = tokens.new, tokens.cached, tokens.lines
    summary.prefill_window = tokens.window


def size_text(n: int) -> str:
    """A window's size for a report: 32 MiB (a test's small window in KiB)."""
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{max(1, n >> 10)} KiB"


def read_back(path: str, end: int) -> Tokens:
    """The window before byte `end` of a regular file whose bytes are those the scan read.
    Raises OSError when the file cannot be read any more.

    One small buffer, read into again and again: the window costs no more memory than a block,
    whatever the lines. A figure is at most SPAN bytes long, so a block's matches are counted
    up to SPAN bytes before its end and the rest is carried to the next block."""
    lo = max(0, end - WINDOW_BYTES)
    out = Tokens(window=WINDOW_BYTES if lo > 0 else 0)
    buf = bytearray(READ_BLOCK + SPAN)
    keep, pos = 0, lo
    finditer = _PREFILL.finditer
    with open(path, "rb") as fh, memoryview(buf) as mv:
        fh.seek(lo)
        while pos < end:
            got = fh.readinto(mv[keep : keep + min(READ_BLOCK, end - pos)])
            if not got:
                break
            pos += got
            n = keep + got
            upto = n if pos >= end else max(0, n - SPAN)  # a match from here on may go on in the next block
            for m in finditer(buf, 0, n):
                if m.start() >= upto:
                    break
                out.new += int(m[1])
                out.cached += int(m[2])
                out.lines += 1
            keep = n - upto
            buf[:keep] = buf[upto:n]
    return out


class Ring:
    """Running sums of a stream's prefill lines, by the offset of each, for the lines any later
    window can still reach: a stream gets its windows without being read twice."""

    def __init__(self) -> None:
        self._offsets: list[int] = []
        self._new: list[int] = []  # running totals up to and including each line
        self._cached: list[int] = []
        self._base = (0, 0)  # the running totals before the first line still held

    def feed(self, buf: bytes | bytearray, n: int, at: int) -> None:
        """Add the prefill lines of buf[:n], which starts at stream offset `at`. Every later
        window ends at `at` or after, so lines before `at - WINDOW_BYTES` are let go."""
        offsets, new, cached = self._offsets, self._new, self._cached
        k = bisect_left(offsets, at - WINDOW_BYTES)
        if k:
            self._base = (new[k - 1], cached[k - 1])
            del offsets[:k], new[:k], cached[:k]
        tn, tc = (new[-1], cached[-1]) if new else self._base
        for m in _PREFILL.finditer(buf, 0, n):
            tn += int(m[1])
            tc += int(m[2])
            offsets.append(at + m.start())
            new.append(tn)
            cached.append(tc)

    def window(self, end: int) -> Tokens:
        """The window before stream offset `end` (at or after the last feed's `at`)."""
        lo = max(0, end - WINDOW_BYTES)
        i, j = bisect_left(self._offsets, lo), bisect_left(self._offsets, end)

        def total(k: int) -> tuple[int, int]:
            return (self._new[k - 1], self._cached[k - 1]) if k else self._base

        (n0, c0), (n1, c1) = total(i), total(j)
        return Tokens(new=n1 - n0, cached=c1 - c0, lines=j - i, window=WINDOW_BYTES if lo > 0 else 0)


def restream(spans: Iterable[tuple[bytes | bytearray, int]], line: int | None) -> Tokens:
    """The window before the start of line `line` (None: the end) of the spans of a whole log,
    read again: for a file whose scan cut a line over MAX_LINE, so that the scan's offsets are
    not the file's (a rare log; this costs one more pass)."""
    ring = Ring()
    at, no = 0, 1  # the offset and number of the current chunk's first line
    for buf, n in spans:
        ring.feed(buf, n, at)
        lines = buf.count(b"\n", 0, n)
        if line is not None and no + lines >= line:
            pos = 0
            for _ in range(line - no):
                pos = buf.find(b"\n", pos, n) + 1
            return ring.window(at + pos)
        at += n
        no += lines
    return ring.window(at)
