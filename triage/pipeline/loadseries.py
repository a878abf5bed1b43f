"""The load series a log prints (running and queued requests, KV-cache usage, throughput, the
prefix cache's hits), folded by the scan into a bounded number of buckets for the HTML chart.

Only asked for by `--format html`: the Markdown and JSON runs never build one. A chunk is cut
into slices of `width` bytes and each slice becomes a bucket holding every figure's minimum,
maximum and last value, found with one C-level `findall` per slice and engine, never a Python
step per line. When the buckets pass MAX_BUCKETS, neighbours merge pairwise and the slices
double: a 1 GiB log costs the same few hundred buckets as a 1 MiB one, and a spike survives
every merge as some bucket's maximum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_BUCKETS = 512  # after a merge 256 remain: a chart is drawn from 256-512 points
FIRST_WIDTH = 512  # bytes per bucket at the start: one to three load lines each in a small log
STAMP_BYTES = 96  # what is kept of a bucket's last load line: its prefix, where the timestamp is

_NUM = rb"(\d{1,12}(?:\.\d{1,6})?)"  # no figure is longer; a hostile run of digits is none
_SKIP = rb"(?:[^,\n]{1,60}, ){0,6}?"  # fields releases added between the ones read here
# SGLang's decode line: running, KV-cache usage, throughput, queued (in that order since 0.3)
_SGL_BODY = (rb"Decode batch[.,] #running-req: " + _NUM + rb", " + _SKIP + rb"token usage: " + _NUM + rb", " + _SKIP
             + rb"gen throughput \(token/s\): " + _NUM + rb", #queue-req: " + _NUM)
_SGL = re.compile(_SGL_BODY)
# the same line as 0.4-0.5 print it, without the skips: a third of _SGL's cost on a big log;
# _SGL reads a slice only where this one found nothing
_SGL_FAST = re.compile(rb"Decode batch[.,] #running-req: " + _NUM + rb", #token: \d{1,18}, token usage: " + _NUM
                       + rb", (?:cuda graph: \w{1,5}, )?gen throughput \(token/s\): " + _NUM + rb", #queue-req: " + _NUM)
# with data parallelism each DP rank prints its own line: `[time DP1 TP8] Decode batch...`
_SGL_DP = re.compile(rb" (DP\d{1,4})[^\]\n]{0,40}\] " + _SGL_BODY)
_SGL_DP_PROBE = re.compile(rb" DP\d{1,4}[^\]\n]{0,40}\] Decode batch")
_SGL_PREFILL = re.compile(rb"Prefill batch[.,] #new-seq: \d{1,9}, #new-token: (\d{1,12}), #cached-token: (\d{1,12})")
# vLLM's periodic stats line; V1 with data parallelism prefixes it with `Engine 001: `
_VLLM = re.compile(rb"Avg prompt throughput: [\d.]{1,20} tokens/s, Avg generation throughput: " + _NUM
                   + rb" tokens/s, Running: (\d{1,9}) reqs, (?:Swapped: \d{1,9} reqs, )?(?:Pending|Waiting): (\d{1,9}) reqs, "
                   rb"GPU KV cache usage: " + _NUM + rb"%(?:, (?:GPU )?Prefix cache hit rate: " + _NUM + rb"%)?")
_VLLM_ENGINE = re.compile(rb"Engine (\d{1,4}): $")
_SGL_WORD, _VLLM_WORD = b"Decode batch", b"Avg prompt throughput"

# the figures in the order the chart draws them; token usage and hit rate in percent
METRICS = ("running", "queued", "token_usage", "throughput", "cache_hit")


@dataclass
class Bucket:
    """A stretch of the log: its lines and each figure's (min, max, last) there. Keys are a
    metric, or a metric and a rank ("running DP1") when ranks print their own figures."""

    first_line: int
    last_line: int
    offset: int = 0  # its bytes in the log: [offset, end)
    end: int = 0
    stamp: str | None = None  # the start of its last load line (the timestamp is read from it later)
    stamp_line: int = 0
    values: dict[str, list[float]] = field(default_factory=dict)
    cached: int = 0  # SGLang's prefill tokens: the hit rate is summed, not averaged
    prompt: int = 0

    def add(self, key: str, column: tuple[bytes, ...] | list[bytes], scale: float = 1.0) -> None:
        # the same few values recur on a thousand lines: only the distinct ones are converted
        distinct = [float(v) * scale for v in set(column) if v]
        if not distinct:
            return
        last = float(column[-1]) * scale if column[-1] else distinct[0]
        have = self.values.get(key)
        lo, hi = min(distinct), max(distinct)
        if have is None:
            self.values[key] = [lo, hi, last]
        else:
            have[0], have[1], have[2] = min(have[0], lo), max(have[1], hi), last

    def merged(self, later: Bucket) -> Bucket:
        out = Bucket(self.first_line, later.last_line, self.offset, later.end, later.stamp or self.stamp, later.stamp_line or self.stamp_line,
                     {k: list(v) for k, v in self.values.items()}, self.cached + later.cached, self.prompt + later.prompt)
        for k, (lo, hi, last) in later.values.items():
            have = out.values.get(k)
            out.values[k] = [lo, hi, last] if have is None else [min(have[0], lo), max(have[1], hi), last]
        return out


def halve(buckets: list[Bucket]) -> list[Bucket]:
    """Neighbours merged pairwise: half the resolution, every extreme kept."""
    out = [a.merged(b) for a, b in zip(buckets[0::2], buckets[1::2], strict=False)]
    if len(buckets) % 2:
        out.append(buckets[-1])
    return out


def bounded(buckets: list[Bucket], limit: int = MAX_BUCKETS) -> list[Bucket]:
    while len(buckets) > limit:
        buckets = halve(buckets)
    return buckets


@dataclass
class SeriesFold:
    """The scan's accumulator: fed every chunk (`feed`), it keeps at most MAX_BUCKETS buckets."""

    width: int = FIRST_WIDTH
    buckets: list[Bucket] = field(default_factory=list)
    load_lines: int = 0  # load lines folded in

    def feed(self, buf: bytes | bytearray, n: int, first_line: int, at: int = 0) -> None:
        """Fold buf[:n], whose first line is `first_line` and first byte the log's `at`th."""
        # one engine writes a log: a search that finds nothing reads the whole chunk, so the
        # second engine's word is looked for only when the first's is absent
        first = buf.find(_SGL_WORD, 0, n)
        sgl = first >= 0
        vllm = not sgl and buf.find(_VLLM_WORD, 0, n) >= 0
        if not (sgl or vllm):
            return  # a chunk without load lines (start-up, a traceback) adds no bucket
        # data parallelism shows in every decode line's prefix: the first one says
        head, eol = buf.rfind(b"\n", 0, max(first, 0)) + 1, buf.find(b"\n", max(first, 0), n)
        dp = sgl and _SGL_DP_PROBE.search(buf, head, n if eol < 0 else eol) is not None
        pos, line = 0, first_line
        while pos < n:
            end = n if n - pos < self.width * 3 // 2 else pos + self.width
            if end < n:
                nl = buf.find(b"\n", end - 1, n)  # slices end at line ends
                end = n if nl < 0 else nl + 1
            lines = buf.count(b"\n", pos, end)
            b = Bucket(line, line + max(lines - 1, 0), at + pos, at + end)
            if sgl:
                self._sglang(b, buf, pos, end, dp)
            if vllm:
                self._vllm(b, buf, pos, end)
            if b.values or b.prompt:
                self._stamp(b, buf, pos, end, line, _SGL_WORD if sgl else _VLLM_WORD)
                self.buckets.append(b)
                if len(self.buckets) > MAX_BUCKETS:
                    self.buckets = halve(self.buckets)
                    self.width *= 2
            pos, line = end, line + lines

    def _sglang(self, b: Bucket, buf: bytes | bytearray, pos: int, end: int, dp: bool) -> None:
        if dp:
            by_rank: dict[bytes, list[tuple[bytes, ...]]] = {}
            for rank, *rest in _SGL_DP.findall(buf, pos, end):
                by_rank.setdefault(rank, []).append(tuple(rest))
            for rank, rows in by_rank.items():
                self._decode(b, rows, " " + rank.decode())
        else:
            rows = _SGL_FAST.findall(buf, pos, end)
            if not rows and buf.find(_SGL_WORD, pos, end) >= 0:
                rows = _SGL.findall(buf, pos, end)
            self._decode(b, rows, "")
        pre = _SGL_PREFILL.findall(buf, pos, end)
        if pre:
            new, cached = zip(*pre, strict=True)
            b.prompt += sum(map(int, new)) + sum(map(int, cached))
            b.cached += sum(map(int, cached))

    def _decode(self, b: Bucket, rows: list[tuple[bytes, ...]], suffix: str) -> None:
        if not rows:
            return
        self.load_lines += len(rows)
        running, usage, throughput, queued = zip(*rows, strict=True)
        b.add("running" + suffix, running)
        b.add("queued" + suffix, queued)
        b.add("token_usage" + suffix, usage, 100.0)  # SGLang prints a fraction
        b.add("throughput" + suffix, throughput)

    def _vllm(self, b: Bucket, buf: bytes | bytearray, pos: int, end: int) -> None:
        rows: dict[str, list[tuple[bytes, ...]]] = {}
        for m in _VLLM.finditer(buf, pos, end):  # a line every few seconds: finditer is cheap here
            e = _VLLM_ENGINE.search(buf, max(pos, m.start() - 12), m.start())
            rows.setdefault(f" engine {int(e.group(1))}" if e else "", []).append(m.groups())
        engines = [k for k in rows if k]
        for key, got in rows.items():
            suffix = key if len(engines) > 1 else ""  # one engine's number says nothing
            self.load_lines += len(got)
            throughput, running, queued, usage, hits = zip(*got, strict=True)
            b.add("running" + suffix, running)
            b.add("queued" + suffix, queued)
            b.add("token_usage" + suffix, usage)
            b.add("throughput" + suffix, throughput)
            b.add("cache_hit" + suffix, hits)

    @staticmethod
    def _stamp(b: Bucket, buf: bytes | bytearray, pos: int, end: int, line: int, word: bytes) -> None:
        at = buf.rfind(word, pos, end)
        if at < 0:
            at = buf.rfind(b"Prefill batch", pos, end)
        if at < 0:
            return
        start = buf.rfind(b"\n", pos, at) + 1 or pos
        b.stamp = bytes(buf[start : min(at, start + STAMP_BYTES)]).decode("utf-8", "replace")
        b.stamp_line = line + buf.count(b"\n", pos, start)

    def finish(self) -> list[Bucket]:
        return finished(self.buckets)


def finished(buckets: list[Bucket]) -> list[Bucket]:
    """The buckets, with SGLang's prefix-cache hit rate (summed over each bucket's prefill
    lines, so only once merging is over) turned into a figure of its own."""
    for b in buckets:
        if b.prompt and "cache_hit" not in b.values:
            rate = 100.0 * b.cached / b.prompt
            b.values["cache_hit"] = [rate, rate, rate]
    return buckets


def shifted(buckets: list[Bucket], by: int) -> list[Bucket]:
    """A byte range's buckets with its line numbers made the whole log's."""
    for b in buckets:
        b.first_line += by
        b.last_line += by
        if b.stamp_line:
            b.stamp_line += by
    return buckets
