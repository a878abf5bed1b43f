"""`triage watch`: follow a server log as it is written, show the phase, and stop at the first
of ready, failure (with the full report) or timeout.

Three parts, each with one job: `Follower` reads the complete lines appended to a path (across
creation, truncation and rotation); `Watcher` turns lines into phase changes and decides when a
failure's lines are complete; `Printer` writes what the operator or a script sees. `watch_file`
is the loop for a file; `triage.commands.run` drives the same parts for a process it started.

Memory stays bounded for a server that runs for days: only the last lines are kept, and the
report is made by re-reading the file with the ordinary pipeline.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from triage.commands.output import Output, current
from triage.commands.phases import READY_PHASE, FailureBlock, PhaseChange, PhaseTracker
from triage.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, TriageError
from triage.pipeline.parse.lines import clean, parse_line

if TYPE_CHECKING:
    from triage.catalogue.load import Catalogue
    from triage.core.models import Report

TAIL_LINES = 20
POLL_INTERVAL = 0.15  # seconds to sleep when nothing new was written: responsive, not a busy loop
HEARTBEAT = 30.0  # seconds between "still in phase X" lines on stderr
PROGRESS_EVERY = 2.0  # at most one progress line on stderr this often
CATCH_UP = 1 << 20  # a read this large is a backlog: only the lines that can matter are parsed
CATCH_UP_READ = 8 << 20  # bytes read a poll: a 1 GB backlog takes ~128 polls, each checking the timeout
MAX_BLOCK_WAIT = 30.0  # a failure block that never closes (endless unprefixed output) is judged after this


class Follower:
    """Reads the complete lines appended to a path, like `tail -F` from the first byte.

    The file may not exist yet; it may be truncated (size below what was read) or rotated (the
    path now names another inode): either way the new file is read from its start and
    `generation` goes up, so that the caller can restart its line numbers.
    """

    def __init__(self, path: str, max_read: int = 1 << 20, max_line: int = 1 << 20) -> None:
        self.path = path
        self.generation = 0
        self.reason = ""  # why the last generation began: "created", "truncated", "rotated"
        self._max_read, self._max_line = max_read, max_line
        self._fh: IO[bytes] | None = None
        self._ino: tuple[int, int] | None = None
        self._pos = 0
        self._buf = b""

    def read_lines(self) -> list[str]:
        """What was appended since the last call, as complete lines (without the newline).
        Reads at most `max_read` bytes a call so that a huge backlog does not stall the caller."""
        return [p.decode("utf-8", "replace") for p in self.read_raw().split(b"\n")[:-1]]

    def read_raw(self, max_read: int | None = None) -> bytes:
        """Like read_lines, as bytes: complete lines, each ending with a newline (b"": none)."""
        if self._fh is None and not self._open("created"):
            return b""
        assert self._fh is not None
        data = self._fh.read(max_read or self._max_read)
        if data:
            self._pos += len(data)
            return self._split(data)
        if self._replaced():
            if self._buf:  # the old file's last, unterminated line: emit it before switching
                rest, self._buf = self._buf, b""
                return rest + b"\n"
            self._fh.close()
            self._fh = None
            self._open(self.reason)
        return b""

    def partial(self) -> str:
        """The unterminated last line, if any (for the tail shown on a timeout)."""
        return self._buf.decode("utf-8", "replace")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _open(self, reason: str) -> bool:
        try:
            # O_NONBLOCK: should the path be a FIFO, opening it must not wait for a writer (the
            # timeout could never fire); it is refused just below
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return False
        except IsADirectoryError:
            raise TriageError(f"{self.path}: is a directory, not a log file") from None
        except OSError as e:
            raise TriageError(f"{self.path}: cannot read ({e.strerror or e})") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise TriageError(not_a_file(self.path, st.st_mode))
        fh = os.fdopen(fd, "rb")
        self._fh, self._ino, self._pos, self._buf = fh, (st.st_dev, st.st_ino), 0, b""
        self.generation += 1
        self.reason = reason
        return True

    def _replaced(self) -> bool:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return False  # moved away and not yet recreated: keep the old one until a new one appears
        if (st.st_dev, st.st_ino) != self._ino:
            self.reason = "rotated"
            return True
        if st.st_size < self._pos:
            self.reason = "truncated"
            return True
        return False

    def _split(self, data: bytes) -> bytes:
        data = self._buf + data
        cut = data.rfind(b"\n") + 1
        self._buf = data[cut:]
        if len(self._buf) > self._max_line:  # no newline in a megabyte: not a text line, do not hoard it
            return data + b"\n"
        return data[:cut]


def not_a_file(path: str, mode: int) -> str:
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"
    return (f"{path}: is {kind}; watch follows a log file that stays on disk (to watch a stream, "
            "let triage start the server: triage run -- COMMAND)")


@dataclass
class Ready:
    line: int
    seconds: float


@dataclass
class Watcher:
    """Turns the lines of a followed log into phase changes, and says when a failure is due."""

    path: str
    catalogue_dirs: list[str] = field(default_factory=list)
    grace: float = 2.0
    clock: Callable[[], float] = time.monotonic
    catalogue: Catalogue | None = None  # loaded on the first failure when not given

    def __post_init__(self) -> None:
        self.follower = Follower(self.path)
        self.phases = PhaseTracker(self.clock)
        self.block = FailureBlock()
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self.started = self.clock()
        self.line_no = 0
        self._generation = 0
        self._last_line_at = self.started
        self._block_opened_at: float | None = None
        self._catalogue: Catalogue | None = self.catalogue

    def poll(self) -> tuple[list[PhaseChange | Ready], int]:
        """Read what is new; returns the events and how many lines were read."""
        data = self.follower.read_raw(CATCH_UP_READ)
        events: list[PhaseChange | Ready] = []
        if self.follower.generation != self._generation:
            if self._generation and self.follower.reason != "created":
                # a new file at the same path: numbers restart with it, the server's phase does not
                note(f"{self.path} was {self.follower.reason}; following the new file")
            self._generation = self.follower.generation
            self.line_no = 0
        n = data.count(b"\n")
        if len(data) >= CATCH_UP and not self.block.open:
            self._catch_up(data, events)
        else:
            for raw in data.split(b"\n")[:-1]:
                self._feed(raw.decode("utf-8", "replace"), events)
        if n:
            self._last_line_at = self.clock()
        return events, n

    def _feed(self, raw: str, events: list[PhaseChange | Ready]) -> None:
        self.line_no += 1
        ln = parse_line(self.line_no, raw)
        self.tail.append(ln.text)
        change = self.phases.feed(ln, raw)
        if change is not None:
            events.append(change)
            if change.phase == READY_PHASE:
                events.append(Ready(ln.no, self.clock() - self.started))
        was_open = self.block.open
        self.block.feed(ln)
        if self.block.open and not was_open:
            self._block_opened_at = self.clock()

    def _catch_up(self, data: bytes, events: list[PhaseChange | Ready]) -> None:
        """A backlog (a burst, or a long log when watching starts): only the lines that hold a
        phase milestone or a failure word are parsed, found by the scanner `analyze` uses;
        once a failure block opens, its lines are fed one by one until it closes, as always."""
        from triage.commands.phases import live_line_starts

        pos, end = 0, len(data)
        for start in live_line_starts(data):
            if start < pos:
                continue  # fed already, inside a failure block
            self.line_no += data.count(b"\n", pos, start)
            pos = start
            while pos < end:
                eol = data.find(b"\n", pos)
                self._feed(data[pos:eol].decode("utf-8", "replace"), events)
                pos = eol + 1
                if not self.block.open or self.block.closed:
                    break
        self.line_no += data.count(b"\n", pos)
        last = data[:-1].rsplit(b"\n", TAIL_LINES)[-TAIL_LINES:]
        first_no = self.line_no - len(last) + 1
        self.tail.extend(parse_line(first_no + i, raw.decode("utf-8", "replace")).text for i, raw in enumerate(last))

    def failure_due(self) -> bool:
        """A failure's lines are complete: its block closed, or the log went quiet for `grace`."""
        if not self.block.open:
            return False
        now = self.clock()
        return (self.block.closed or now - self._last_line_at >= self.grace
                or now - (self._block_opened_at or now) >= MAX_BLOCK_WAIT)

    def confirm(self) -> Report | None:
        """Run the pipeline on the file; the failure is real only if it finds one. Otherwise
        forget the block and keep watching."""
        report = self.report()
        if report is not None and report.exit_code == EXIT_FAILURE:
            return report
        self.block.reset()
        self._block_opened_at = None
        return None

    def report(self) -> Report | None:
        """The Report of the log as read so far (None until the file exists)."""
        from triage.pipeline.analyze import Options, analyze_file

        if not os.path.exists(self.path):
            return None
        if self._catalogue is None:
            from triage.catalogue.load import load_catalogue

            self._catalogue = load_catalogue(self.catalogue_dirs, cache=True)
        return analyze_file(self.path, self._catalogue, Options())

    def last_lines(self) -> list[str]:
        tail = list(self.tail)
        partial = clean(self.follower.partial())
        if partial:
            tail = (tail + [partial])[-TAIL_LINES:]
        return tail

    def drain(self, handle: Callable[[PhaseChange | Ready], None]) -> None:
        """Read everything already written (after the writer has stopped)."""
        while True:
            events, n = self.poll()
            for ev in events:
                handle(ev)
            if not n:
                return


def note(text: str) -> None:
    """One human status line on stderr, through the command's Output (redacted, filtered; none with -q)."""
    current().note(text)


class Printer:
    """What the operator sees (stderr) and what a script reads (stdout: report or JSON events)."""

    def __init__(self, fmt: str, clock: Callable[[], float] = time.monotonic, redact: bool = True,
                 redact_ips: bool = False, stream: IO[str] | None = None, stream_name: str | None = None) -> None:
        self.json = fmt == "json"
        self.stream_name = stream_name  # the -o file, for an error about writing it
        self.out = Output(redact=redact, ips=redact_ips)
        self.stream = stream  # None: stdout (looked up when written, so that it can be replaced)
        self.clock = clock
        self._last_progress = (0.0, "")
        self._last_heartbeat = clock()

    def write(self, text: str, markdown: bool = False) -> None:
        """Text made from data that already passed `self.out` (only the control filter is left)."""
        try:
            self.out.write(text, self.stream or sys.stdout, markdown=markdown)
        except BrokenPipeError:
            raise  # a reader that went away: the CLI's quiet exit
        except OSError as e:  # a full disk under -o (ENOSPC): one line, and `run` stops its server
            where = f"--output {self.stream_name}" if self.stream is not None else "stdout"
            raise TriageError(f"{where}: cannot write ({e.strerror or e})") from None

    def event(self, doc: dict, redacted: bool = False) -> None:
        """One JSON event line; `redacted`: made from data that already passed `self.out`."""
        self.write(json.dumps(doc if redacted else self.out.data(doc), ensure_ascii=True) + "\n")

    def phase(self, ch: PhaseChange, elapsed: float) -> None:
        self._last_heartbeat = self.clock()
        self.out.note(f"[{elapsed:6.1f}s] {ch.phase} (line {ch.line}; {ch.previous} took {ch.previous_seconds:.1f}s)")
        if self.json:
            self.event({"event": "phase", "phase": ch.phase, "line": ch.line, "elapsed": round(elapsed, 3)})

    def status(self, w: Watcher) -> None:
        """Progress within a phase, and a heartbeat during long ones (how a hang looks while it happens)."""
        now = self.clock()
        prog = w.phases.progress
        if prog and prog != self._last_progress[1] and now - self._last_progress[0] >= PROGRESS_EVERY:
            self._last_progress = (now, prog)
            self._last_heartbeat = now
            self.out.note(f"[{now - w.started:6.1f}s] {w.phases.phase}: {prog}")
        elif now - self._last_heartbeat >= HEARTBEAT:
            self._last_heartbeat = now
            self.out.note(f"[{now - w.started:6.1f}s] still {w.phases.phase} after {w.phases.seconds_in_phase():.0f}s "
                 f"(line {w.line_no})")

    def ready(self, r: Ready) -> None:
        if self.json:
            self.out.note(f"ready after {r.seconds:.1f}s (line {r.line})")
            self.event({"event": "ready", "seconds": round(r.seconds, 3), "line": r.line})
        else:
            self.write(f"ready after {r.seconds:.1f}s (line {r.line})\n")

    def failure(self, report: Report) -> None:
        from triage.render.json_out import report_dict
        from triage.render.markdown import render_markdown

        report = self.out.report(report)
        failure_note(report, self.out)
        if self.json:
            self.event({"event": "failure", **report_dict(report)}, redacted=True)
        else:
            self.write(render_markdown(report), markdown=True)

    def report(self, report: Report) -> None:
        """The report of a server that ended without a failure (Markdown only)."""
        from triage.render.markdown import render_markdown

        self.write(render_markdown(self.out.report(report)), markdown=True)

    def timeout(self, w: Watcher, seconds: float) -> None:
        phase, stuck = w.phases.phase, w.phases.seconds_in_phase()
        last = self.out.lines(w.last_lines())
        # a log that never appeared says nothing about a server: the path may be wrong
        appeared = w.follower.generation > 0
        if appeared:
            self.out.note(f"timed out after {seconds:g}s: stuck {phase} for {stuck:.1f}s (since line {w.phases.line})")
        else:
            self.out.note(f"timed out after {seconds:g}s: {w.path} never appeared")
        if self.json:
            self.event({"event": "timeout", "phase": phase, "seconds_in_phase": round(stuck, 3),
                        "since_line": w.phases.line, "line": w.line_no, "last_lines": last, "log_appeared": appeared})
            return
        body = "\n".join(last) if last else "(the log is empty)"
        if not appeared:
            verdict = (f"the log did not appear in {seconds:g}s: check the path, and that the server writes "
                       "its log there (this is not evidence of a hang).")
        elif phase == READY_PHASE:
            verdict = f"no failure in {seconds:g}s; the server has been ready for {stuck:.1f}s (since line {w.phases.line})."
        else:
            verdict = (f"no failure and not ready after {seconds:g}s; the server is stuck **{phase}** "
                       f"(for {stuck:.1f}s, since line {w.phases.line}). This is how a hang looks.")
        from triage.render.markdown import codeblock, inline

        tail = f"\n## Last {len(last)} lines\n\n{codeblock(body, 'text')}\n" if appeared else ""
        self.write(f"# Triage: {inline(self.out.text(w.path))} timed out\n\n**Verdict:** {verdict}\n{tail}", markdown=True)


def failure_note(report: Report, out: Output) -> None:
    """The "failure at line N: Exception: message" status line (from the redacted report)."""
    f = report.failures[0] if report.failures else None
    where = f" at line {f.line}: {f.exception}: {f.message}"[:200] if f else ""
    out.note(f"failure{where}")


@dataclass
class WatchOptions:
    timeout: float | None = None
    until: str = "ready"  # "ready": stop when ready; "exit": keep watching the running server
    fmt: str = "md"
    grace: float = 2.0
    catalogue_dirs: list[str] = field(default_factory=list)
    redact: bool = True
    redact_ips: bool = False
    output: str | None = None  # -o: the report (or the JSON events) go to this file, not stdout


def check_options(opts: WatchOptions) -> None:
    if opts.until not in ("ready", "exit"):
        raise TriageError(f"--until must be ready or exit (got {opts.until!r})")
    # nan compares false with everything: `nan <= 0` let it through, and a deadline of nan never came
    if opts.timeout is not None and not (math.isfinite(opts.timeout) and opts.timeout > 0):
        raise TriageError(f"--timeout must be a positive number of seconds (got {opts.timeout})")
    if not (math.isfinite(opts.grace) and opts.grace >= 0):
        raise TriageError(f"--grace must be a number of seconds, 0 or more (got {opts.grace})")


def watch_file(path: str, opts: WatchOptions, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> int:
    """Follow `path` until ready (0), failure (1, report printed) or timeout (3).

    `clock` and `sleep` are the loop's only contact with time, so that a caller (the tests) can
    drive it on a clock of its own: the timeout, grace and heartbeat all follow `clock`."""
    check_options(opts)
    if path == "-":
        raise TriageError("watch follows a file; for a pipe use: triage run -- COMMAND")
    if os.path.isdir(path):
        raise TriageError(f"{path}: is a directory, not a log file")
    if is_compressed(path):
        raise TriageError(f"{path}: a compressed log is finished, not being written; "
                          f"read it with: triage analyze {path}")
    with open_output(opts.output, path) as stream:
        out = Printer(opts.fmt, clock=clock, redact=opts.redact, redact_ips=opts.redact_ips, stream=stream,
                      stream_name=opts.output)
        return _watch(path, opts, out, clock, sleep)


def is_compressed(path: str) -> bool:
    """By name, or by its magic bytes (gzip, xz, bzip2, zstd, lz4, zip) when the file is already there."""
    from triage.pipeline.read import compression_of

    if path.endswith((".gz", ".gzip", ".xz", ".bz2", ".zst", ".lz4", ".zip")):
        return True
    if not os.path.isfile(path):  # a FIFO or device would block the read; they are refused later
        return False
    try:
        with open(path, "rb") as fh:
            return compression_of(fh.read(8)) is not None
    except OSError:
        return False


@contextmanager
def open_output(output: str | None, *inputs: str) -> Iterator[IO[str] | None]:
    """The -o file for a report that is written as it happens (events, then the report)."""
    if output is None:
        yield None
        return
    from pathlib import Path

    from triage.core.output import open_stream, refuse_inputs

    refuse_inputs(Path(output), list(inputs))  # by path and by identity (a hard link to the log)
    try:
        fh = open_stream(output, "w", encoding="utf-8")  # a symlink there is replaced, not followed
    except OSError as e:
        raise TriageError(f"--output {output}: cannot write ({e.strerror or e})") from None
    try:
        yield fh
    finally:
        # what is left in the buffer cannot be written either after a write error (the error
        # itself was said once); closing still releases the file
        with contextlib.suppress(OSError):
            fh.close()


def _watch(path: str, opts: WatchOptions, out: Printer, clock: Callable[[], float],
           sleep: Callable[[float], None]) -> int:
    w = Watcher(path, opts.catalogue_dirs, opts.grace, clock=clock)
    deadline = w.started + opts.timeout if opts.timeout else None
    if not os.path.exists(path):
        note(f"waiting for {path} to appear")
    try:
        while True:
            events, n = w.poll()
            for ev in events:
                if isinstance(ev, Ready):
                    out.ready(ev)
                    if opts.until == "ready":
                        return EXIT_OK
                else:
                    out.phase(ev, w.clock() - w.started)
            if w.failure_due():
                report = w.confirm()
                if report is not None:
                    out.failure(report)
                    return EXIT_FAILURE
            if deadline is not None and w.clock() >= deadline:
                out.timeout(w, opts.timeout or 0.0)
                return EXIT_TIMEOUT
            out.status(w)
            if not n:
                sleep(POLL_INTERVAL)
    finally:
        w.follower.close()
