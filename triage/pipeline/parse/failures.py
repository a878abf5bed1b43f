"""Turn parsed tracebacks and marker lines into distinct Failures.

The same traceback printed by N ranks becomes one Failure listing its ranks, the first rank
to print it named. Marker lines inside a traceback are part of it; secondary markers
(SIGQUIT, Killed, engine-dead) are attached to the failure before them.
"""

from __future__ import annotations

import bisect

import regex

from triage.core.fingerprint import fingerprint, mask
from triage.core.models import Evidence, ExceptionInfo, Failure, Frame
from triage.pipeline.parse.lines import LogLine
from triage.pipeline.parse.markers import LEADING_EXC, MarkerHit
from triage.pipeline.parse.traceback import THREAD_DUMP, TRUNCATED, Traceback, unwrap

_RANK_ORDER = regex.compile(r"\d{1,9}")  # bounded: int() refuses a run of 4,300 digits


def _rank_key(r: str) -> tuple:
    return tuple(int(x) for x in _RANK_ORDER.findall(r)) or (10**9,)


def _add_rank(f: Failure, rank: str | None) -> None:
    if rank and rank not in f.ranks:
        f.ranks.append(rank)


def _from_traceback(tb: Traceback, source: str | None) -> Failure:
    final = tb.final
    cut_frames: list = []
    if final.type == TRUNCATED and len(tb.chain) > 1:
        # the last link was cut off: name the last exception the log does show, and keep the
        # cut link's frames (the most recent code the process ran) ahead of its own
        cut_frames = final.frames
        final = tb.chain[-2]
    chain = [ExceptionInfo(exception=e.type, message=e.message) for e in tb.chain]
    cause: ExceptionInfo | None = None
    wrapped = unwrap(final.message)
    if wrapped is not None:
        inner_type = wrapped[0]
        if not inner_type and len(tb.chain) > 1 and tb.chain[0].message.startswith(wrapped[1][:40]):
            inner_type = tb.chain[0].type  # the chain names the type the wrapper dropped
        cause = ExceptionInfo(exception=inner_type or "(message)", message=wrapped[1])
    elif len(named := [e for e in tb.chain if e.type != TRUNCATED]) > 1:
        first = named[0]
        cause = ExceptionInfo(exception=first.type, message=first.message)
    frames = [Frame(file=f[0], line=f[1], function=f[2], code=f[3]) for f in final.frames + cut_frames]
    if not frames:
        for e in reversed(tb.chain):
            if e.frames:
                frames = [Frame(file=f[0], line=f[1], function=f[2], code=f[3]) for f in e.frames]
                break
    fp = fingerprint(final.type, final.message, [(f.file, f.function) for f in frames])
    raw = [Evidence(line=ln.no, text=ln.text) for ln in tb.lines]
    return Failure(kind="traceback", exception=final.type, message=final.message, line=tb.line,
                   exception_line=final.line,
                   end_line=tb.end_line, ranks=[], first_rank=tb.rank, fingerprint=fp, cause=cause,
                   chain=chain, frames=frames, raw=raw, source=source)


def spans_of(tracebacks: list[Traceback]) -> list[tuple[int, int]]:
    """The line spans of parsed tracebacks: a marker line inside one is that traceback's."""
    return [(tb.line, tb.end_line) for tb in tracebacks]


def build_failures(tracebacks: list[Traceback], markers: list[MarkerHit], source: str | None = None,
                   repeats: dict[int, tuple[int, int]] | None = None) -> list[Failure]:
    """Every lookup below is indexed (by fingerprint, by line, by masked message): a log with
    10,000 distinct tracebacks costs 10,000 steps, not 10,000 squared. `repeats`: copies of a
    traceback the scan only counted, by its first line (how many, the last one's line)."""
    repeats = repeats or {}
    by_fp: dict[str, Failure] = {}
    # the same crash under another fingerprint, by (exception, masked message): line-ordered
    by_key: dict[tuple[str, str], tuple[list[int], list[Failure]]] = {}
    complete = sorted(tb.line for tb in tracebacks if tb.final.type != TRUNCATED)
    for tb in tracebacks:  # in line order
        if tb.final.type == TRUNCATED and _within(complete, tb.line, 2000):
            continue  # another rank's copy of a traceback that is complete elsewhere
        tbf = _from_traceback(tb, source)
        have = by_fp.get(tbf.fingerprint)
        if have is None:
            # the same crash printed by another rank whose interleaved lines were demultiplexed
            # imperfectly: same exception and message, close in the log
            same_key = (tbf.exception, mask(tbf.message))
            lines, same = by_key.setdefault(same_key, ([], []))
            i = bisect.bisect_right(lines, tbf.line - 2000)  # the first one kept less than 2000 lines before
            if i < len(same):
                have = same[i]
            else:
                by_fp[tbf.fingerprint] = tbf
                lines.append(tbf.line)
                same.append(tbf)
                have = tbf
        if have is not tbf:
            have.end_line = max(have.end_line or 0, tbf.end_line or 0)
            have.count += 1
        more = repeats.get(tb.line)
        if more is not None:
            have.count += more[0]
            have.last_line = max(have.last_line or 0, more[1])
        _add_rank(have, tb.rank)
    failures = list(by_fp.values())

    # markers come from find_markers(lines, spans_of(tracebacks)): none lies inside a traceback
    marker_fail: dict[tuple[str, str, str], Failure] = {}
    secondary: list[MarkerHit] = []
    weak: list[MarkerHit] = []
    starts = sorted(tb.line for tb in tracebacks)
    dumps = [f for f in failures if f.exception == THREAD_DUMP]
    cxx = _CxxIndex()
    for hit in markers:
        if not hit.marker.primary:
            secondary.append(hit)
            continue
        if hit.marker.weak or (hit.marker.kind in ("exception", "engine-error") and _announces(hit.line.no, starts)
                               and (not LEADING_EXC.match(hit.line.message) or _cut_after(hit.line.no, tracebacks))):
            weak.append(hit)
            continue
        dump = next((f for f in dumps if 0 < f.line - hit.line.no <= 6), None)
        if hit.marker.kind == "segfault" and dump is not None:
            # "Fatal Python error: Segmentation fault" above faulthandler's thread dump: one failure
            dump.kind, dump.message, dump.line = "segfault", hit.message, hit.line.no
            dump.exception_line = hit.line.no
            dump.raw.insert(0, Evidence(line=hit.line.no, text=hit.line.text))
            dump.fingerprint = fingerprint(hit.exception, hit.message, [(f.file, f.function) for f in dump.frames])
            continue
        key = (hit.marker.kind, hit.exception, mask(hit.message))
        f = marker_fail.get(key)
        if f is None:
            # a C++ abort's what() right after its terminate line is the same failure
            prev = cxx.recent(hit)
            if prev is not None:
                if not prev.message or prev.message.startswith("terminate called"):
                    prev.message = hit.message  # what() says what the terminate line could not
                prev.raw.append(Evidence(line=hit.line.no, text=hit.line.text))
                _add_rank(prev, hit.line.rank)
                continue
            f = _from_marker(hit, source)
            marker_fail[key] = f
            failures.append(f)
            cxx.add(f)
            if f.exception == THREAD_DUMP:
                dumps.append(f)
        else:
            f.end_line = max(f.end_line or 0, hit.line.no)
            cxx.moved(f)
            f.count += 1
            if len(f.raw) < 16:
                f.raw.append(Evidence(line=hit.line.no, text=hit.line.text))
        _add_rank(f, hit.line.rank)
    # an error line right before a failure announces it ("Error in chat completion stream
    # generator." above its traceback), right after one echoes it; alone, it is the failure
    near_index = _NearIndex(failures)
    for hit in weak:
        no = hit.line.no
        # the closest failure it can announce (the line or two before it) or echo (3 lines after)
        near = near_index.closest(no)
        if near is not None:
            if hit.marker.kind in ("exception", "engine-error") and near.exception == TRUNCATED and hit.exception:
                # a pasted traceback whose exception line came first, or whose frames were cut:
                # the exception line names what the frames could not
                near.exception, near.message = hit.exception, hit.message
                if hit.marker.kind == "engine-error":
                    near.kind = "engine-error"
                near.exception_line = no
                near.fingerprint = fingerprint(hit.exception, hit.message, [(f.file, f.function) for f in near.frames])
            if no < near.line:
                near.raw.insert(0, Evidence(line=no, text=hit.line.text))
                near.line = no
                near_index.moved(near)
            elif len(near.followed_by) < 8:
                near.followed_by.append(Evidence(line=no, text=hit.line.text))
            continue
        key = ("weak", hit.exception, mask(hit.message))
        f = marker_fail.get(key)
        if f is None:
            f = marker_fail[key] = _from_marker(hit, source)
            failures.append(f)
            near_index.add(f)
        elif len(f.raw) < 16:
            f.raw.append(Evidence(line=no, text=hit.line.text))
            f.end_line = max(f.end_line or 0, no)
            near_index.moved(f)
        _add_rank(f, hit.line.rank)
    failures.sort(key=lambda f: f.line)
    _fold_consequences(failures)
    # secondary markers: attach to the failure before them (or one starting right after,
    # like vLLM's "EngineCore failed to start." just above its traceback), else they are the failure
    lines_of = [f.line for f in failures]  # failures are in line order here
    for hit in secondary:
        no = hit.line.no
        i = bisect.bisect_right(lines_of, no)  # failures[:i] start at or before the hit
        if i or (i < len(failures) and failures[i].line - no <= 3):
            tgt = failures[i] if i < len(failures) and failures[i].line - no <= 3 else failures[i - 1]
            if len(tgt.followed_by) < 8:
                tgt.followed_by.append(Evidence(line=no, text=hit.line.text))
            continue
        key = (hit.marker.kind, hit.exception, mask(hit.message))
        f = marker_fail.get(key)
        if f is None:
            f = _from_marker(hit, source)
            marker_fail[key] = f
            failures.append(f)
            failures.sort(key=lambda f: f.line)
            lines_of = [f.line for f in failures]
        else:
            f.raw.append(Evidence(line=no, text=hit.line.text))
        _add_rank(f, hit.line.rank)
    for f in failures:
        if f.first_rank and f.first_rank not in f.ranks:
            f.ranks.insert(0, f.first_rank)
        f.ranks.sort(key=_rank_key)
    return failures


def _within(sorted_lines: list[int], no: int, dist: int) -> bool:
    """Whether any of `sorted_lines` is less than `dist` lines from `no`."""
    i = bisect.bisect_left(sorted_lines, no - dist + 1)
    return i < len(sorted_lines) and sorted_lines[i] < no + dist


class _NearIndex:
    """The failures by first and last line, for the weak-marker pass. Lines change as markers
    are folded in: a changed failure is indexed again under its new lines and every hit is
    checked against its current lines, so stale entries cost nothing but a look."""

    def __init__(self, failures: list[Failure]) -> None:
        self.order: dict[int, int] = {}
        self.starts: dict[int, list[Failure]] = {}
        self.ends: dict[int, list[Failure]] = {}
        for f in failures:
            self.add(f)

    def add(self, f: Failure) -> None:
        self.order.setdefault(id(f), len(self.order))
        self.moved(f)

    def moved(self, f: Failure) -> None:
        self.starts.setdefault(f.line, []).append(f)
        self.ends.setdefault(f.end_line or f.line, []).append(f)

    def closest(self, no: int) -> Failure | None:
        """The failure starting 1-2 lines after `no` or ending 0-3 lines before it, the closest
        one (the first in list order on a tie)."""
        found: dict[int, Failure] = {}
        for k in (no + 1, no + 2):
            for f in self.starts.get(k, ()):
                found[id(f)] = f
        for k in range(no - 3, no + 1):
            for f in self.ends.get(k, ()):
                found[id(f)] = f
        live = [f for f in found.values() if 0 < f.line - no <= 2 or 0 <= no - (f.end_line or f.line) <= 3]
        if not live:
            return None
        return min(live, key=lambda f: (min(abs(f.line - no), abs(no - (f.end_line or f.line))), self.order[id(f)]))


class _CxxIndex:
    """C++ abort failures by their last line: a what() line joins the latest one of its rank
    that ended at most 5 lines before it."""

    def __init__(self) -> None:
        self.order: dict[int, int] = {}
        self.ends: dict[int, list[Failure]] = {}

    def add(self, f: Failure) -> None:
        if f.kind == "cxx":
            self.order[id(f)] = len(self.order)
            self.moved(f)

    def moved(self, f: Failure) -> None:
        if id(f) in self.order:
            self.ends.setdefault(f.end_line or f.line, []).append(f)

    def recent(self, hit: MarkerHit) -> Failure | None:
        if hit.marker.kind != "cxx":
            return None
        no = hit.line.no
        live = {id(f): f for k in range(no - 5, no + 1) for f in self.ends.get(k, ())
                if f.kind == "cxx" and 0 <= no - (f.end_line or f.line) <= 5 and f.first_rank == hit.line.rank}
        if not live:
            return None
        f = max(live.values(), key=lambda f: self.order[id(f)])
        f.end_line = no
        self.moved(f)
        return f


def _cut_after(no: int, tracebacks: list[Traceback]) -> bool:
    """Whether the traceback starting right after line `no` lost its exception line."""
    return any(0 < tb.line - no <= 2 and tb.final.type == TRUNCATED for tb in tracebacks)


def _announces(no: int, starts: list[int]) -> bool:
    """Whether a traceback starts within a few lines after line `no`."""
    i = bisect.bisect_right(starts, no)
    return i < len(starts) and starts[i] - no <= 2


def _from_marker(hit: MarkerHit, source: str | None) -> Failure:
    no = hit.line.no
    return Failure(kind=hit.marker.kind, exception=hit.exception, message=hit.message, line=no,
                   exception_line=no, end_line=no, first_rank=hit.line.rank,
                   fingerprint=fingerprint(hit.exception, hit.message, []),
                   raw=[Evidence(line=no, text=hit.line.text)], source=source)


def _fold_consequences(failures: list[Failure]) -> None:
    """A C++ abort or `Fatal Python error: Aborted` right after another failure is its echo."""
    keep: list[Failure] = []
    for f in failures:
        prev = keep[-1] if keep else None
        near = prev is not None and prev.line <= f.line <= (prev.end_line or prev.line) + 200
        echo = (f.kind in ("cxx", "segfault") and f.message.strip() in ("", "Aborted") and prev is not None) or (
            f.kind == "cxx" and near and prev is not None and prev.kind in ("nccl", "cuda", "traceback"))
        if echo and keep:
            prev = keep[-1]
            if len(prev.followed_by) < 8:
                prev.followed_by.append(Evidence(line=f.line, text=f.raw[0].text if f.raw else f.message))
            continue
        keep.append(f)
    failures[:] = keep


# What an engine prints after a failure it did not cause: a wrapper announcing that the engine,
# a worker or the scheduler died (the cause is the failure before it), never a cause itself.
DEATH_REPORT = regex.compile(
    r"^(?:RuntimeError: )?(?:Engine core initialization failed|EngineCore (?:encountered|failed|hit)"
    r"|Engine background task failed|AsyncLLM output_handler failed|Worker proc \S{1,80} died"
    r"|WorkerProc (?:hit an exception|failed)|Worker failed with error|Scheduler hit an exception"
    r"|Exception in ModelTpServer|Received sigquit from a child|Child process unexpectedly failed"
    r"|During handling of the above exception)")
DEAD_NAMES = regex.compile(r"EngineDead|DeadError|EngineCoreDead|SchedulerDead")
CAUSE_SPAN = 200  # lines from a failure's end to a death report for the report to be about it
MIN_QUOTE = 16  # characters of a failure's message another must quote to be its wrapper
LOOK_BACK = 16  # earlier failures a wrapper or death report is compared with (the nearest ones)


def _quote(f: Failure) -> str | None:
    """The part of a failure's message a wrapper would quote: its first line, trimmed."""
    first = f.message.strip().split("\n", 1)[0].strip()[:80]
    return first if len(first) >= MIN_QUOTE and not DEATH_REPORT.match(first) else None


def consequence_links(failures: list[Failure], known: dict[int, set[str]]) -> dict[int, tuple[int, str]]:
    """Failure index -> (the index of the failure it follows from, why), for each failure that
    only quotes or wraps an earlier failure's message, or only reports that an engine or worker
    died after it. `known`: the specific signatures explaining each failure; a failure with a
    specific signature of its own that its cause lacks is a failure in its own right."""
    order = sorted(range(len(failures)), key=lambda i: failures[i].line)
    links: dict[int, tuple[int, str]] = {}

    def root(i: int) -> int:
        while i in links:
            i = links[i][0]
        return i

    for pos, j in enumerate(order):
        f = failures[j]
        texts = [f.message, *(c.message for c in f.chain), f.cause.message if f.cause else ""]
        earlier = order[max(0, pos - LOOK_BACK):pos]  # bounded: 10,000 tracebacks stay linear work
        cause, why = None, ""
        for i in reversed(earlier):  # the latest earlier failure whose message it quotes
            q = _quote(failures[i])
            if q is not None and failures[i].line < f.line and any(q in t for t in texts if t):
                cause, why = i, "quotes its message"
                break
        if cause is None and (DEATH_REPORT.match(f.message.strip()) or DEAD_NAMES.search(f.exception)):
            for i in reversed(earlier):
                p = failures[i]
                end = max(p.end_line or p.line, p.line)
                if p.line < f.line and f.line - end <= CAUSE_SPAN and not DEATH_REPORT.match(p.message.strip()):
                    cause, why = i, "reports that the engine or a worker died after it"
                    break
        if cause is None:
            continue
        cause = root(cause)
        if known.get(j, set()) - known.get(cause, set()):
            continue  # explained by a signature of its own: not just an echo
        links[j] = (cause, why)
    return links


def collect_lines(lines: dict[int, str]) -> list[LogLine]:
    """The one store of parsed lines every later stage reads: each kept line parsed once,
    hard-wrapped pastes joined."""
    from triage.pipeline.parse.lines import parse_line, rejoin_wrapped

    return rejoin_wrapped([parse_line(no, lines[no]) for no in sorted(lines)])
