"""`triage watch` and `triage run` against the fake server's scenarios (tests/fakeserver.py).

`watch` runs in this process on a clock of the test's own: each time the watcher sleeps, the
clock moves on by that much and the scripted server writes its next line. Timeouts, grace
periods and heartbeats are exact, nothing waits in real time, and the server never races the
watcher. `run` starts real processes and takes real signals, so its tests start `triage` too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import deque
from pathlib import Path

import pytest
from conftest import run_cli
from fakeserver import Pause, Rotate, script

from triage.commands.watch import HEARTBEAT, POLL_INTERVAL, Follower, WatchOptions, watch_file
from triage.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE

FAKE = str(Path(__file__).parent / "fakeserver.py")
TRIAGE = [sys.executable, "-m", "triage"]
PHASES = ["loading weights", "allocating KV cache", "capturing CUDA graphs", "warming up", "ready"]


class ScriptedServer:
    """A fakeserver scenario played on the watcher's clock: its lines come `delay` apart (as the
    real fake writes them), its pauses and its rotation at their time; when the watcher sleeps,
    the clock moves on and whatever fell due meanwhile is written at once. Lines due before the
    watcher starts are there when it starts (none, when the scenario begins with a pause)."""

    def __init__(self, scenario: str, log: Path, delay: float = 0.01) -> None:
        self.log = log
        self.now = 10_000.0  # like time.monotonic(): far from zero
        self.started = self.now
        self._due: deque[tuple[float, str | Rotate]] = deque()
        at = self.now
        for step in script(scenario):
            if isinstance(step, Pause):
                at += step.seconds
            elif isinstance(step, Rotate):
                self._due.append((at, step))
            else:
                for line in step:
                    self._due.append((at, line))
                    at += delay
        self._advance()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds
        self._advance()

    @property
    def elapsed(self) -> float:
        return self.now - self.started

    def _advance(self) -> None:
        while self._due and self._due[0][0] <= self.now:
            _, item = self._due.popleft()
            if isinstance(item, Rotate):
                self.log.rename(self.log.with_name(self.log.name + ".1"))
            else:
                with self.log.open("a", encoding="utf-8") as fh:
                    fh.write(item + "\n")


def watch(capsys: pytest.CaptureFixture[str], scenario: str, log: Path, *, fmt: str = "md", timeout: float = 15,
          until: str = "ready") -> tuple[int, str, str, ScriptedServer]:
    """(exit code, stdout, stderr, the server) of `triage watch LOG --grace 0.5` on the scenario."""
    server = ScriptedServer(scenario, log)
    capsys.readouterr()
    code = watch_file(str(log), WatchOptions(timeout=timeout, until=until, fmt=fmt, grace=0.5),
                      clock=server.clock, sleep=server.sleep)
    out, err = capsys.readouterr()
    return code, out, err, server


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_becomes_ready(tmp_path, capsys):
    code, out, err, server = watch(capsys, "ready", tmp_path / "server.log")
    assert code == EXIT_OK, err
    assert f"ready after {server.elapsed:.1f}s" in out
    for phase in PHASES:
        assert phase in err, phase


def test_ready_json_events(tmp_path, capsys):
    log = tmp_path / "server.log"
    code, out, err, server = watch(capsys, "ready", log, fmt="json")
    assert code == EXIT_OK, err
    evs = events(out)
    phases = [e for e in evs if e["event"] == "phase"]
    assert [e["phase"] for e in phases] == PHASES
    assert all(isinstance(e["line"], int) for e in phases)
    elapsed = [e["elapsed"] for e in phases]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0
    ready = evs[-1]
    assert ready["event"] == "ready" and ready["seconds"] == round(server.elapsed, 3)
    # SGLang's uvicorn "Application startup complete" is warm-up; "fired up" is ready
    assert "fired up" in log.read_text().splitlines()[ready["line"] - 1]


def test_crash_during_cuda_graph_capture(tmp_path, capsys):
    code, out, err, _ = watch(capsys, "capture-crash", tmp_path / "server.log")
    assert code == EXIT_FAILURE, err
    assert "Capture cuda graph failed" in out
    assert "capturing CUDA graphs" in out  # the report's phase at the crash
    assert "sglang-torch-compile-stream-capturing" in out or "## Failure 1" in out


def test_crash_under_load_after_ready_until_exit(tmp_path, capsys):
    code, out, err, _ = watch(capsys, "load-crash", tmp_path / "server.log", fmt="json", until="exit")
    assert code == EXIT_FAILURE, err
    evs = events(out)
    kinds = [e["event"] for e in evs]
    assert "ready" in kinds and kinds[-1] == "failure"
    failure = evs[-1]
    assert failure["failures"][0]["exception"] == "AttributeError"
    assert failure["findings"][0]["signature"] == "sglang-nsa-page-table-1-flattened"
    assert failure["failures"][0]["line"] > evs[kinds.index("ready")]["line"]


def test_hang_times_out_with_phase(tmp_path, capsys):
    log = tmp_path / "server.log"
    code, out, err, server = watch(capsys, "hang", log, timeout=2)
    assert code == EXIT_TIMEOUT, err
    assert 2 <= server.elapsed < 2 + POLL_INTERVAL + 1e-9  # at the timeout, to the poll
    assert "stuck **capturing CUDA graphs**" in out
    assert "Capture cuda graph begin" in out  # the last lines
    log.unlink()
    code, out, _, server = watch(capsys, "hang", log, fmt="json", timeout=1.5)
    ev = events(out)[-1]
    assert code == EXIT_TIMEOUT and ev["event"] == "timeout" and ev["phase"] == "capturing CUDA graphs"
    assert 0 < len(ev["last_lines"]) <= 20
    assert 1.5 <= server.elapsed < 1.5 + POLL_INTERVAL + 1e-9


class _Clock:
    """Time for a watch whose log nobody writes."""

    def __init__(self) -> None:
        self.now = 10_000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_a_log_that_never_appears_is_not_called_a_hang(tmp_path, capsys, fmt):
    for log, appeared in ((tmp_path / "wrong" / "path.log", False), (tmp_path / "empty.log", True)):
        if appeared:
            log.write_text("")
        t = _Clock()
        code = watch_file(str(log), WatchOptions(timeout=2, fmt=fmt), clock=t.clock, sleep=t.sleep)
        out, err = capsys.readouterr()
        assert code == EXIT_TIMEOUT
        if fmt == "json":
            assert events(out)[-1]["log_appeared"] is appeared
        elif appeared:
            assert "This is how a hang looks" in out and "never appeared" not in err
        else:
            assert "did not appear in 2s: check the path" in out and "hang looks" not in out
            assert f"{log} never appeared" in err


def test_heartbeat_while_stuck(tmp_path, capsys):
    """A hang as the operator sees it while it happens: a "still ..." line every HEARTBEAT seconds."""
    code, _, err, _ = watch(capsys, "hang", tmp_path / "server.log", timeout=2.5 * HEARTBEAT)
    assert code == EXIT_TIMEOUT
    beats = [ln for ln in err.splitlines() if " still capturing CUDA graphs after " in ln]
    assert len(beats) == 2, err


def test_log_rotated_mid_way(tmp_path, capsys):
    log = tmp_path / "server.log"
    code, out, err, _ = watch(capsys, "rotate", log, fmt="json")
    assert code == EXIT_OK, err
    assert f"{log} was rotated; following the new file" in err
    first = (tmp_path / "server.log.1").read_text()
    assert "Loading safetensors checkpoint shards:  55%" in first and "fired up" not in first
    ready = events(out)[-1]
    # line numbers restart with the new file and point into it
    assert "fired up" in log.read_text().splitlines()[ready["line"] - 1]
    assert [e["phase"] for e in events(out) if e["event"] == "phase"] == PHASES  # the phase survives the move


def test_log_created_late(tmp_path, capsys):
    log = tmp_path / "later" / "server.log"
    log.parent.mkdir()
    code, out, err, _ = watch(capsys, "late", log)
    assert code == EXIT_OK, err
    assert "waiting for" in err and "ready after" in out
    assert "was created" not in err  # a first appearance is not a rotation


def test_follower_truncation_and_partial_lines(tmp_path):
    log = tmp_path / "x.log"
    f = Follower(str(log))
    assert f.read_lines() == []  # not there yet
    log.write_text("one\ntw")
    assert f.read_lines() == ["one"] and f.partial() == "tw"
    with log.open("a") as fh:
        fh.write("o\nthree\n")
    assert f.read_lines() == ["two", "three"]
    log.write_text("new\n")  # truncated and rewritten (copytruncate)
    assert f.read_lines() == [] and f.reason == "truncated"
    assert f.read_lines() == ["new"]
    f.close()


def test_follower_reads_the_rest_of_a_rotated_file_first(tmp_path):
    """Lines written just before the move, even an unterminated last one, come before the new
    file's; the new file is read from its start."""
    log = tmp_path / "x.log"
    f = Follower(str(log))
    log.write_text("a\n")
    assert f.read_lines() == ["a"] and f.generation == 1
    with log.open("a") as fh:
        fh.write("b\nc")
    log.rename(tmp_path / "x.log.1")
    log.write_text("new 1\nnew 2\n")
    assert f.read_lines() == ["b"]
    assert f.read_lines() == ["c"]  # the old file's unterminated line, before the switch
    assert f.read_lines() == [] and f.reason == "rotated" and f.generation == 2
    assert f.read_lines() == ["new 1", "new 2"]
    f.close()


def _finished_log(tmp_path: Path, scenario: str) -> Path:
    log = tmp_path / f"{scenario}.log"
    log.write_text("".join(f"{ln}\n" for step in script(scenario) if isinstance(step, list) for ln in step))
    return log


def test_watch_command_on_a_finished_log(tmp_path):
    """The command line on the real clock: a log already complete needs no waiting."""
    p = run_cli("watch", str(_finished_log(tmp_path, "ready")), "--timeout", "30", "--format", "json")
    assert p.returncode == EXIT_OK, p.stderr
    assert events(p.stdout.decode())[-1]["event"] == "ready"
    p = run_cli("watch", str(_finished_log(tmp_path, "capture-crash")), "--timeout", "30", "--grace", "0")
    assert p.returncode == EXIT_FAILURE, p.stderr
    assert b"Capture cuda graph failed" in p.stdout


def test_usage_errors(tmp_path):
    for args, says in ((["watch", str(tmp_path)], "directory"),
                       (["watch", str(tmp_path / "x.log"), "--timeout", "-1"], "--timeout"),
                       (["watch", str(tmp_path / "x.log"), "--until", "forever"], "--until"),
                       (["watch", "-"], "triage run"),
                       (["run", "--log", str(tmp_path / "r.log"), "--", "/nonexistent/server"], "not found")):
        p = run_cli(*args)
        err = p.stderr.decode().splitlines()
        assert p.returncode == EXIT_USAGE and says in err[-1] and err[-1].startswith("triage: error: "), (args, err)
        assert len(err) == 1 or args[0] == "run" and err[0].startswith("triage: logging to"), err


# -- `run`: a real server process, real signals ---------------------------------------------------

posix_only = pytest.mark.skipif(sys.platform == "win32", reason="process groups and signals are POSIX")


def _start_run(tmp_path: Path, scenario: str, *opts: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "run.log"
    err = (tmp_path / "stderr.txt").open("w")  # a file, so that the server's teed output never blocks
    p = subprocess.Popen([*TRIAGE, "run", "--log", str(log), "--grace", "0.5", *opts, "--",
                          sys.executable, FAKE, scenario], stdout=subprocess.PIPE, stderr=err, text=True)
    err.close()
    return p, log


@posix_only
def test_run_passes_sigint_to_the_server(tmp_path):
    p, log = _start_run(tmp_path, "sigint", "--format", "json", "--timeout", "15")
    try:
        assert p.stdout is not None
        first = [json.loads(p.stdout.readline()) for _ in range(6)]  # five phases, then ready
        assert first[-1]["event"] == "ready"
        os.kill(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 42, (tmp_path / "stderr.txt").read_text()
    assert "Received SIGINT, shutting down gracefully." in log.read_text()
    assert events(out)[-1] == {"event": "exit", "status": 42, "exit_code": 42, "line": events(out)[-1]["line"]}
    # the server's output was teed to the terminal (stderr) as well as the log
    assert "fired up and ready to roll" in (tmp_path / "stderr.txt").read_text()


@posix_only
def test_run_crashing_server_exits_with_its_status(tmp_path):
    p, log = _start_run(tmp_path, "crash-exit", "--timeout", "15")
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 7, (tmp_path / "stderr.txt").read_text()
    assert "Capture cuda graph failed" in out and "## Failure 1" in out
    assert "Received sigquit" in log.read_text()
    assert "exited with status 7" in (tmp_path / "stderr.txt").read_text()
