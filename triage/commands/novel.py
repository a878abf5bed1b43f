"""Warnings and errors the failed log has and a healthy one does not (`--baseline`).

Drain-style templates: each WARNING/ERROR-level line (vLLM, glog, Rust tracing, uvicorn) or,
for dialects without a level (SGLang), each line that says warning/error/failed/..., is
reduced to its message (engine prefix peeled by `parse_line`) with its variables masked
(`fingerprint.mask`: numbers, paths, ids, shapes, ranks, times). Two lines that differ only
in their variables share a template; a template the healthy log never produced is novel.

Unlike Drain, no parse tree is learnt: the masks are fixed, which keeps the templates of two
logs directly comparable and the whole thing one pass with no state beyond a Counter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

import regex

from triage.core.fingerprint import mask
from triage.core.lazyre import lazy_regex
from triage.core.vocabulary import CONTENT_PREFIXES
from triage.pipeline.parse.lines import parse_line
from triage.pipeline.read import CHUNK_SIZE, iter_chunks, open_source

# Words that make a level-less line a warning or an error (case-sensitive, as printed).
WORDS = ("Warning", "WARN", "Error", "ERROR", "error", "failed", "Failed", "FAILED", "Exception", "exception",
         "not supported", "unsupported", "not found", "deprecat", "Deprecat", "fatal", "Fatal", "FATAL", "CRITICAL")
_WORD_BYTES = tuple(w.encode() for w in WORDS)
# glog warning/error/fatal lines have a one-letter level (W0110 21:30:54.920681 ...)
_GLOG_BYTES = lazy_regex(rb"(?:^|\n)[WEF]\d{4} \d\d:")
_WORD_RX = lazy_regex("|".join(regex.escape(w) for w in WORDS))
_KEEP_LEVELS = {"WARNING": "WARNING", "WARN": "WARNING", "W": "WARNING", "ERROR": "ERROR", "E": "ERROR",
                "CRITICAL": "CRITICAL", "F": "FATAL"}
_QUIET_LEVELS = {"INFO", "DEBUG", "TRACE", "I"}
_FRAME = lazy_regex(r'^\s*File "')


def template(no: int, text: str) -> str | None:
    """The template of one log line, or None when it is not a warning/error line."""
    ln = parse_line(no, text)
    msg = ln.message.rstrip()
    if not msg.strip() or msg[:1].isspace() or _FRAME.match(msg):
        return None  # traceback bodies: frames and code lines belong to the failure, not here
    if msg.startswith(CONTENT_PREFIXES) or msg.startswith("Traceback (most recent call last)"):
        return None
    level = (ln.level or "").upper()
    if level in _QUIET_LEVELS:
        return None
    if level in _KEEP_LEVELS:
        return f"{_KEEP_LEVELS[level]} {mask(msg)}"
    if _WORD_RX.search(msg):
        return mask(msg)
    return None


def _numbered(lines: Iterable[str | tuple[int, str]]) -> Iterator[tuple[int, str]]:
    for i, item in enumerate(lines, 1):
        if isinstance(item, tuple):
            yield item
        else:
            yield i, item


def templates(lines: Iterable[str] | Iterable[tuple[int, str]]) -> Counter[str]:
    """Count the warning/error templates of `lines` (strings numbered from 1, or (line number,
    text) pairs as `warning_lines` yields them)."""
    out: Counter[str] = Counter()
    for no, text in _numbered(lines):
        t = template(no, text)
        if t is not None:
            out[t] += 1
    return out


def novel(failed_lines: Iterable[str] | Iterable[tuple[int, str]],
          healthy_lines: Iterable[str] | Iterable[tuple[int, str]],
          limit: int = 20) -> list[tuple[str, int, int]]:
    """(template, count, first line number) of each warning/error template that the failed log
    has and the healthy one does not; most frequent first, then earliest; at most `limit`."""
    healthy = set(templates(healthy_lines))
    counts: Counter[str] = Counter()
    first: dict[str, int] = {}
    for no, text in _numbered(failed_lines):
        t = template(no, text)
        if t is None or t in healthy:
            continue
        counts[t] += 1
        first.setdefault(t, no)
    ranked = sorted(counts, key=lambda t: (-counts[t], first[t]))
    return [(t, counts[t], first[t]) for t in ranked[:limit]]


def _hit_starts(chunk: bytes) -> list[int]:
    """Start offsets of the lines of `chunk` that hold a level word: one `bytes.find` pass per
    word (several times faster than one alternation regex), then the glog prefixes."""
    starts: set[int] = set()
    for w in _WORD_BYTES:
        i = chunk.find(w)
        while i >= 0:
            starts.add(chunk.rfind(b"\n", 0, i) + 1)
            end = chunk.find(b"\n", i)
            if end < 0:
                break
            i = chunk.find(w, end)
    for m in _GLOG_BYTES.finditer(chunk):
        starts.add(m.start() + (chunk[m.start() : m.start() + 1] == b"\n"))
    return sorted(starts)


def warning_lines(path: str, size: int = CHUNK_SIZE) -> Iterator[tuple[int, str]]:
    """(line number, text) of the lines of a log file (`-`, `.gz` too) that may be warnings or
    errors. Streams line-aligned chunks and decodes only lines that contain a level word or a
    glog W/E/F prefix (bytes searches first), so a multi-GB log costs one pass and little
    memory; `template()` then decides."""
    with open_source(path) as fh:
        base = 0  # lines before this chunk
        for chunk in iter_chunks(fh, size=size, name=path):
            chunk = bytes(chunk)
            no, counted = base, 0
            for start in _hit_starts(chunk):
                end = chunk.find(b"\n", start)
                if end < 0:
                    end = len(chunk)
                no += chunk.count(b"\n", counted, start)
                counted = start
                yield no + 1, chunk[start:end].decode("utf-8", "replace")
            base += chunk.count(b"\n")
