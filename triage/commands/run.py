"""`triage run`: start the server, tee its output to the terminal and a log file, and watch that
log as `triage watch` does.

The server gets its own process group (a new session) so that the terminal's Ctrl-C reaches
triage only; triage passes SIGINT and SIGTERM on to the whole group, so that a server's worker
processes stop with it. Server output goes to stderr, not stdout: stdout carries the report
and the JSON events, which a script must be able to read unmixed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import IO, cast

from triage.commands.output import STDERR
from triage.commands.watch import (
    POLL_INTERVAL,
    Follower,
    Printer,
    Ready,
    Watcher,
    WatchOptions,
    check_options,
    note,
    open_output,
)
from triage.core.errors import EXIT_FAILURE, EXIT_TIMEOUT, TriageError
from triage.core.output import open_stream

STOP_WAIT = 10.0  # seconds a server gets to stop after SIGTERM before SIGKILL
EXIT_AFTER_FAILURE_WAIT = 5.0  # a crashed server usually exits within a second; wait this long for it
OUTPUT_WAIT = 2.0  # seconds to wait for the server's output to end once it is gone (a worker may hold the pipe)


def default_log_name() -> str:
    return f"triage-run-{datetime.now().strftime('%Y%m%d-%H%M%S')}.log"


class Tee(threading.Thread):
    """Copies the server's merged stdout+stderr to the log file and the terminal, as it comes.
    Flushes each chunk so that the watcher, which reads the file, sees it at once."""

    def __init__(self, source: IO[bytes], log: IO[bytes], terminal: IO[bytes], log_name: str) -> None:
        super().__init__(name="triage-tee", daemon=True)
        self.source, self.log, self.terminal, self.log_name = source, log, terminal, log_name
        # why the log cannot be written (a full disk): the supervisor stops the server on it,
        # since a crash it cannot log is a crash nobody will see
        self.error: str | None = None

    def run(self) -> None:
        fd = self.source.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            if self.error is None:
                try:
                    self.log.write(chunk)
                    self.log.flush()
                except (OSError, ValueError) as e:
                    # one line, from the supervisor; the pipe is still drained so that the
                    # server never blocks on it before it is stopped
                    self.error = f"--log {self.log_name}: cannot write ({getattr(e, 'strerror', None) or e})"
            with STDERR.lock, contextlib.suppress(OSError, ValueError):  # a closed terminal must not stop the log
                self.terminal.write(chunk)
                self.terminal.flush()
                STDERR.copied(chunk)


class Echo(threading.Thread):
    """For a server that writes its log file itself: copies the lines it appends to the terminal
    until stopped, then what is left."""

    def __init__(self, path: str, terminal: IO[bytes]) -> None:
        super().__init__(name="triage-echo", daemon=True)
        self.follower, self.terminal = Follower(path), terminal
        self._halt = threading.Event()

    def run(self) -> None:
        while True:
            stopping = self._halt.is_set()  # read before the last pass, so that the pass sees every line
            lines = self.follower.read_lines()
            if lines:
                with contextlib.suppress(OSError, ValueError):
                    self.terminal.write(b"".join(ln.encode("utf-8", "replace") + b"\n" for ln in lines))
                    self.terminal.flush()
            elif stopping:
                break
            else:
                self._halt.wait(POLL_INTERVAL)
        self.follower.close()

    def stop(self, timeout: float) -> None:
        self._halt.set()
        self.join(timeout)


class Server:
    """The spawned command: its own process group, signals forwarded to the whole group.

    `env` is set on top of triage's own environment. A `detached` server writes its log file
    itself instead of through a pipe to triage, so that it can keep running after triage exits
    (`run --retry --until ready`); its terminal copy then follows the file."""

    def __init__(self, command: list[str], log: IO[bytes], env: dict[str, str] | None = None,
                 detached: bool = False, log_name: str | None = None) -> None:
        # the log's path (a file opened by open_stream is named by its descriptor number)
        log_name = log_name or str(log.name)
        full_env = {**os.environ, **(env or {})}
        # Python servers block-buffer stdout into a pipe; the watcher needs lines as they happen
        full_env.setdefault("PYTHONUNBUFFERED", "1")
        stdout: IO[bytes] | int = log if detached else subprocess.PIPE
        try:
            self.proc = subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=full_env, stdin=subprocess.DEVNULL if detached else None)
        except FileNotFoundError:
            raise TriageError(f"{command[0]}: command not found") from None
        except PermissionError:
            raise TriageError(f"{command[0]}: permission denied") from None
        except OSError as e:
            raise TriageError(f"{command[0]}: cannot start ({e.strerror or e})") from None
        terminal = cast("IO[bytes]", getattr(sys.stderr, "buffer", sys.stderr))
        self.output: Tee | Echo
        if detached:
            self.output = Echo(log_name, terminal)
        else:
            assert self.proc.stdout is not None
            self.output = Tee(self.proc.stdout, log, terminal, log_name)
        self.output.start()
        self.forwarded: int | None = None  # the last signal passed on from the operator
        self.pgid = self.proc.pid  # start_new_session makes the child a group leader: its pid is the group id
        self._signals = 0
        self.killed = False  # triage sent the SIGKILL (a third signal, or the end of the grace period)
        self.stopped = False  # triage stopped the server itself (after its failure, on a timeout)

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def group_alive(self) -> bool:
        """Whether any process of the server's group is left (the server itself may be gone:
        a worker that ignores SIGTERM outlives it)."""
        self.proc.poll()  # reap the leader, so that its zombie does not count
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return _live_member(self.pgid)

    def forward(self, signum: int, _frame: FrameType | None = None) -> None:
        """Signal handler: pass the operator's SIGINT/SIGTERM on; the third one is a SIGKILL
        (a server stuck in a CUDA call can ignore the polite ones)."""
        self._signals += 1
        self.forwarded = signum
        if self._signals >= 3:
            note("third signal: killing the server")
            self.killed = True
            self.signal_group(signal.SIGKILL)
        else:
            note(f"passing {signal.Signals(signum).name} to the server")
            self.signal_group(signum)

    def wait(self, seconds: float) -> int | None:
        try:
            return self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> int:
        """SIGTERM the group, then SIGKILL what is left of it after STOP_WAIT: the whole group,
        even when the server itself exited at once and only a worker lingers."""
        self.stopped = True
        self.signal_group(signal.SIGTERM)
        self.reap_group()
        return self.proc.wait()

    def reap_group(self, wait: float | None = None) -> None:
        """Wait up to `wait` (default STOP_WAIT) seconds for the group to empty, then SIGKILL it."""
        deadline = time.monotonic() + (STOP_WAIT if wait is None else wait)
        while self.group_alive():
            if time.monotonic() >= deadline:
                self.killed = True
                self.signal_group(signal.SIGKILL)
                break
            time.sleep(0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(STOP_WAIT)

    def finish_output(self) -> None:
        # a daemon grandchild may hold the pipe open after the server is gone: do not wait for it forever
        if isinstance(self.output, Echo):
            self.output.stop(OUTPUT_WAIT)
        else:
            self.output.join(OUTPUT_WAIT)


def _live_member(pgid: int) -> bool:
    """Whether a process of group `pgid` is running, not a zombie: a worker whose parent (the
    server) is gone is reaped by PID 1, which in a container may never do it, and kill(0)
    counts a zombie; waiting for it cost every stop (and every relaunch) STOP_WAIT seconds.
    Without /proc (not Linux), any member counts."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue  # gone meanwhile
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def exit_status(rc: int, failed: bool, forwarded: int | None, killed: bool = False, stopped: bool = False) -> int:
    """The server's own status, as a shell reports it: N, or 128+N for a death by signal N (the
    OOM killer's SIGKILL: 137); 1 for a clean exit after a failure. When the operator stopped
    it, a death by that signal is 128+N; so is the SIGKILL triage sent after the operator's
    third signal (three Ctrl-C: 130). A server triage itself stopped (after its failure was
    confirmed) gives 1: the signal was triage's, the failure is the news."""
    if rc > 0:
        return rc
    if rc < 0:
        if forwarded is not None and (-rc == forwarded or (killed and -rc == signal.SIGKILL)):
            return 128 + forwarded
        if stopped:
            return EXIT_FAILURE
        return 128 - rc
    return EXIT_FAILURE if failed else 0


def signal_name(signum: int) -> str:
    try:
        return f"{signal.Signals(signum).name} (signal {signum})"
    except ValueError:
        return f"signal {signum}"


def run_command(command: list[str], log_path: str | None, opts: WatchOptions) -> int:
    check_options(opts)
    if not command:
        raise TriageError("no command to run (usage: triage run [OPTIONS] -- COMMAND ...)")
    path = log_path or default_log_name()
    if os.path.isdir(path):
        raise TriageError(f"--log {path}: is a directory")
    try:
        log = open_stream(path, "wb", buffering=0)  # lives as long as the server; never through a symlink
    except OSError as e:
        raise TriageError(f"--log {path}: cannot write ({e.strerror or e})") from None
    note(f"logging to {path}")
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    server: Server | None = None
    try:
        server = Server(command, log, log_name=path)
        for s in old:
            signal.signal(s, server.forward)
        with open_output(opts.output, path) as stream:
            printer = Printer(opts.fmt, redact=opts.redact, redact_ips=opts.redact_ips, stream=stream,
                              stream_name=opts.output)
            return _supervise(server, Watcher(path, opts.catalogue_dirs, opts.grace), printer, opts)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if server is not None:
            # never leave a server behind in its own session, nor a worker of it that outlived it
            if server.returncode is None:
                server.stop()
            elif server.group_alive():
                server.signal_group(signal.SIGTERM)
                server.reap_group()
            server.finish_output()
        log.close()


@dataclass
class Outcome:
    """How watching a server ended."""

    rc: int | None  # the server's raw status; None: still running (ready, and told to stop there)
    ready: bool = False
    timed_out: bool = False


def _supervise(server: Server, w: Watcher, out: Printer, opts: WatchOptions) -> int:
    outcome = supervise(server, w, out, opts)
    if outcome.timed_out:
        return EXIT_TIMEOUT
    assert outcome.rc is not None  # not told to stop at ready: the server is gone
    return _finish(server, w, out, outcome.rc)


def supervise(server: Server, w: Watcher, out: Printer, opts: WatchOptions, stop_at_ready: bool = False) -> Outcome:
    """Watch the server's log until it exits, fails, times out before ready, or (with
    `stop_at_ready`) becomes ready; the server is stopped on a failure or a timeout."""
    deadline = w.started + opts.timeout if opts.timeout else None
    ready = False

    def handle(ev: object) -> None:
        nonlocal ready
        if isinstance(ev, Ready):
            ready = True
            out.ready(ev)
        else:
            out.phase(ev, w.clock() - w.started)  # type: ignore[arg-type]

    try:
        while True:
            error = getattr(server.output, "error", None)
            if error is not None:
                note(f"{error}; stopping the server")
                server.stop()
                raise TriageError(f"{error}; the server was stopped")
            events, n = w.poll()
            for ev in events:
                handle(ev)
                if ready and stop_at_ready:
                    return Outcome(None, ready=True)
            rc = server.returncode
            if rc is not None:
                server.finish_output()
                w.drain(handle)
                return Outcome(rc, ready)
            if w.failure_due() and w.confirm() is not None:
                # let the server die of its failure so that its own status is reported
                if server.wait(EXIT_AFTER_FAILURE_WAIT) is None:
                    note("the server is still running after its failure; stopping it")
                    server.stop()
                server.finish_output()
                w.drain(handle)
                return Outcome(server.proc.wait(), ready)
            if not ready and deadline is not None and w.clock() >= deadline:
                out.timeout(w, opts.timeout or 0.0)
                note("stopping the server")
                return Outcome(server.stop(), timed_out=True)
            out.status(w)
            if not n:
                time.sleep(POLL_INTERVAL)
    finally:
        w.follower.close()


def _finish(server: Server, w: Watcher, out: Printer, rc: int) -> int:
    """The server is gone: the report of its whole log, and the exit status."""
    report = w.report()
    failed = report is not None and report.exit_code == EXIT_FAILURE
    code = exit_status(rc, failed, server.forwarded, server.killed, server.stopped)
    how = f"was killed by {signal_name(-rc)}" if rc < 0 else f"exited with status {rc}"
    note(f"the server {how}")
    # an operator who stopped a healthy server wants no report; any other end gets one
    if report is not None and (failed or server.forwarded is None):
        if failed:
            out.failure(report)
        elif not out.json and rc > 0 and report.lines == 0:
            # nothing to analyse: say so rather than "no failure found in 0 lines"
            out.write(f"# Triage: {w.path}\n\n**Verdict:** the server exited with status {rc} "
                      "before writing anything.\n", markdown=True)
        elif not out.json:
            if rc > 0:
                report.notes.insert(0, f"the server exited with status {rc}, but its log names no failure")
            elif rc < 0 and not server.stopped:
                # nothing in the log: the death itself is the news, never "no failure found"
                oom = " A SIGKILL nobody sent by hand is usually the kernel's OOM killer: see `dmesg`." \
                    if -rc == signal.SIGKILL else ""
                out.write(f"# Triage: {w.path}\n\n**Verdict:** the server was killed by {signal_name(-rc)} while "
                          f"{w.phases.phase}, after {w.line_no:,} {'line' if w.line_no == 1 else 'lines'}; its log names no failure.{oom}\n",
                          markdown=True)
                return code
            out.report(report)
    if out.json:
        out.event({"event": "exit", "status": rc, "exit_code": code, "line": w.line_no})
    return code
