"""Live reading of a server log, one line at a time: the startup phase the server is in, and
whether a failure's lines are still being written.

`triage.pipeline.parse.timeline` answers the same questions after the fact for a whole log; this module
reuses its milestone regexes so that `watch` and `analyze` agree on what a phase is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from triage.core.lazyre import lazy_regex
from triage.core.vocabulary import FAILURE_HINTS
from triage.pipeline.parse.lines import LogLine
from triage.pipeline.parse.markers import BENIGN, MARKERS, applies
from triage.pipeline.parse.timeline import (
    CUDA_GRAPHS,
    KV_CACHE,
    LOADING_WEIGHTS,
    READY_PHASE,
    STARTING,
    WARMING_UP,
    next_phase,
)

if TYPE_CHECKING:
    from triage.pipeline.scan import Prefilter

__all__ = ["CUDA_GRAPHS", "KV_CACHE", "LOADING_WEIGHTS", "READY_PHASE", "STARTING", "WARMING_UP",
           "FailureBlock", "PhaseChange", "PhaseTracker", "failure_marker"]

# tqdm-style progress as the engines print it:
#   Loading safetensors checkpoint shards:  55% Completed | 90/163 [00:22<00:18, 4.17it/s]
#   Capturing batches (bs=64 avail_mem=13.18 GB):  47%|████      | 9/19 [00:09<00:10,  0.91it/s]
_PROGRESS = lazy_regex(r"(\d{1,3})%\s*(?:Completed\s*\||\|[^|]*\|)\s*(\d+)/(\d+)")
# phases whose progress bars we show; a progress bar in any other phase belongs to something else
_PROGRESS_PHASES = (STARTING, LOADING_WEIGHTS, CUDA_GRAPHS)

_HINTS = tuple(h.decode() for h in FAILURE_HINTS)
_TRACEBACK = "Traceback (most recent call last)"
# lines inside a failure block that do not end it even though they carry an engine prefix
_CONTINUATION = lazy_regex(r"^(?:During handling of the above exception|The above exception was the direct cause|\s*$)")


# Literals that every line able to move a phase or open a failure block holds: the phase
# milestones of triage.parse.timeline, the failure hints, every marker's `needs`, and the words
# of the catch-all error marker (case-insensitive, as it is). A line without any of them is
# skipped by the catch-up of a large backlog (tests/test_robust.py checks the list against
# the milestone regexes on every fixture line).
PHASE_WORDS = ("Load weight", "Loading weights took", "Model loading took", "Init torch distributed begin",
               "Starting to load model", "Loading model weights", "Loading safetensors", "Capture ", "Capturing",
               "CUDA graph end.", "Graph capturing finished", "The server is fired up", "Application startup complete")
_CATCH_ALL = ("fail", "fatal", "exception", "error", "abort", "crash", "died", "cannot", "can't", "unable to",
              "timed out", "timeout")


_LIVE: tuple[Prefilter, Prefilter] | None = None


def _live_prefilters() -> tuple[Prefilter, Prefilter]:
    """The scanner `analyze` uses (Hyperscan when installed), for the exact literals and for
    the catch-all's words over the lower-cased block (lower() is one C pass; a case-insensitive
    regex would run at about 1 MB/s)."""
    global _LIVE
    if _LIVE is None:
        from triage.pipeline.scan import Prefilter

        exact = {*PHASE_WORDS, *(h.decode() for h in FAILURE_HINTS), *(k for mk in MARKERS for k in mk.needs)}
        _LIVE = Prefilter(exact), Prefilter(_CATCH_ALL)
    return _LIVE


def live_line_starts(data: bytes) -> list[int]:
    """Offsets of the lines of `data` that hold one of the live words, in order."""
    exact, lower = _live_prefilters()
    ends = [end for end, _ in exact.hits(data)] + [end for end, _ in lower.hits(data.lower())]
    return sorted({data.rfind(b"\n", 0, end - 1) + 1 for end in ends})


@dataclass(frozen=True)
class PhaseChange:
    phase: str
    previous: str
    line: int
    previous_seconds: float  # wall-clock time spent in the previous phase


def failure_marker(ln: LogLine) -> bool:
    """Does this line say the server failed? The same literals the scanner (FAILURE_HINTS)
    and the marker parser (MARKERS) use, with the parser's benign exceptions."""
    if BENIGN.search(ln.text):
        return False
    if any(h in ln.text for h in _HINTS):
        return True
    # the same prefilter and level rules as the analyze path (markers.applies): the patterns
    # never run on an ordinary decode line, and both paths agree on what a marker is
    return any(applies(mk, ln) and mk.rx.search(ln.message) for mk in MARKERS)


class PhaseTracker:
    """Follows the startup milestones line by line; phases only move forward."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.phase = STARTING
        self.since = clock()
        self.line = 0  # the line that began the current phase (0: the start of the log)
        self.progress: str | None = None  # "90/163 (55%)" when the log gives it
        self._sglang = False

    def seconds_in_phase(self) -> float:
        return self._clock() - self.since

    def feed(self, ln: LogLine, raw: str | None = None) -> PhaseChange | None:
        if ln.dialect == "sglang":
            self._sglang = True
        target = self._target(ln)
        if target is None or target == self.phase:
            if self.phase in _PROGRESS_PHASES:
                self._progress(raw if raw is not None else ln.text)
            return None
        now = self._clock()
        change = PhaseChange(target, self.phase, ln.no, now - self.since)
        self.phase, self.since, self.line, self.progress = target, now, ln.no, None
        return change

    def _target(self, ln: LogLine) -> str | None:
        return next_phase(self.phase, ln.message, self._sglang)

    def _progress(self, raw: str) -> None:
        # a tqdm line holds many \r-separated updates; the last one is the current state
        for seg in reversed(raw.split("\r")):
            m = _PROGRESS.search(seg)
            if m:
                self.progress = f"{m.group(2)}/{m.group(3)} ({m.group(1)}%)"
                return


class FailureBlock:
    """Whether the lines of a failure are still coming.

    A block opens at a failure marker. A traceback runs until its first unindented line (the
    exception); the block then stays open through unprefixed text (CUDA hints, "Possible
    solutions", another rank's frames, chained tracebacks) and closes at the next ordinary
    engine-prefixed line. A server that dies mid-block never writes that line: the caller
    closes the block after a quiet grace period instead.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.start: int | None = None  # line of the first marker
        self.closed = False
        self._in_traceback = False

    @property
    def open(self) -> bool:
        return self.start is not None

    def feed(self, ln: LogLine) -> None:
        if failure_marker(ln):
            if self.start is None:
                self.start = ln.no
            self.closed = False
            self._in_traceback = _TRACEBACK in ln.message
            return
        if self.start is None or self.closed:
            return
        msg = ln.message
        indented = not msg.strip() or msg[0].isspace()
        if self._in_traceback:
            if not indented:
                self._in_traceback = False  # the exception line
            return
        if ln.prefixed and not indented and not _CONTINUATION.match(msg):
            self.closed = True
