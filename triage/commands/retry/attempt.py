"""One attempt of `run --retry`: start the server as `run` does, watch it, and record how it ended."""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType
from typing import TYPE_CHECKING

from triage.commands.run import Server, exit_status, signal_name, supervise
from triage.commands.watch import Printer, Ready, Watcher, WatchOptions, failure_note, note
from triage.core.errors import EXIT_FAILURE, EXIT_TIMEOUT, TriageError
from triage.core.output import open_stream

if TYPE_CHECKING:
    from triage.catalogue.load import Catalogue
    from triage.commands.retry.models import AttemptRecord
    from triage.core.models import Report


class AttemptPrinter(Printer):
    """JSON events carry the attempt's number. In Markdown, stdout is kept for the final summary:
    an attempt's ready, failure and timeout are status lines on stderr, and its full report is
    one `triage analyze` of its log away."""

    attempt = 0
    ready_seconds: float | None = None  # wall-clock seconds from this attempt's start to ready

    def event(self, doc: dict, redacted: bool = False) -> None:
        super().event({"event": doc.get("event"), "attempt": self.attempt, **doc}, redacted)

    def ready(self, r: Ready) -> None:
        self.ready_seconds = r.seconds
        if self.json:
            super().ready(r)
        else:
            note(f"ready after {r.seconds:.1f}s (line {r.line})")

    def failure(self, report: Report) -> None:
        if self.json:
            super().failure(report)
        else:
            failure_note(self.out.report(report), self.out)

    def timeout(self, w: Watcher, seconds: float) -> None:
        if self.json:
            super().timeout(w, seconds)
        else:
            note(f"timed out after {seconds:g}s: stuck {w.phases.phase} for {w.phases.seconds_in_phase():.1f}s "
                 f"(since line {w.phases.line})")


class Interrupts:
    """The operator's SIGINT and SIGTERM for the whole loop: passed on to the server of the
    attempt under way (a third one kills it), and remembered so that no further attempt starts."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.server: Server | None = None
        self._old: dict[int, object] = {}

    def __enter__(self) -> Interrupts:
        for s in (signal.SIGINT, signal.SIGTERM):
            self._old[s] = signal.getsignal(s)
            signal.signal(s, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signum = signum
        if self.server is not None:
            self.server.forward(signum, frame)
        else:
            note(f"{signal.Signals(signum).name}: no further attempt will start")


def run_attempt(rec: AttemptRecord, opts: WatchOptions, out: AttemptPrinter, guard: Interrupts,
                cat: Catalogue) -> Report | None:
    """Start the attempt's launch, watch it, fill in `rec`; the report of its log.

    With `--until ready` the server is detached and left running once ready; in every other
    case it is gone when this returns."""
    out.attempt, out.ready_seconds = rec.number, None
    stop_at_ready = opts.until == "ready"
    if os.path.isdir(rec.log):
        raise TriageError(f"--log {rec.log}: is a directory")
    try:
        log = open_stream(rec.log, "wb", buffering=0)  # lives as long as the server; never through a symlink
    except OSError as e:
        raise TriageError(f"--log {rec.log}: cannot write ({e.strerror or e})") from None
    server: Server | None = None
    try:
        server = Server(rec.launch.argv, log, env=rec.launch.env, detached=stop_at_ready, log_name=rec.log)
        rec.pid = server.proc.pid
        guard.server = server
        if guard.signum is not None:  # the operator's signal came while the server was starting
            server.forward(guard.signum)
        w = Watcher(rec.log, opts.catalogue_dirs, opts.grace, catalogue=cat)
        outcome = supervise(server, w, out, opts, stop_at_ready=stop_at_ready)
        report = w.report()
        rec.ready_seconds = round(out.ready_seconds, 3) if out.ready_seconds is not None else None
        if outcome.rc is None:
            rec.end, rec.exit_code = "ready", 0
            note(f"attempt {rec.number} is ready; leaving the server running (process group {server.proc.pid}), "
                 f"its output goes on to {rec.log}")
            return report
        rec.status = outcome.rc
        failed = report is not None and report.exit_code == EXIT_FAILURE
        rec.exit_code = EXIT_TIMEOUT if outcome.timed_out else exit_status(outcome.rc, failed, server.forwarded, server.killed, server.stopped)
        if outcome.timed_out:
            rec.end = "timeout"
        elif server.forwarded is not None:
            # what a server prints while the operator stops it (a KeyboardInterrupt traceback) is no failure
            rec.end = "served" if outcome.ready else "interrupted"
        elif failed:
            rec.end = "failed"
        else:
            rec.end = "served" if outcome.ready and outcome.rc == 0 else "exited"
        if rec.end == "failed" and report is not None:
            out.failure(report)
            _record_failure(rec, report)
        how = f"was killed by {signal_name(-outcome.rc)}" if outcome.rc < 0 else f"exited with status {outcome.rc}"
        note(f"attempt {rec.number}: the server {how}")
        if out.json:
            out.event({"event": "exit", "status": outcome.rc, "exit_code": rec.exit_code, "line": w.line_no})
        return report
    finally:
        guard.server = None
        if server is not None and rec.end != "ready":
            # never leave a server behind that is not meant to stay, nor a worker of it that
            # outlived it: the next attempt would find its GPUs and ports still taken
            if server.returncode is None:
                server.stop()
            elif server.group_alive():
                server.signal_group(signal.SIGTERM)
                server.reap_group()
        if server is not None:
            server.finish_output()
        log.close()
        sys.stderr.flush()


def _record_failure(rec: AttemptRecord, report: Report) -> None:
    f = report.failures[0] if report.failures else None
    if f is not None:
        rec.failure = f"{f.exception}: {f.message}"[:200] + f" (line {f.line})"
        rec.fingerprint = f.fingerprint
    top = report.findings[0] if report.findings else None
    if top is not None and top.failure is not None:
        rec.signature, rec.finding = top.signature, top.title
