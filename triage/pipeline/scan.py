"""The single pass over the log: find every line any later stage could want.

A literal prefilter (Hyperscan when installed, else one stdlib `re` alternation, both over
raw bytes) finds lines holding a catalogue keyword or a structural anchor. Window anchors
pull in the lines that follow them (traceback bodies). Frequent load lines ("Decode batch")
are never visited one by one: each chunk is summarised with C-level scans, and the last
load line before a failure anchor is kept. Nothing else of the log is decoded.
"""

from __future__ import annotations

import re
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.core import vocabulary as anchors
from triage.core.load_summary import LoadSummary
from triage.core.recache import re_compile
from triage.core.vocabulary import CONTENT_BYTES, FAILURE_HINTS
from triage.pipeline.prefill import Ring, apply

if TYPE_CHECKING:
    from triage.pipeline.loadseries import Bucket, SeriesFold

# a figure is at most 18 digits: a longer run of digits (a hostile log) is no figure, and int()
# refuses strings of over 4,300 digits
_RUNNING_SGL = re_compile(rb"#running-req: (\d{1,18})(?!\d)")
_RUNNING_VLLM = re_compile(rb"Running: (\d{1,18}) reqs")
_RUNNING_WORD = b"#running-req: "
_VLLM_HIT = re_compile(rb"Prefix cache hit rate: (\d{1,3}(?:\.\d{1,6})?)%")
_LOAD_WORDS = [w.encode() for w in anchors.LOAD]
GATE_LEN, GATE_MIN = 14, 6
# the portable engine's costs, in ns per byte of log (CPython 3.11 on x86-64, measured): a `re`
# pass for patterns that all open with one literal byte, the attempt it makes at each such
# byte, and one turn of a Python loop over bytes.find (memchr) hits after the memchr pass itself
PASS_NS, ATTEMPT_NS, STEP_NS, MEMCHR_NS = 0.27, 28.0, 230.0, 0.02
SAMPLE_BYTES, SAMPLE_SLICES = 64 * 1024, 32  # what the gates are chosen on
# HTTP access lines of uvicorn / the engines' own loggers for an answered request
SERVING_WORD = b'" 200 '  # the end of `"POST /v1/... HTTP/1.1" 200 OK`, whatever the HTTP version
SERVING_TAIL = 256 * 1024  # only the end of each chunk is searched: a serving log repeats it often


@dataclass
class ScanResult:
    """What the scan kept of a log: the lines the later stages read, counts, load figures."""

    lines: dict[int, str] = field(default_factory=dict)  # line number -> decoded text
    total_lines: int = 0
    total_bytes: int = 0
    last_load: dict[int, tuple[int, str]] = field(default_factory=dict)  # anchor line -> load line
    final_load: tuple[int, str] | None = None
    load: LoadSummary = field(default_factory=LoadSummary)
    # the load up to a failure-looking line: the first of the log (its lowest key), and the
    # first after a chunk's last load line (where a crash that stopped the server is)
    load_at: dict[int, LoadSummary] = field(default_factory=dict)
    anchor_offsets: dict[int, int] = field(default_factory=dict)  # load_at's lines -> their byte offsets
    # (path, size) of the regular file scanned: the prefix cache's tokens are read back from it
    # for the failure the analysis picks (prefill.read_back); None: the scan summed them (a stream)
    prefill_source: tuple[str, int] | None = None
    engine_used: str = "re"
    scanner_note: str | None = None  # Prefilter.note
    keyword_lines: set[int] = field(default_factory=set)  # lines holding a catalogue keyword
    failure_anchors: list[int] = field(default_factory=list)  # first failure-looking line per chunk
    last_serving: int = 0  # the last load line or HTTP 2xx access line: the server was still serving
    # identical windows and lines past the copies kept: key -> (how many more, last line)
    repeats: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    window_keys: dict[int, bytes] = field(default_factory=dict)  # header line of a kept window -> its key
    # the copies kept of each key, in order, as the lines each added: merge() turns a later
    # range's copies past KEEP_COPIES into repeats, as one pass would have
    copies: dict[bytes, list[list[int]]] = field(default_factory=dict)
    walked_to: int = 0  # the last line of the window that went on past the range's end (0: none)
    capped: bool = False  # more distinct lines than the report could use: the rest were counted, not kept
    # the load series for the HTML chart (pipeline/loadseries.py); None: not asked for
    series: list[Bucket] | None = None
    series_lines: int = 0  # the load lines folded into it


@dataclass
class LoadProbe:
    """What the Hyperscan pass itself saw of a chunk's SGLang load lines, so that the peak
    needs no pass of its own (see load_window): the end offset of the first
    `#running-req: <v>` for each v of the window, and of the first value over it (-1: none)."""

    lo: int
    first: dict[int, int] = field(default_factory=dict)
    above: int = -1


class Prefilter:
    """Finds byte offsets of literal keywords in a chunk, and which keyword each is.

    `flagged` words (the catalogue's keywords) mark their line for signature matching; the
    rest (structural anchors) only make the line available to the parsers.
    """

    def __init__(self, words: Iterable[str], prefer_hyperscan: bool = True,
                 flagged: Iterable[str] = (), window: tuple[int, int] | None = None,
                 cache: Path | None = None) -> None:
        self.words = sorted({w for w in words if w})
        self.window: tuple[int, int] | None = None  # the load probe's values, when it is compiled in
        flagged_set = set(flagged)
        self.flagged = [w in flagged_set for w in self.words]
        self.engine = "re"
        self.note: str | None = None  # why the portable engine is used although Hyperscan was asked for
        self._hs = None
        if prefer_hyperscan:
            try:
                import hyperscan

                from triage.pipeline.hsdb import database

                exprs = [re.escape(w).encode() for w in self.words]
                flags = [0] * len(exprs)
                if window is not None:
                    probe = probe_expressions(*window)
                    exprs += probe
                    flags += [hyperscan.HS_FLAG_SINGLEMATCH] * len(probe)
                # a window's values change with each big log: its databases are not worth keeping
                self._hs = database(hyperscan, exprs, flags, cache if window is None else None)
                self.engine = "hyperscan"
                self.window = window
            except ImportError:
                self.note = "Hyperscan is not installed; using the portable scanner (about 5x slower on big logs)"
            except Exception as e:  # a pattern Hyperscan rejects: fall back and say so
                self.note = f"Hyperscan could not compile the keywords ({e}); using the portable scanner"
        self._bwords = [w.encode() for w in self.words]
        self._wid = {w: i for i, w in enumerate(self._bwords)}
        self._plan: list[Gates] | None = None
        self._all_rx: re.Pattern[bytes] | None = None
        self._flag_rx: re.Pattern[bytes] | None = None

    def _gate_plans(self, sample: bytes) -> list[list[Gates]]:
        """The portable engine's prefilter: for each word a substring ("gate") of it that is
        rare in a sample of this very log; a line that holds a gate is then checked for the
        real words. Python's regex engine tries a match at every byte that can open a gate, so
        the gates are chosen to open with as few, and as rare, bytes as possible: a weighted
        set cover of the words by first bytes (the greedy one). That, not the gates' length,
        sets the engine's speed.

        Two plans, and the one faster on the first chunk is kept: all gates in one trie regex
        (each byte tested against the set of first bytes), or one trie per first byte, each
        found on its own, its bytes weighted by what finding them costs (PASS_NS ...
        MEMCHR_NS): a literal first byte is found ten times faster than a byte of a set, and
        a byte rarer than about one in a thousand faster still by bytes.find. Which is faster
        depends on how many common bytes the words need, on the lines (the one regex passes
        over the rest of a line once it found a gate there: a megabyte line costs one hit)
        and on the machine, so it is measured, not modelled: the sample is too small and too
        cut to show the long lines."""
        freq = Counter(sample)
        size = max(1, len(sample))
        memo: dict[bytes, int] = {}
        # the sample's GATE_MIN-byte slices: a candidate (never shorter) whose first bytes are
        # not among them is not in the sample, which spares counting it (most are not there:
        # counting 10,000 candidates over the sample was 0.39 s of every portable scan)
        grams = {sample[i : i + GATE_MIN] for i in range(len(sample) - GATE_MIN + 1)}

        def count(g: bytes) -> int:
            if g not in memo:
                memo[g] = sample.count(g) if g[:GATE_MIN] in grams else 0
            return memo[g]

        # each word's candidates: its substrings seen least often in the sample
        cands: list[list[bytes]] = []
        for b in self._bwords:
            if len(b) <= GATE_MIN:
                cands.append([b])
                continue
            subs = [b[i : i + GATE_LEN] for i in range(len(b) - GATE_MIN + 1)]
            least = min(map(count, subs))
            cands.append([g for g in subs if count(g) == least])
        one = [Gates(b"", False, 0.0, re.compile(trie_regex(sorted(_cover(cands, lambda c: freq[c] + 1.0)))))]
        if len(sample) < SAMPLE_BYTES:
            return [one]  # a small log: no time to win, and none to spend measuring

        def by_find(c: int) -> bool:
            return MEMCHR_NS + STEP_NS * freq[c] / size < PASS_NS + ATTEMPT_NS * freq[c] / size

        def cost(c: int) -> float:
            f = freq[c] / size
            return min(PASS_NS + ATTEMPT_NS * f, MEMCHR_NS + STEP_NS * f)

        groups: dict[int, list[bytes]] = {}
        for g in sorted(_cover(cands, cost)):
            groups.setdefault(g[0], []).append(g)
        each = [Gates(bytes([c]), by_find(c), freq[c] / size, re.compile(trie_regex(gs)))
                for c, gs in sorted(groups.items())]
        return [one, each]

    @staticmethod
    def _sample(chunk: bytes | bytearray, n: int) -> bytes:
        """Slices from across the chunk: its first bytes are the server's start-up, whose byte
        frequencies are not those of the traffic that fills the rest of the log."""
        if n <= SAMPLE_BYTES:
            return bytes(chunk[:n])
        step = n // SAMPLE_SLICES
        size = SAMPLE_BYTES // SAMPLE_SLICES
        return b"".join(chunk[i * step : i * step + size] for i in range(SAMPLE_SLICES))

    def hits(self, chunk: bytes | bytearray, n: int | None = None) -> list[tuple[int, int]]:
        """(end offset, word index) of every keyword occurrence in chunk[:n], overlaps included."""
        return self.hits_and_load(chunk, len(chunk) if n is None else n)[0]

    def hits_and_load(self, chunk: bytes | bytearray, n: int) -> tuple[list[tuple[int, int]], LoadProbe | None]:
        """hits(), and the load probe's findings when it is compiled in (else None)."""
        if self._hs is not None:
            out: list[tuple[int, int]] = []
            nw = len(self.words)
            probe = LoadProbe(self.window[0]) if self.window is not None else None
            if probe is None:
                def on_match(wid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
                    out.append((to, wid))
            else:
                first, base = probe.first, probe.lo - nw - 1

                def on_match(wid: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
                    if wid < nw:
                        out.append((to, wid))
                    elif wid == nw:
                        probe.above = to
                    else:
                        first[wid + base] = to

            with memoryview(chunk) as mv:
                self._hs.scan(mv[:n], match_event_handler=on_match)  # the binding scans any buffer: no copy
            return out, probe
        if self._plan is None:
            # each plan finds the gates of the first chunk, timed: the faster is kept (the
            # lines found are the same, whichever gates found them)
            timed = []
            for plan in self._gate_plans(self._sample(chunk, n)):
                t0 = time.perf_counter()
                starts = _gate_starts(plan, chunk, n)
                timed.append((time.perf_counter() - t0, starts, plan))
            _, found, self._plan = min(timed, key=lambda t: t[0])
        else:
            found = _gate_starts(self._plan, chunk, n)
        at = sorted(found)
        res: list[tuple[int, int]] = []
        stop = 0  # the end of the line checked last: gates inside it are passed over
        for pos in at:
            if pos < stop:
                continue
            start = chunk.rfind(b"\n", 0, pos) + 1
            end = chunk.find(b"\n", pos, n)
            end = n if end < 0 else end
            stop = end + 1
            # only the part of a line any stage reads is searched for the words: a megabyte
            # line costs one search, not one per gate
            line = bytes(chunk[start : min(end, start + LINE_CAP)])
            # the scan only needs to know that the line holds a word, and whether one of them
            # is a catalogue keyword: one trie search each, not one find per word
            if self._all_rx is None:
                self._all_rx = re.compile(trie_regex(self._bwords))
                flagged = [w for w, f in zip(self._bwords, self.flagged, strict=True) if f]
                self._flag_rx = re.compile(trie_regex(flagged)) if flagged else None
            m_all = self._all_rx.search(line)
            if m_all is not None:
                res.append((start + m_all.end(), self._wid[m_all.group()]))
                m_flag = self._flag_rx.search(line) if self._flag_rx is not None else None
                if m_flag is not None:
                    res.append((start + m_flag.end(), self._wid[m_flag.group()]))
        return res, None


@dataclass
class Gates:
    """The gates that open with one byte, and how the portable engine finds them."""

    opener: bytes
    by_find: bool  # bytes.find and a loop over its hits, else one `re` pass
    freq: float  # the opener's share of the sample's bytes
    rx: re.Pattern[bytes]  # the gates, as a trie


def _cover(cands: list[list[bytes]], weight: Callable[[int], float]) -> set[bytes]:
    """One gate per word (`cands`: each word's candidates), opening with bytes chosen by a
    greedy weighted set cover: the cheapest byte per word it lets open a gate, first."""
    opens = [{g[0] for g in c} for c in cands]
    chosen: set[int] = set()
    left = set(range(len(cands)))
    while left:
        covers = Counter(c for i in left for c in opens[i])
        best = min(covers, key=lambda c: (weight(c) / covers[c], c))
        chosen.add(best)
        left = {i for i in left if best not in opens[i]}
    for c in sorted(chosen, key=lambda c: (-weight(c), c)):  # drop what the others cover
        if all(o & (chosen - {c}) for o in opens):
            chosen.discard(c)
    return {min((g for g in c if g[0] in chosen), key=lambda g: (weight(g[0]), g)) for c in cands}


def _gate_starts(plan: list[Gates], chunk: bytes | bytearray, n: int) -> list[int]:
    """Where a gate starts in chunk[:n], at most one a line per group, group by group (in no
    order)."""
    out: list[int] = []
    for g in plan:
        if not g.by_find:
            _search(g.rx, chunk, 0, n, out)
            continue
        # more of the byte here than the sample promised: past this many, `re` takes over,
        # so a chunk full of it costs a pass, not a Python turn per byte
        budget = 256 + int(4 * g.freq * n)
        find, match, opener = chunk.find, g.rx.match, g.opener
        i = find(opener, 0, n)
        while i >= 0:
            budget -= 1
            if budget < 0:
                _search(g.rx, chunk, i, n, out)
                break
            if match(chunk, i, n) is not None:
                out.append(i)
                i = chunk.find(b"\n", i, n)  # the line has its hit: on after it
                if i < 0:
                    break
            i = find(opener, i + 1, n)
    return out


def _search(rx: re.Pattern[bytes], chunk: bytes | bytearray, pos: int, n: int, out: list[int]) -> None:
    # the search goes on after each hit's line: a megabyte line costs one hit, not one per gate
    search = rx.search
    while (m := search(chunk, pos, n)) is not None:
        out.append(m.start())
        pos = chunk.find(b"\n", m.end(), n) + 1
        if not pos:
            return


def trie_regex(words: list[bytes]) -> bytes:
    """One regex for many literals, shaped as a trie: the portable engine then tries only the
    branches that share the bytes already seen, instead of every alternative at every byte."""
    end = -1
    trie: dict = {}
    for w in words:
        node = trie
        for b in w:
            node = node.setdefault(b, {})
        node[end] = {}

    def build(node: dict) -> bytes:
        if end in node and len(node) == 1:
            return b""
        alts = [re.escape(bytes([b])) + build(child) for b, child in sorted(node.items()) if b != end]
        if len(alts) == 1 and end not in node:
            return alts[0]
        body = b"(?:" + b"|".join(alts) + b")"
        return body + b"?" if end in node else body

    return build(trie)


def _decode(b: bytes | bytearray) -> str:
    # a kept line is cut at LINE_CAP (the reader already cut anything over MAX_LINE), so one
    # huge line costs neither regex time nor report size
    return b[:LINE_CAP].decode("utf-8", "replace")


WINDOW_VALUES = 128  # Hyperscan confirms a hundred literals of one prefix for free; a thousand cost 0.35 s/GiB
PROBE_MIN_BYTES = 64 * 1024 * 1024  # below this the two findall passes cost less than compiling a probe
PROBE_SAMPLES, PROBE_SAMPLE_BYTES = 64, 64 * 1024


def probe_expressions(lo: int, hi: int) -> list[bytes]:
    """The load probe's Hyperscan expressions, in the id order hits_and_load expects, each
    reported once: any `#running-req:` value over `hi` or written with a leading zero, then
    each value of [lo, hi].

    A window literal has no terminator, so `#running-req: 72` also fires on 720. That is safe:
    while the guard stays silent every value is at most hi, and a value that starts with the
    digits of v is at least v, so the largest literal seen is the largest value, and its first
    hit is a line holding exactly that value (one more digit would be a larger value)."""
    digits = str(hi).encode()
    over = [b"0[0-9]", b"[1-9][0-9]{%d}" % len(digits)]
    for i, d in enumerate(digits):
        if d < ord("9"):
            rest = len(digits) - i - 1
            over.append(digits[:i] + b"[%c-9]" % (d + 1) + (b"[0-9]{%d}" % rest if rest else b""))
    head = re.escape(_RUNNING_WORD)
    return ([head + b"(?:" + b"|".join(over) + b")"]
            + [head + b"%d" % v for v in range(lo, hi + 1)])


def load_window(path: str, size: int) -> tuple[int, int] | None:
    """The values the load probe looks for in a big SGLang log: the WINDOW_VALUES just around
    the largest `#running-req` of slices read from across the file. That value is in the file,
    so some chunk has a window hit; a chunk with a larger value, or with none and no peak yet,
    falls back to the findall pass (_peak_probed). None: the file is too small to be worth a
    probe, or its slices hold no SGLang load line."""
    if size < PROBE_MIN_BYTES:
        return None
    step = size // PROBE_SAMPLES
    best = -1
    with open(path, "rb") as fh:
        for i in range(PROBE_SAMPLES):
            fh.seek(i * step)
            for v in set(_RUNNING_SGL.findall(fh.read(PROBE_SAMPLE_BYTES))):
                best = max(best, int(v))
    if best < 0:
        return None
    hi = best + WINDOW_VALUES // 4
    lo = max(0, hi - WINDOW_VALUES + 1)
    return lo, hi


def _summarise(buf: bytes | bytearray, n: int, summary: LoadSummary, first_line: int, lo: int | None = None,
               probe: LoadProbe | None = None) -> int:
    """Fold the load figures of buf[:n] into `summary` with C-level scans (no per-line Python);
    returns the offset of the last load line (-1: none), which the caller may pass in if known.

    The chunk's last load line says which engine wrote it; only that engine's figures are
    searched for, so a missing pattern never costs a full pass over the chunk."""
    if lo is None:
        lo = _last_load(buf, n)
    if lo < 0:
        return lo  # no load line at all
    if buf.find(b"Avg prompt throughput", lo, n) >= 0:  # vLLM
        _peak(summary, buf, n, _RUNNING_VLLM, b"Running: %d reqs", first_line)
        summary.vllm_hit_rates.extend(float(x) for x in _VLLM_HIT.findall(buf, 0, n)[-1:])
        return lo
    # the prefix cache's tokens are not summed here: see pipeline/prefill.py
    if probe is not None:
        _peak_probed(summary, buf, n, probe, first_line)
    else:
        _peak(summary, buf, n, _RUNNING_SGL, b"#running-req: %d", first_line)
    return lo


def _peak(summary: LoadSummary, buf: bytes | bytearray, n: int, rx: re.Pattern[bytes], fmt: bytes,
          first_line: int) -> None:
    # the same few values recur on a million lines: only the distinct ones are parsed
    vals = set(rx.findall(buf, 0, n))
    best = max(map(int, vals)) if vals else 0
    if best > summary.peak_running:
        summary.peak_running = best
        at = re.compile(re.escape(fmt % best) + rb"(?!\d)").search(buf, 0, n)  # as rx read it
        summary.peak_line = first_line + buf.count(b"\n", 0, at.start() if at is not None else 0)


def _peak_probed(summary: LoadSummary, buf: bytes | bytearray, n: int, probe: LoadProbe, first_line: int) -> None:
    """_peak from the probe's window hits before n; the findall pass only when the probe cannot
    tell: a value over the window, or no window value while the peak so far is under it (the
    exact smaller peak may still be reported, as the peak before a crash)."""
    if 0 <= probe.above <= n:
        _peak(summary, buf, n, _RUNNING_SGL, b"#running-req: %d", first_line)
        return
    seen = [v for v, t in probe.first.items() if t <= n]
    if not seen:
        if summary.peak_running < probe.lo:
            _peak(summary, buf, n, _RUNNING_SGL, b"#running-req: %d", first_line)
        return  # every value here is under the window, so under the peak already found
    best = max(seen)
    if best > summary.peak_running:
        summary.peak_running = best
        summary.peak_line = first_line + buf.count(b"\n", 0, probe.first[best])


def _last_load(chunk: bytes | bytearray, end: int) -> int:
    """Offset of the start of the last load line before `end`, or -1. Looks in a growing
    window before `end` first: load lines are frequent, so the first window nearly always hits."""
    lo = end
    for span in (65536, 1 << 20, end):
        lo = max(0, end - span)
        best = max(chunk.rfind(w, lo, end) for w in _LOAD_WORDS)
        if best >= 0:
            return chunk.rfind(b"\n", 0, best) + 1
        if lo == 0:
            break
    return -1


def _spans(chunks: Iterable[bytes | tuple[bytearray, int]]) -> Iterator[tuple[bytes | bytearray, int]]:
    for c in chunks:
        yield (c, len(c)) if isinstance(c, (bytes, bytearray)) else c


@dataclass
class _Window:
    """Lines after a traceback header (or a frame) that belong to it: kept until the
    traceback has visibly ended, not for a fixed count, so that a noisy log's thousands of
    request tracebacks do not drag in the lines around them."""

    header: int  # line number of the line that opened it
    left: int  # lines it may still take (the anchor's cap)
    lead: bytes  # the first token of the header line, for writers that prefix every line
    lines: list[tuple[int, bytes]] = field(default_factory=list)
    gap: int = 0  # consecutive lines that did not look like part of a traceback
    flagged: set[int] = field(default_factory=set)  # its lines that hold a catalogue keyword
    last_tb: int = 0  # index of its last line that looked like part of a traceback

    @property
    def done(self) -> bool:
        return self.left <= 0 or self.gap >= WINDOW_GAP


_TB_WORDS = (b'File "', b"Traceback", b"During handling", b"The above exception", b"^^^", b"~~~",
             b"Stack (most recent", b"Current thread", b"Thread 0x")
WINDOW_GAP = 6  # lines after the last traceback-looking one: the exception line and its message
KEEP_COPIES = 16  # identical windows or lines kept; past that only counted (N ranks fit, 10,000 requests do not)
LINE_CAP = 32 * 1024  # bytes of a kept line that any stage reads: no regex runs over a megabyte
MAX_KEPT = 200_000  # kept lines in all; past that the report says the cap was hit
MAX_KEPT_BYTES = 64 * 1024 * 1024  # and their bytes: 200,000 lines of 32 KiB would be 6 GB
_DIGITS = re_compile(rb"[0-9]+|0x[0-9a-fA-F]+")
_INDENTED = re_compile(rb"[^\s:] {4,}\S")
# a content prefix starts within this many bytes of a line: right after the line's own prefix
# (timestamp, rank, logger), not quoted later inside a message
CONTENT_AT = 96


def _lead(raw: bytes) -> bytes:
    """The writer's own prefix token ('(EngineCore_DP0', 'ERROR', '[rank3]:'), when the header
    line has one before the traceback text; lines that start with it belong to the window."""
    i = raw.find(b"Traceback")
    if i <= 0:
        i = raw.find(b'File "')
    if i <= 0:
        return b""
    head = raw[:i].lstrip()
    sp = head.find(b" ")
    tok = head[: sp if sp > 0 else len(head)][:24]
    return tok if len(tok) >= 3 and not tok[:1].isdigit() else b""


def _tb_like(line: bytes, lead: bytes) -> bool:
    if line[:1] in (b" ", b"\t") or (lead and line.startswith(lead)):
        return True
    head = line[:300]
    if any(w in head for w in _TB_WORDS):
        return True
    # a code line behind a prefix this scan cannot name (container timestamps): still indented,
    # unlike an access line's "INFO:     10.0.0.1" padding
    return b"    " in line[8:200] and _INDENTED.search(line, 0, 200) is not None


class _Keeper:
    """Puts lines into the ScanResult, once, with identical windows and lines past
    KEEP_COPIES counted instead of kept.

    Everything it holds is bounded. The first half of MAX_KEPT lines (and of MAX_KEPT_BYTES)
    is kept for good; past that, new lines and windows go to a rolling tail of the other half,
    whose oldest entries are dropped with their keys as new ones come: a log of millions of
    distinct lines keeps its start and its end (where the crash usually is), never grows the
    table of seen keys past the cap, and the report says the cap was hit."""

    def __init__(self, res: ScanResult, copies: bool = False) -> None:
        self.res = res
        self.copies = copies  # note each copy's lines: only a byte range's result is merged
        self.seen: dict[bytes, int] = {}
        self.head_lines = 0
        self.head_bytes = 0
        # entries kept past the head, oldest first: (key, their line numbers, their bytes)
        self.tail: deque[tuple[bytes, list[int], int]] = deque()
        self.tail_lines = 0
        self.tail_bytes = 0

    def _key(self, parts: list[bytes]) -> bytes:
        return _DIGITS.sub(b"", b"\n".join(p[:400] for p in parts))

    def _count(self, key: bytes) -> int:
        n = self.seen.get(key, 0) + 1
        self.seen[key] = n
        return n

    def line(self, no: int, raw: bytes, flagged: bool) -> bytes | None:
        """Keep or count line `no`; returns its key when it was only counted as a repeat."""
        if no in self.res.lines:
            return None
        key = b"L" + self._key([raw])
        n = self._count(key)
        if n > KEEP_COPIES:
            self.repeat(key, no)
            return key
        self._keep(key, [(no, raw)], {no} if flagged else set())
        return None

    def window(self, w: _Window) -> None:
        # a traceback is the same one when its frames and exception types are: request errors
        # differ in their messages (the prompt, the token counts), not in where they were raised
        # (up to the exception line: what follows it is whatever the server did next)
        shape = [raw if b'File "' in raw else raw.split(b": ", 1)[0][:80] for _, raw in w.lines[: w.last_tb + 2]]
        key = b"W" + self._key(shape)
        n = self._count(key)
        if n > KEEP_COPIES:
            self.repeat(key, w.header)
            return
        self._keep(key, w.lines, w.flagged)
        if n == 1 and w.header in self.res.lines:
            self.res.window_keys[w.header] = key

    def _keep(self, key: bytes, lines: list[tuple[int, bytes]], flagged: set[int]) -> None:
        new = [(no, raw) for no, raw in lines if no not in self.res.lines]
        size = sum(len(raw) for _, raw in new)
        # an entry counts at least one line, so that keys without new lines stay bounded too
        if self.head_lines + max(1, len(new)) <= MAX_KEPT // 2 and self.head_bytes + size <= MAX_KEPT_BYTES // 2:
            self.head_lines += max(1, len(new))
            self.head_bytes += size
        else:
            self.res.capped = True
            self.tail.append((key, [no for no, _ in new], size))
            self.tail_lines += max(1, len(new))
            self.tail_bytes += size
            while self.tail and (self.tail_lines > MAX_KEPT // 2 or self.tail_bytes > MAX_KEPT_BYTES // 2):
                self._drop_oldest()
            if not self.tail or self.tail[-1][0] != key:
                return  # this entry alone is over the tail's budget
        for no, raw in new:
            self.res.lines[no] = _decode(raw)
            if no in flagged:
                self.res.keyword_lines.add(no)
        if self.copies:
            self.res.copies.setdefault(key, []).append([no for no, _ in new])

    def _drop_oldest(self) -> None:
        key, nos, size = self.tail.popleft()
        self.tail_lines -= max(1, len(nos))
        self.tail_bytes -= size
        for no in nos:
            self.res.lines.pop(no, None)
            self.res.keyword_lines.discard(no)
            self.res.window_keys.pop(no, None)
        self.seen.pop(key, None)
        self.res.repeats.pop(key, None)
        self.res.copies.pop(key, None)

    def repeat(self, key: bytes, no: int) -> None:
        count, _last = self.res.repeats.get(key, (0, no))
        self.res.repeats[key] = (count + 1, no)


def scan(chunks: Iterable[bytes | tuple[bytearray, int]], prefilter: Prefilter,
         overflow: Iterable[bytes | tuple[bytearray, int]] | None = None, *,
         base: int = 0, source: tuple[str, int] | None = None, series: bool = False) -> ScanResult:
    """One pass over `chunks` (bytes, or (buffer, n) spans from read.iter_spans).
    `overflow` (data after a byte range) only completes windows that the range's last lines
    opened; it is not scanned itself. Given, this is a range's scan that merge() will fold, so
    the keeper also notes the lines of each copy it keeps (ScanResult.copies).

    `base`: the byte offset of the first chunk in the log. `source`: (path, size) when the
    chunks are the bytes of that regular file, which can be read again: the prefix cache's
    tokens are then left to prefill.read_back; otherwise a prefill.Ring sums them here.
    `series`: also fold the load series (only the HTML report draws it)."""
    fold: SeriesFold | None = None
    if series:  # imported only for HTML: its patterns cost the Markdown and JSON runs nothing
        from triage.pipeline.loadseries import SeriesFold

        fold = SeriesFold()
    res = ScanResult(engine_used=prefilter.engine, scanner_note=prefilter.note, prefill_source=source)
    ring = Ring() if source is None else None
    keeper = _Keeper(res, copies=overflow is not None)
    window_words = [(w.encode(), n) for w, n in anchors.WINDOW.items()]
    line_no = 1  # number of the first line of the current chunk
    open_w: _Window | None = None  # a window still taking lines at the end of the last chunk
    prev_load: tuple[int, str] | None = None
    failure_seen = False
    flags = prefilter.flagged
    for buf, n in _spans(chunks):
        at = base + res.total_bytes  # the chunk's offset in the log
        res.total_bytes += n
        if ring is not None:
            ring.feed(buf, n, at)
        starts: set[int] = set()
        flagged_starts: set[int] = set()
        start, stop = -1, -1  # the line of the previous hit: hits come in offset order
        found, probe = prefilter.hits_and_load(buf, n)
        for end, wid in found:
            if not start <= end - 1 < stop:
                start = buf.rfind(b"\n", 0, end - 1) + 1
                stop = buf.find(b"\n", end - 1, n)
                stop = n if stop < 0 else stop
                if end - start > LINE_CAP:
                    continue  # past what any stage reads of a megabyte line
                starts.add(start)
            if flags[wid]:
                flagged_starts.add(start)
        del found  # a chunk of `Killed` lines has a million hits: not held while its lines are read
        pos, no = 0, line_no
        consumed = 0  # offset up to which the last window walked
        last_w = open_w  # the last window walked: hits inside it mark its lines
        if open_w is not None:
            consumed, _ = _walk(open_w, buf, 0, n, line_no - 1)
            if not (consumed >= n and not open_w.done):
                open_w = None
        chunk_failure_off = -1
        # the first failure-looking line after the chunk's last load line: the load figures at
        # it are the chunk's own, so a crash at the end of the log gets those of the whole run
        last_lo = _last_load(buf, n)
        after_load = -1
        repeat_raw: bytes | None = None  # a line only counted, and its key: see below
        repeat_key = b""
        for start in sorted(starts):
            no += buf.count(b"\n", pos, start)
            pos = start
            eol = buf.find(b"\n", start, n)
            if eol < 0:
                eol = n
            raw = bytes(buf[start : min(eol, start + LINE_CAP)])
            if raw == repeat_raw and not (start < consumed and last_w is not None):
                # the same bytes as the line before that was only counted: a run of `Killed`
                # lines costs a comparison each, not the checks below (they would decide the same)
                keeper.repeat(repeat_key, no)
                continue
            repeat_raw = None
            # one look for the hints per line, and none once both lines are found
            failing = (chunk_failure_off < 0 or (after_load < 0 and start > last_lo)) and any(
                h in raw for h in FAILURE_HINTS)
            if failing and after_load < 0 and start > last_lo:
                after_load = no
                res.anchor_offsets.setdefault(no, at + start)
            if failing and chunk_failure_off < 0:
                chunk_failure_off = start
                res.failure_anchors.append(no)
                # the load figures just before the crash, and the peak up to it
                lo = _last_load(buf, start)
                if lo >= 0:
                    le = buf.find(b"\n", lo, n)
                    res.last_load[no] = (line_no + buf.count(b"\n", 0, lo), _decode(buf[lo:le]))
                elif prev_load is not None:
                    res.last_load[no] = prev_load
                if not failure_seen:
                    failure_seen = True
                    before = res.load.copy()
                    _summarise(buf, start, before, line_no, probe=probe)
                    res.load_at[no] = before
                    res.anchor_offsets.setdefault(no, at + start)
                    if ring is not None:
                        apply(before, ring.window(at + start))
            if any(raw.find(c, 0, CONTENT_AT) >= 0 for c in CONTENT_BYTES):
                continue  # a request's content (right after the line's prefix): user text, not the server's
            if start < consumed and last_w is not None:
                # inside the window walked last: its lines are kept (or counted) with it
                if start in flagged_starts:
                    last_w.flagged.add(no)
                continue
            if last_w is not None and last_w is not open_w:
                keeper.window(last_w)
                last_w = None
            cap = max((k for w, k in window_words if w in raw), default=0)
            if not cap:
                counted = keeper.line(no, raw, start in flagged_starts)
                if counted is not None:
                    repeat_raw, repeat_key = raw, counted
                continue
            w = _Window(header=no, left=cap, lead=_lead(raw), lines=[(no, raw[:LINE_CAP])])
            if start in flagged_starts:
                w.flagged.add(no)
            consumed, _ = _walk(w, buf, eol + 1, n, no)
            last_w = w
            if consumed >= n and not w.done:
                open_w = w  # it goes on in the next chunk
        if last_w is not None and last_w is not open_w:
            keeper.window(last_w)
        nl = (no - line_no) + buf.count(b"\n", pos, n)  # newlines before the last hit + after it
        lo = _summarise(buf, n, res.load, line_no, lo=last_lo, probe=probe)
        if after_load >= 0 and after_load not in res.load_at:
            res.load_at[after_load] = res.load.copy()
            if ring is not None:
                apply(res.load_at[after_load], ring.window(res.anchor_offsets[after_load]))
            if res.failure_anchors[-1] != after_load:  # not the chunk's first one, just appended
                res.failure_anchors.append(after_load)
        if lo >= 0:
            le = buf.find(b"\n", lo, n)
            # counted back from the chunk's end: the last load line is near it
            prev_load = (line_no + nl - buf.count(b"\n", lo, n), _decode(buf[lo : le if le >= 0 else n]))
            res.last_serving = max(res.last_serving, prev_load[0])
        if after_load >= 0 and after_load not in res.last_load and prev_load is not None:
            res.last_load[after_load] = prev_load
        # an access line answered 2xx near the chunk's end: the server was serving there
        ho = buf.rfind(SERVING_WORD, max(0, n - SERVING_TAIL), n)
        if ho >= 0:
            res.last_serving = max(res.last_serving, line_no + nl - buf.count(b"\n", ho, n))
        if fold is not None:
            fold.feed(buf, n, line_no, at)
        line_no += nl
        if n and buf[n - 1] != 10:
            line_no += 1  # the last line had no newline
        res.total_lines = line_no - 1
    res.final_load = prev_load
    if fold is not None:
        res.series, res.series_lines = fold.buckets, fold.load_lines
    if ring is not None:
        apply(res.load, ring.window(base + res.total_bytes))
    if open_w is not None:
        if overflow is not None:
            no = line_no - 1
            for buf, n in _spans(overflow):
                p, no = _walk(open_w, buf, 0, n, no)
                if open_w.done or p < n:
                    break
        res.walked_to = open_w.lines[-1][0]
        keeper.window(open_w)
    return res


def _walk(w: _Window, buf: bytes | bytearray, p: int, n: int, no: int) -> tuple[int, int]:
    """Take lines from offset p into window w until it ends or the buffer does; returns the
    offset reached and the number of the last line taken."""
    while not w.done and p < n:
        e = buf.find(b"\n", p, n)
        if e < 0:
            e = n
        line = bytes(buf[p : min(e, p + LINE_CAP)])
        no += 1
        w.lines.append((no, line))
        w.left -= 1
        if _tb_like(line, w.lead):
            w.gap, w.last_tb = 0, len(w.lines) - 1
        else:
            w.gap += 1
        p = e + 1
    return p, no


# -- several cores on one file ---------------------------------------------------------------

PARALLEL_MIN_BYTES = 64 * 1024 * 1024
# Set in each scan worker by _init_worker (the parent never sets it): the prefilter (a
# Hyperscan database cannot be pickled, so it is inherited through fork) and the shared
# counter of bytes scanned for the progress line, or None.
_worker: tuple[Prefilter, Any] | None = None


def _init_worker(prefilter: Prefilter, counter: Any) -> None:
    global _worker
    _worker = (prefilter, counter)


def _scan_range_in_worker(args: tuple[str, int, int, bool]) -> ScanResult:
    assert _worker is not None
    path, start, end, series = args
    return scan_range(path, start, end, *_worker, series=series)


def scan_range(path: str, start: int, end: int, prefilter: Prefilter, counter: Any = None,
               series: bool = False) -> ScanResult:
    """The scan of bytes [start, end) of a file, cut at line starts (split_points); windows
    opened near the end are completed from the bytes after it."""
    from triage.pipeline.read import iter_chunks, iter_spans

    def counted(spans: Iterator[tuple[bytearray, int]]) -> Iterator[tuple[bytearray, int]]:
        for span in spans:
            if counter is not None:
                with counter.get_lock():
                    counter.value += span[1]
            yield span

    import os

    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(start)
        chunks = counted(iter_spans(fh, name=path, limit=end - start))
        res = scan(chunks, prefilter, overflow=iter_chunks(fh, name=path, limit=4 * 1024 * 1024),
                   base=start, source=(path, size), series=series)
    return res


def split_points(path: str, size: int, parts: int) -> list[int]:
    """Byte offsets that cut the file into `parts` ranges at line starts."""
    cuts = [0]
    with open(path, "rb") as fh:
        for k in range(1, parts):
            # finish the line we landed in, reading in bounded blocks: readline() would pull a
            # 100 MB line without a newline into memory whole
            cut = _next_line_start(fh, max(size * k // parts, cuts[-1]), size)
            if cut >= size:
                break  # no newline after here: the rest is one range
            if cut > cuts[-1]:
                cuts.append(cut)
    cuts.append(size)
    return cuts


def _next_line_start(fh, pos: int, size: int, block: int = 1 << 20) -> int:  # noqa: ANN001
    """Offset just after the first newline at or after `pos`, or `size` when there is none."""
    fh.seek(pos)
    while pos < size:
        data = fh.read(min(block, size - pos))
        if not data:
            break
        nl = data.find(b"\n")
        if nl >= 0:
            return pos + nl + 1
        pos += len(data)
    return size


def _shift(res: ScanResult, by: int) -> None:
    if not by:
        return
    res.lines = {n + by: t for n, t in res.lines.items()}
    res.keyword_lines = {n + by for n in res.keyword_lines}
    res.last_load = {a + by: (n + by, t) for a, (n, t) in res.last_load.items()}
    if res.final_load:
        res.final_load = (res.final_load[0] + by, res.final_load[1])
    if res.last_serving:
        res.last_serving += by
    res.repeats = {k: (c, last + by) for k, (c, last) in res.repeats.items()}
    res.window_keys = {h + by: k for h, k in res.window_keys.items()}
    res.copies = {k: [[n + by for n in c] for c in cs] for k, cs in res.copies.items()}
    if res.walked_to:
        res.walked_to += by
    res.load_at = {a + by: v for a, v in res.load_at.items()}
    res.anchor_offsets = {a + by: o for a, o in res.anchor_offsets.items()}
    for summary in (res.load, *res.load_at.values()):
        if summary.peak_line is not None:
            summary.peak_line += by
    if res.series:
        from triage.pipeline.loadseries import shifted

        shifted(res.series, by)


def _add(a: LoadSummary, b: LoadSummary) -> LoadSummary:
    peak, line = (a.peak_running, a.peak_line) if a.peak_running >= b.peak_running else (b.peak_running, b.peak_line)
    return LoadSummary(peak, line, a.new_tokens + b.new_tokens, a.cached_tokens + b.cached_tokens,
                       a.prefill_lines + b.prefill_lines, a.vllm_hit_rates + b.vllm_hit_rates)


def _fold_copies(out: ScanResult, res: ScanResult, reach: int) -> set[int]:
    """The lines of `res`'s kept copies that one pass would not have kept: those inside the
    window the range before walked on into this one (up to line `reach`), and those past the
    KEEP_COPIES that `out` (the ranges before) and `res` keep of a key together, whose counts
    go to out.repeats. A key already kept before loses `res`'s own header for it, so that its
    repeats are counted once (analyze._count_repeats)."""
    dropped: set[int] = set()
    first_header = {k: h for h, k in res.window_keys.items()}
    for key, copies in res.copies.items():
        have = out.copies.setdefault(key, [])
        if have and key in first_header:
            res.window_keys.pop(first_header[key], None)
        for c in copies:
            if c and c[-1] <= reach:
                dropped.update(c)  # a line of the window walked on into this range
                continue
            if len(have) < KEEP_COPIES:
                have.append(c)
                continue
            dropped.update(c)
            if c:
                count, last = out.repeats.get(key, (0, c[0]))
                out.repeats[key] = (count + 1, max(last, c[0]))
    return dropped


def merge(parts: list[ScanResult]) -> ScanResult:
    """Results of consecutive byte ranges -> the result of one pass over the whole."""
    out = ScanResult(engine_used=parts[0].engine_used, scanner_note=parts[0].scanner_note,
                     prefill_source=parts[0].prefill_source)
    offset = reach = 0
    for res in parts:
        _shift(res, offset)
        res.failure_anchors = [a + offset for a in res.failure_anchors]
        dropped = _fold_copies(out, res, reach)
        reach = res.walked_to
        for n, t in res.lines.items():
            if n not in dropped:
                out.lines.setdefault(n, t)
        out.keyword_lines |= res.keyword_lines - dropped
        for a, v in res.last_load.items():
            out.last_load.setdefault(a, v)
        # a failure early in a range whose last load line is in an earlier range
        for a in res.failure_anchors:
            if a not in out.last_load and out.final_load is not None:
                out.last_load[a] = out.final_load
        out.failure_anchors += res.failure_anchors
        for a, upto in res.load_at.items():  # a range's figures start at its first byte
            out.load_at.setdefault(a, _add(out.load, upto))
        for a, o in res.anchor_offsets.items():
            out.anchor_offsets.setdefault(a, o)
        out.load = _add(out.load, res.load)
        if res.final_load is not None:
            out.final_load = res.final_load
        out.total_bytes += res.total_bytes
        out.last_serving = max(out.last_serving, res.last_serving)
        out.capped = out.capped or res.capped
        if res.series is not None:
            out.series = (out.series or []) + res.series
            out.series_lines += res.series_lines
        for h, k in res.window_keys.items():
            if h not in dropped:
                out.window_keys.setdefault(h, k)
        for rk, (c, last) in res.repeats.items():
            have = out.repeats.get(rk, (0, last))
            out.repeats[rk] = (have[0] + c, max(have[1], last))
        offset += res.total_lines
    out.total_lines = offset
    if out.series is not None:
        from triage.pipeline.loadseries import bounded

        out.series = bounded(out.series)
    return out


def scan_file(path: str, prefilter: Prefilter, workers: int, progress: bool = False,
              series: bool = False) -> ScanResult | None:
    """Scan a large regular file on several cores; None when it is not worth it. `progress`:
    a progress line on stderr when it is a terminal (the CLI asks; the library prints nothing)."""
    import os

    size = os.path.getsize(path)
    if workers < 2 or size < PARALLEL_MIN_BYTES:
        return None
    import multiprocessing as mp  # only for a log big enough to split
    with open(path, "rb") as fh:
        if fh.read(2) == b"\x1f\x8b":
            return None  # gzip cannot be entered in the middle
    cuts = split_points(path, size, workers)
    if len(cuts) < 3:
        return None
    try:
        ctx = mp.get_context("fork")
    except ValueError:
        return None
    from triage.core.progress import Progress

    meter = Progress(size if progress else None, "scanning")
    counter = ctx.Value("q", 0) if meter.enabled else None
    try:
        with ctx.Pool(len(cuts) - 1, initializer=_init_worker, initargs=(prefilter, counter)) as pool:
            pending = pool.map_async(_scan_range_in_worker, [(path, cuts[i], cuts[i + 1], series) for i in range(len(cuts) - 1)])
            while not pending.ready():
                pending.wait(0.2)
                if counter is not None:
                    meter.update(counter.value)
            parts = pending.get()
    finally:
        meter.close()
    out = merge(parts)
    # the size the ranges were cut from: a log still being written has grown since, and the
    # read-back must not take that for bytes the scan dropped
    out.prefill_source = (path, size)
    return out
