"""`triage run --retry` against fake servers (tests/fakeserver.py) that die of real catalogued
failures unless their launch is changed, and the plan that decides the change."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fakeserver
import pytest

from triage.catalogue.load import load_catalogue
from triage.commands.retry.models import Launch
from triage.commands.retry.plan import Plan
from triage.core.errors import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from triage.pipeline.analyze import analyze_text

FAKE = str(Path(__file__).parent / "fakeserver.py")
TRIAGE = [sys.executable, "-m", "triage"]

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups and signals are POSIX")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_DETOKENIZER_MAX_STATES"}
    return {**env, "TRIAGE_NO_CACHE": "1", **extra}


def retry(tmp_path: Path, scenario: str, *opts: str, flags: tuple[str, ...] = (), timeout: float = 60) -> subprocess.CompletedProcess:
    cmd = [*TRIAGE, "run", "--log", str(tmp_path / "s.log"), "--grace", "0.5", "--timeout", "20", *opts, "--",
           sys.executable, FAKE, scenario, "--delay", "0.002", *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _reap(pid: int | None) -> None:
    """A server left running at ready (--until ready) is the test's to clean up: wait for the fake
    to finish, and stop its group if it has not."""
    if pid is None:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def test_adds_the_flag_and_the_second_attempt_holds(tmp_path):
    """NSA crash under load, until exit: the relaunch adds --disable-radix-cache and serves; the
    cost is measured from both logs."""
    p = retry(tmp_path, "nsa", "--retry", "2", "--until", "exit")
    assert p.returncode == EXIT_OK, p.stderr
    out = p.stdout
    assert "held on attempt 2 of 2" in out
    assert "sglang-nsa-page-table-1-flattened" in out and "adds --disable-radix-cache" in out
    assert "| prefix-cache hit rate | 75.0%" in out and "| 0.0% (0 of" in out  # before and after
    deploy = out.split("## Launch command for the deployment")[1]
    assert "nsa --delay 0.002 --disable-radix-cache" in deploy
    assert "relaunching as attempt 2 with sglang-disable-radix-cache" in p.stderr
    first, second = (tmp_path / "s.log").read_text(), (tmp_path / "s.log.1").read_text()
    assert "page_table_1_flattened" in first and "disable_radix_cache=False" in first
    assert "page_table_1_flattened" not in second and "disable_radix_cache=True" in second


def test_removes_the_flag_and_leaves_the_ready_server_running(tmp_path):
    """Capture crash with --enable-torch-compile; until ready (the default), JSON events."""
    p = retry(tmp_path, "compile", "--retry", "1", "--format", "json",
              flags=("--enable-torch-compile", "--api-key", "s3cr3t-value"))
    evs = events(p.stdout)
    summary = evs[-1]
    _reap(summary["attempts"][-1].get("pid"))
    assert p.returncode == EXIT_OK, p.stderr
    kinds = [(e["event"], e.get("attempt")) for e in evs]
    assert kinds[0] == ("attempt", 1) and ("failure", 1) in kinds and ("relaunch", 2) in kinds
    assert ("ready", 2) in kinds and kinds[-1][0] == "summary"
    change = next(e for e in evs if e["event"] == "relaunch")["change"]
    assert change["workaround"] == "sglang-remove-torch-compile" and change["remove"] == ["--enable-torch-compile"]
    assert change["signature"] == "sglang-torch-compile-stream-capturing"
    assert summary["held"] == 2 and summary["exit_code"] == 0
    assert [a["end"] for a in summary["attempts"]] == ["failed", "ready"]
    assert "--enable-torch-compile" in summary["attempts"][0]["command"]
    assert "--enable-torch-compile" not in summary["command"]
    assert "leaving the server running" in p.stderr
    # the commands in the events are redacted like a report: flag and value are judged together
    assert "s3cr3t-value" not in p.stdout and "--api-key [REDACTED]" in summary["command"]
    assert summary["attempts"][0]["launch"]["argv"][-1] == "[REDACTED]"


def test_sets_the_environment_variable(tmp_path):
    """The detokenizer dies under load unless SGLANG_DETOKENIZER_MAX_STATES is set."""
    p = retry(tmp_path, "detok", "--retry", "2", "--until", "exit")
    assert p.returncode == EXIT_OK, p.stderr
    assert "held on attempt 2 of 2" in p.stdout
    assert "sets SGLANG_DETOKENIZER_MAX_STATES=262144" in p.stdout
    deploy = p.stdout.split("## Launch command for the deployment")[1]
    assert "SGLANG_DETOKENIZER_MAX_STATES=262144 " in deploy
    assert "DetokenizerManager hit an exception" in (tmp_path / "s.log").read_text()
    assert "DetokenizerManager" not in (tmp_path / "s.log.1").read_text()


def test_keeps_crashing_until_retries_are_exhausted(tmp_path):
    p = retry(tmp_path, "capture-crash", "--retry", "1", flags=("--enable-torch-compile",))
    assert p.returncode == EXIT_FAILURE, p.stderr
    out = p.stdout
    assert "no attempt held" in out and "no relaunch is left (--retry 1)" in out
    assert "### Attempt 1: failed" in out and "### Attempt 2: failed" in out and "### Attempt 3" not in out
    assert "Launch command for the deployment" not in out
    # the next change is named, and each attempt's log is kept
    assert "the next change would have been sglang-disable-cuda-graph" in out
    for name in ("s.log", "s.log.1"):
        assert "operation not permitted when stream is capturing" in (tmp_path / name).read_text(), name
        assert f"`{tmp_path / name}`" in out
    assert not (tmp_path / "s.log.2").exists()


def test_unknown_failure_is_not_retried(tmp_path):
    p = retry(tmp_path, "unknown", "--retry", "3")
    assert p.returncode == EXIT_FAILURE, p.stderr
    assert "unknown failure: ValueError: shard 17 frobnication checksum mismatch" in p.stdout
    assert "### Attempt 2" not in p.stdout and not (tmp_path / "s.log.1").exists()
    assert "relaunching" not in p.stderr


def test_manual_workaround_is_not_applied(tmp_path):
    """A GPU off the bus: the only workaround is to drain the node, which triage never does."""
    p = retry(tmp_path, "gpu-lost", "--retry", "3")
    assert p.returncode == EXIT_FAILURE, p.stderr
    assert "cuda-gpu-fallen-off-bus" in p.stdout and "### Attempt 2" not in p.stdout
    todo = p.stdout.split("## To do by hand")[1]
    assert "common-drain-node-gpu-fault" in todo and "Cordon/drain the node" in todo
    assert "a step outside the launch command" in todo


def test_ctrl_c_stops_the_server_and_the_loop_and_prints_the_summary(tmp_path):
    err = (tmp_path / "stderr.txt").open("w")
    p = subprocess.Popen([*TRIAGE, "run", "--retry", "2", "--log", str(tmp_path / "s.log"), "--grace", "0.5", "--",
                          sys.executable, FAKE, "hang", "--delay", "0.002"],
                         stdout=subprocess.PIPE, stderr=err, text=True, env=_env())
    err.close()
    try:
        log = tmp_path / "s.log"
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and "Capture cuda graph begin" not in (log.read_text() if log.exists() else ""):
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, (tmp_path / "stderr.txt").read_text()
    assert "no attempt held" in out and "stopped by the operator during attempt 1" in out
    assert "### Attempt 1: stopped by the operator" in out and "failure:" not in out
    assert not (tmp_path / "s.log.1").exists()


def test_dry_run_prints_the_changes_in_order(tmp_path):
    log = tmp_path / "crash.log"
    with log.open("w") as fh:
        subprocess.run([sys.executable, FAKE, "capture-crash", "--delay", "0", "--enable-torch-compile"], stdout=fh,
                       timeout=20)
    p = subprocess.run([*TRIAGE, "run", "--retry", "3", "--dry-run", "--log", str(log)], capture_output=True,
                       text=True, timeout=60, env=_env())
    assert p.returncode == EXIT_OK, p.stderr
    out = p.stdout
    assert "rebuilt from the configuration the log printed" in out
    first, second = out.index("sglang-remove-torch-compile"), out.index("sglang-disable-cuda-graph")
    assert first < second and "instead of sglang-remove-torch-compile" in out
    assert "engine-hint-1" in out.split("## To do by hand")[1]
    p = subprocess.run([*TRIAGE, "run", "--retry", "1", "--dry-run", "--format", "json", "--log", str(log), "--",
                        "python", "-m", "sglang.launch_server", "--enable-torch-compile"],
                       capture_output=True, text=True, timeout=60, env=_env())
    plan = events(p.stdout)[-1]
    assert plan["event"] == "plan" and [s["change"]["workaround"] for s in plan["steps"]] == ["sglang-remove-torch-compile"]
    assert plan["steps"][0]["command"] == "python -m sglang.launch_server"


def test_usage_errors(tmp_path):
    for args, text in ((["--until", "exit"], "--retry"), (["--retry", "1", "--dry-run"], "--log"),
                       (["--retry", "0"], "--retry"), (["--retry", "1", "--until", "never"], "--until")):
        p = subprocess.run([*TRIAGE, "run", "--log", str(tmp_path / "x.log"), *args, "--", "true"] if "--dry-run" not in args
                           else [*TRIAGE, "run", *args, "--", "true"], capture_output=True, text=True, timeout=30)
        assert p.returncode == EXIT_USAGE and text in p.stderr and p.stderr.count("\n") == 1, (args, p.stderr)


# The plan alone, on reports of the fake servers' logs: no process is started.

def _report(*lines: str):  # noqa: ANN202
    return analyze_text("\n".join(lines) + "\n", load_catalogue(), name="fake.log")


def test_plan_skips_a_removal_that_changes_nothing():
    flags = ["--enable-torch-compile"]
    report = _report(fakeserver.server_args(flags), *fakeserver.HEAD, *fakeserver.KV, *fakeserver.CAPTURE,
                     *fakeserver.CAPTURE_CRASH)
    plan = Plan(Launch(argv=["python", "-m", "sglang.launch_server"]), load_catalogue(), {})
    d = plan.next(report)
    assert d.change is not None and d.change.workaround == "sglang-disable-cuda-graph"
    assert "changes nothing" in d.skipped[0].reason and d.skipped[0].workaround == "sglang-remove-torch-compile"


def test_plan_leaves_a_value_it_cannot_compute_and_an_operators_variable_alone():
    report = _report(fakeserver.server_args([]), *fakeserver.HEAD, *fakeserver.CAPTURE_END, *fakeserver.DETOK_CRASH)
    base = Launch(argv=["python", "-m", "sglang.launch_server"])
    d = Plan(base, load_catalogue(), {"SGLANG_DETOKENIZER_MAX_STATES": "131072"}).next(report)
    assert d.change is None
    reasons = {s.workaround: s.reason for s in d.skipped}
    assert "would replace SGLANG_DETOKENIZER_MAX_STATES=131072" in reasons["sglang-raise-detokenizer-max-states"]
    # --max-running-requests is halved from the running value, which this log does not print
    assert "computed from max_running_requests" in reasons["sglang-lower-max-running-requests"]
    plan = Plan(base, load_catalogue(), {})
    assert plan.next(report).change.env == {"SGLANG_DETOKENIZER_MAX_STATES": "262144"}
    again = plan.next(report)  # the same failure after its only automatic workaround
    assert again.change is None and "came back after sglang-raise-detokenizer-max-states" in again.reason


def test_plan_never_applies_a_workaround_marked_manual():
    report = _report(
        "OSError: You are trying to access a gated repo.",
        "Make sure to have access to it at https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct.",
        "401 Client Error. (Request ID: Root=1-695139c1-20c276683bbfa05022511a7b)",
        "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/resolve/main/config.json.",
    )
    d = Plan(Launch(argv=["vllm", "serve", "meta-llama/Llama-3.2-1B-Instruct"]), load_catalogue(), {}).next(report)
    assert d.finding is not None and d.finding.signature == "hub-gated-repo"
    assert d.change is None
    [hf] = d.skipped
    assert hf.workaround == "common-hf-token" and "auto: false" in hf.reason and hf.by_hand == "set HF_TOKEN=<your token>"
