"""`triage watch` and `triage run` against a fake server (tests/fakeserver.py) writing a log live."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from triage.commands.watch import Follower
from triage.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_TIMEOUT, EXIT_USAGE

FAKE = str(Path(__file__).parent / "fakeserver.py")
TRIAGE = [sys.executable, "-m", "triage"]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups and signals are POSIX")


def fake(scenario: str, log: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, FAKE, scenario] + (["--log", str(log)] if log else [])
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def watch(log: Path, *opts: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([*TRIAGE, "watch", str(log), "--grace", "0.5", *opts], capture_output=True,
                          text=True, timeout=timeout)


@contextlib.contextmanager
def server(scenario: str, log: Path):
    p = fake(scenario, log)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_becomes_ready(tmp_path):
    log = tmp_path / "server.log"
    with server("ready", log):
        p = watch(log, "--timeout", "15")
    assert p.returncode == EXIT_OK, p.stderr
    assert "ready after" in p.stdout
    for phase in ("loading weights", "allocating KV cache", "capturing CUDA graphs", "warming up", "ready"):
        assert phase in p.stderr, phase


def test_ready_json_events(tmp_path):
    log = tmp_path / "server.log"
    with server("ready", log):
        p = watch(log, "--timeout", "15", "--format", "json")
    assert p.returncode == EXIT_OK, p.stderr
    evs = events(p.stdout)
    phases = [e["phase"] for e in evs if e["event"] == "phase"]
    assert phases == ["loading weights", "allocating KV cache", "capturing CUDA graphs", "warming up", "ready"]
    assert all(isinstance(e["line"], int) and e["elapsed"] >= 0 for e in evs if e["event"] == "phase")
    ready = evs[-1]
    assert ready["event"] == "ready" and ready["seconds"] >= 0
    # SGLang's uvicorn "Application startup complete" is warm-up; "fired up" is ready
    assert "fired up" in log.read_text().splitlines()[ready["line"] - 1]


def test_crash_during_cuda_graph_capture(tmp_path):
    log = tmp_path / "server.log"
    with server("capture-crash", log):
        p = watch(log, "--timeout", "15")
    assert p.returncode == EXIT_FAILURE, p.stderr
    assert "Capture cuda graph failed" in p.stdout
    assert "capturing CUDA graphs" in p.stdout  # the report's phase at the crash
    assert "sglang-torch-compile-stream-capturing" in p.stdout or "## Failure 1" in p.stdout


def test_crash_under_load_after_ready_until_exit(tmp_path):
    log = tmp_path / "server.log"
    with server("load-crash", log):
        p = watch(log, "--timeout", "15", "--until", "exit", "--format", "json")
    assert p.returncode == EXIT_FAILURE, p.stderr
    evs = events(p.stdout)
    kinds = [e["event"] for e in evs]
    assert "ready" in kinds and kinds[-1] == "failure"
    failure = evs[-1]
    assert failure["failures"][0]["exception"] == "AttributeError"
    assert failure["findings"][0]["signature"] == "sglang-nsa-page-table-1-flattened"
    assert failure["failures"][0]["line"] > evs[kinds.index("ready")]["line"]


def test_hang_times_out_with_phase(tmp_path):
    log = tmp_path / "server.log"
    with server("hang", log):
        t0 = time.monotonic()
        p = watch(log, "--timeout", "2")
        took = time.monotonic() - t0
    assert p.returncode == EXIT_TIMEOUT, p.stderr
    assert took < 10
    assert "stuck **capturing CUDA graphs**" in p.stdout
    assert "Capture cuda graph begin" in p.stdout  # the last lines
    with server("hang", log):
        p = watch(log, "--timeout", "1.5", "--format", "json")
    ev = events(p.stdout)[-1]
    assert ev["event"] == "timeout" and ev["phase"] == "capturing CUDA graphs"
    assert 0 < len(ev["last_lines"]) <= 20


def test_log_rotated_mid_way(tmp_path):
    log = tmp_path / "server.log"
    with server("rotate", log):
        p = watch(log, "--timeout", "15", "--format", "json")
    assert p.returncode == EXIT_OK, p.stderr
    assert "rotated" in p.stderr
    assert (tmp_path / "server.log.1").exists()
    ready = events(p.stdout)[-1]
    # line numbers restart with the new file and point into it
    assert "fired up" in log.read_text().splitlines()[ready["line"] - 1]


def test_log_created_late(tmp_path):
    log = tmp_path / "later" / "server.log"
    log.parent.mkdir()
    with server("late", log):
        p = watch(log, "--timeout", "15")
    assert p.returncode == EXIT_OK, p.stderr
    assert "waiting for" in p.stderr and "ready after" in p.stdout


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


def test_usage_errors(tmp_path):
    p = watch(tmp_path)
    assert p.returncode == EXIT_USAGE and p.stderr.count("\n") == 1 and "directory" in p.stderr
    p = watch(tmp_path / "x.log", "--timeout", "-1")
    assert p.returncode == EXIT_USAGE and "--timeout" in p.stderr
    p = watch(tmp_path / "x.log", "--until", "forever")
    assert p.returncode == EXIT_USAGE and "--until" in p.stderr
    p = subprocess.run([*TRIAGE, "run", "--log", str(tmp_path / "r.log"), "--", "/nonexistent/server"],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == EXIT_USAGE and "not found" in p.stderr


def _start_run(tmp_path: Path, scenario: str, *opts: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "run.log"
    err = (tmp_path / "stderr.txt").open("w")  # a file, so that the server's teed output never blocks
    p = subprocess.Popen([*TRIAGE, "run", "--log", str(log), "--grace", "0.5", *opts, "--",
                          sys.executable, FAKE, scenario], stdout=subprocess.PIPE, stderr=err, text=True)
    err.close()
    return p, log


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


def test_run_crashing_server_exits_with_its_status(tmp_path):
    p, log = _start_run(tmp_path, "crash-exit", "--timeout", "15")
    out, _ = p.communicate(timeout=20)
    assert p.returncode == 7, (tmp_path / "stderr.txt").read_text()
    assert "Capture cuda graph failed" in out and "## Failure 1" in out
    assert "Received sigquit" in log.read_text()
    assert "exited with status 7" in (tmp_path / "stderr.txt").read_text()
