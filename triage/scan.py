"""The single pass over the log: find every line any later stage could want.

A literal prefilter (Hyperscan when installed, else one stdlib `re` alternation, both over
raw bytes) finds lines holding a catalogue keyword or a structural anchor. Window anchors
pull in the lines that follow them (traceback bodies). Frequent load lines ("Decode batch")
are never visited one by one: each chunk is summarised with C-level scans, and the last
load line before a failure anchor is kept. Nothing else of the log is decoded.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from triage.parse import anchors

FAILURE_HINTS = (b"Traceback (most recent", b"Fatal Python error", b"terminate called", b"NCCL WARN",
                 b"Watchdog caught", b"Received sigquit", b"hit an exception", b"fatal error")

_RUNNING = re.compile(rb"#running-req: (\d+)|Running: (\d+) reqs")
_PREFILL = re.compile(rb"#new-token: (\d+), #cached-token: (\d+)")
_VLLM_HIT = re.compile(rb"Prefix cache hit rate: ([\d.]+)%")
_LOAD_WORDS = [w.encode() for w in anchors.LOAD]


@dataclass
class LoadSummary:
    peak_running: int = 0
    peak_line: int | None = None
    new_tokens: int = 0
    cached_tokens: int = 0
    prefill_lines: int = 0
    vllm_hit_rates: list[float] = field(default_factory=list)


@dataclass
class ScanResult:
    lines: dict[int, str] = field(default_factory=dict)  # line number -> decoded text
    total_lines: int = 0
    total_bytes: int = 0
    last_load: dict[int, tuple[int, str]] = field(default_factory=dict)  # anchor line -> load line
    final_load: tuple[int, str] | None = None
    load: LoadSummary = field(default_factory=LoadSummary)
    load_before_failure: LoadSummary | None = None
    engine_used: str = "re"


class Prefilter:
    """Finds byte offsets of literal keywords in a chunk."""

    def __init__(self, words: Iterable[str], prefer_hyperscan: bool = True) -> None:
        self.words = sorted({w for w in words if w})
        self.engine = "re"
        self._hs = None
        if prefer_hyperscan:
            try:
                import hyperscan  # type: ignore[import-not-found]

                db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                exprs = [re.escape(w).encode() for w in self.words]
                db.compile(expressions=exprs, ids=list(range(len(exprs))),
                           elements=len(exprs), flags=[0] * len(exprs))
                self._hs = db
                self.engine = "hyperscan"
            except ImportError:
                pass
            except Exception as e:  # a pattern Hyperscan rejects: fall back, say so once
                print(f"triage: hyperscan unavailable ({e}); using the slower scanner", file=sys.stderr)
        alternation = b"|".join(re.escape(w.encode()) for w in sorted(self.words, key=len, reverse=True))
        self._re = re.compile(alternation)

    def ends(self, chunk: bytes) -> list[int]:
        """End offsets of keyword occurrences (any order, duplicates allowed)."""
        if self._hs is not None:
            out: list[int] = []

            def on_match(_id: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
                out.append(to)

            self._hs.scan(chunk, match_event_handler=on_match)
            return out
        return [m.end() for m in self._re.finditer(chunk)]


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _summarise(chunk: bytes, summary: LoadSummary, first_line: int) -> None:
    best = 0
    best_off = -1
    for m in _RUNNING.finditer(chunk):
        v = int(m.group(1) or m.group(2))
        if v > best:
            best, best_off = v, m.start()
    if best > summary.peak_running:
        summary.peak_running = best
        summary.peak_line = first_line + chunk.count(b"\n", 0, best_off)
    for new, cached in _PREFILL.findall(chunk):
        summary.new_tokens += int(new)
        summary.cached_tokens += int(cached)
        summary.prefill_lines += 1
    summary.vllm_hit_rates.extend(float(x) for x in _VLLM_HIT.findall(chunk)[-1:])


def _last_load(chunk: bytes, end: int) -> int:
    """Offset of the start of the last load line before `end`, or -1."""
    best = -1
    for w in _LOAD_WORDS:
        p = chunk.rfind(w, 0, end)
        if p > best:
            best = p
    if best < 0:
        return -1
    return chunk.rfind(b"\n", 0, best) + 1


def scan(chunks: Iterator[bytes], prefilter: Prefilter) -> ScanResult:
    res = ScanResult(engine_used=prefilter.engine)
    window_words = [(w.encode(), n) for w, n in anchors.WINDOW.items()]
    line_no = 1  # number of the first line of the current chunk
    pending = 0  # window lines still owed from the previous chunk
    prev_load: tuple[int, str] | None = None
    failure_seen = False
    for chunk in chunks:
        res.total_bytes += len(chunk)
        wanted: dict[int, int] = {}  # line start offset -> window length after it
        for end in prefilter.ends(chunk):
            start = chunk.rfind(b"\n", 0, end - 1) + 1
            if start not in wanted:
                wanted[start] = 0
        # lines owed from a window that crossed the border
        if pending:
            wanted.setdefault(0, 0)
            wanted[0] = max(wanted[0], pending - 1)
            pending = 0
        starts = sorted(wanted)
        # line numbers: count newlines between consecutive starts
        pos, no = 0, line_no
        chunk_failure_off = -1
        for start in starts:
            no += chunk.count(b"\n", pos, start)
            pos = start
            eol = chunk.find(b"\n", start)
            if eol < 0:
                eol = len(chunk)
            raw = chunk[start:eol]
            extra = wanted[start]
            for w, n in window_words:
                if w in raw:
                    extra = max(extra, n)
            if chunk_failure_off < 0 and any(h in raw for h in FAILURE_HINTS):
                chunk_failure_off = start
                # the load figures just before the crash, and the peak up to it
                lo = _last_load(chunk, start)
                if lo >= 0:
                    le = chunk.find(b"\n", lo)
                    res.last_load[no] = (line_no + chunk.count(b"\n", 0, lo), _decode(chunk[lo:le]))
                elif prev_load is not None:
                    res.last_load[no] = prev_load
                if not failure_seen:
                    failure_seen = True
                    before = LoadSummary(res.load.peak_running, res.load.peak_line, res.load.new_tokens,
                                         res.load.cached_tokens, res.load.prefill_lines,
                                         list(res.load.vllm_hit_rates))
                    _summarise(chunk[:start], before, line_no)
                    res.load_before_failure = before
            res.lines.setdefault(no, _decode(raw))
            # pull in the window after this line
            k, p, n_ = 0, eol + 1, no
            while k < extra and p < len(chunk):
                e = chunk.find(b"\n", p)
                if e < 0:
                    e = len(chunk)
                n_ += 1
                res.lines.setdefault(n_, _decode(chunk[p:e]))
                p = e + 1
                k += 1
            if k < extra and p >= len(chunk):
                pending = max(pending, extra - k)
        nl = chunk.count(b"\n")
        _summarise(chunk, res.load, line_no)
        lo = _last_load(chunk, len(chunk))
        if lo >= 0:
            le = chunk.find(b"\n", lo)
            prev_load = (line_no + chunk.count(b"\n", 0, lo), _decode(chunk[lo : le if le >= 0 else len(chunk)]))
        line_no += nl
        if chunk and not chunk.endswith(b"\n"):
            line_no += 1  # the last line had no newline
        res.total_lines = line_no - 1
    res.final_load = prev_load
    return res
