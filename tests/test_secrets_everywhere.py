"""One generated log with a secret of every kind (every rule of triage/pipeline/secret_rules.py) in every
position - the launch line, a config dict, traceback locals, the exception message, a token
hard-wrapped across lines - checked in every output: `analyze` Markdown and JSON (stdout and
-o), the `triage new` skeleton, `watch` and `run` reports and JSON events with their stderr
lines ("failure at ..."), and the last lines shown on a watch timeout.

With --no-redact the same secrets do reach the report, so each check is a real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from triage.pipeline.secret_rules import RULES

EXAMPLES = [r.example.format(s=r.secret) for r in RULES]
WRAPPED = [r.secret for r in RULES if r.wrap is not None]


def wrapped_chain(tokens: list[str]) -> list[str]:
    """Each token cut in two by a hard wrap: line i ends with the first half of token i and the
    next line starts with its second half."""
    lines = ["  while authenticating with"]
    for t in tokens:
        h = len(t) // 2
        lines[-1] += f" {t[:h]}"
        lines.append(f"    {t[h:]} and")  # a wrapper that indents what it wraps
    lines[-1] += " nothing else"
    return lines


def secret_log() -> str:
    joined = ", ".join(EXAMPLES)
    # a set literal in the launch settings (parsed into a Python set, which the redaction walk
    # skipped: every secret reached the JSON report) and a config dumped as JSON inside a JSON
    # string (`\"private_key_id\": \"...\"`: the quoted-name rules expected bare quotes)
    env_set = "{" + ", ".join(repr(e) for e in EXAMPLES) + "}"
    double_json = json.dumps(json.dumps({f"k{i}": e for i, e in enumerate(EXAMPLES)}))
    lines = [
        f"[2025-01-01 00:00:00] server_args=ServerArgs(model_path='org/model', tokenizer_path='org/model', tp_size=1, {joined}, env={env_set})",
        "[2025-01-01 00:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process',
        "    scheduler.event_loop()",
        '  File "/sgl/sglang/srt/net/client.py", line 3, in connect',
        "    session.connect(config={" + ", ".join(f"'k{i}': {e!r}" for i, e in enumerate(EXAMPLES)) + "})",
        f"    locals: self=<Client>, {joined}",
        f"    credentials_json = {double_json}",
        "RuntimeError: CUDA error: an illegal memory access was encountered while " + " ; ".join(EXAMPLES),
        *wrapped_chain(WRAPPED),
    ]
    return "\n".join(lines) + "\n"


COMMAND = "python -m sglang.launch_server --model-path org/model " + " ".join(EXAMPLES)


def pieces(secret: str) -> list[str]:
    """What must not appear: the secret, and both halves of a wrapped one."""
    h = len(secret) // 2
    return [secret, secret[:h], secret[h:]] if secret in WRAPPED else [secret]


def leaks(text: str) -> list[str]:
    found = []
    for r in RULES:
        for p in pieces(r.secret):
            if p in text or json.dumps(p)[1:-1] in text:
                found.append(f"{r.id}: {p[:16]}...")
    return found


def triage(*args: str, ok: tuple[int, ...] = (1,)) -> subprocess.CompletedProcess:
    """`triage ARGS` in this process (conftest.run_cli: the entry point's error handling, bytes
    through pipes' encodings), its output as text."""
    p = run_cli(*args, env={"TRIAGE_NO_CACHE": "1", "TRIAGE_DEBUG": ""})
    p = subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(), p.stderr.decode())
    assert "Traceback (most recent" not in p.stderr.replace("Scheduler hit an exception: Traceback (most recent", "")
    assert p.returncode in ok, (p.returncode, p.stderr[-2000:])
    return p


def own_stderr(p: subprocess.CompletedProcess) -> str:
    """triage's own stderr lines (`run` also copies the server's output there, unchanged)."""
    return "\n".join(x for x in p.stderr.splitlines() if x.startswith("triage:"))


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("everywhere") / "server.log"
    path.write_text(secret_log())
    return path


def test_the_secrets_reach_the_report_when_kept(log):
    """Every kind in every position is in the unredacted report: the checks below are real."""
    d = json.loads(triage("analyze", str(log), "-f", "json", "--no-redact", "--command", COMMAND).stdout)
    failure = next(f for f in d["failures"] if f["exception"] == "RuntimeError")
    raw = "\n".join(e["text"] for e in failure["raw"])
    env = json.dumps(d["environment"]) + (d.get("patched_command") or "")
    for r, example in zip(RULES, EXAMPLES, strict=True):
        assert r.secret in failure["message"], (r.id, "exception message")
        assert f"{example!r}" in raw, (r.id, "config dict")
        assert "locals: self=<Client>, " in raw and example in raw, (r.id, "traceback locals")
        assert r.secret in env or json.dumps(r.secret)[1:-1] in env, (r.id, "launch command")
    for t in WRAPPED:
        assert t[len(t) // 2:] + " and" in raw, "wrapped line"
    settings_env = d["environment"]["settings"]["env"]
    assert sorted(settings_env) == sorted(EXAMPLES), "the set literal is parsed as the set it is"
    assert "credentials_json = " + json.dumps(json.dumps({f"k{i}": e for i, e in enumerate(EXAMPLES)})) in raw


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_analyze(log, tmp_path, fmt):
    p = triage("analyze", str(log), "-f", fmt, "--command", COMMAND)
    assert not leaks(p.stdout) and not leaks(p.stderr)
    assert "[REDACTED]" in p.stdout
    out = tmp_path / f"report.{fmt}"
    triage("analyze", str(log), "-f", fmt, "--command", COMMAND, "-o", str(out))
    assert not leaks(out.read_text())


def test_new_skeleton(log, tmp_path):
    p = triage("new", str(log), "--failure", "1", ok=(0,))
    assert not leaks(p.stdout) and not leaks(p.stderr)
    assert "[REDACTED]" in p.stdout
    out = tmp_path / "entry.yaml"
    triage("new", str(log), "--failure", "1", "-o", str(out), ok=(0,))
    assert not leaks(out.read_text())


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_watch_report_events_and_failure_line(log, fmt):
    p = triage("watch", str(log), "--grace", "0.3", "--timeout", "60", "-f", fmt)
    assert "failure at line" in p.stderr
    assert not leaks(p.stdout) and not leaks(p.stderr)
    if fmt == "json":
        assert any(json.loads(x)["event"] == "failure" for x in p.stdout.splitlines())


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_run_report_events_and_failure_line(log, tmp_path, fmt):
    server = f"import sys; sys.stdout.write(open({str(log)!r}).read()); sys.stdout.flush(); sys.exit(1)"
    p = triage("run", "--log", str(tmp_path / "run.log"), "--grace", "0.3", "--timeout", "60", "-f", fmt, "--",
               sys.executable, "-c", server)
    assert "failure at line" in own_stderr(p)
    assert not leaks(p.stdout) and not leaks(own_stderr(p))


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_watch_timeout_last_lines(tmp_path, fmt):
    """No failure: the last lines shown on a timeout carry every kind, wrapped tokens included."""
    log = tmp_path / "quiet.log"
    third = len(EXAMPLES) // 3 + 1
    chunks = [EXAMPLES[i:i + third] for i in range(0, len(EXAMPLES), third)]
    log.write_text("".join(f"[2025-01-01 00:00:00] starting with {' '.join(c)}\n" for c in chunks)
                   + "\n".join(wrapped_chain(WRAPPED)) + "\n")
    p = triage("watch", str(log), "--timeout", "1", "-f", fmt, ok=(3,))
    assert not leaks(p.stdout) and not leaks(p.stderr)
    assert "[REDACTED]" in p.stdout
    kept = triage("watch", str(log), "--timeout", "1", "-f", fmt, "--no-redact", ok=(3,))
    assert leaks(kept.stdout)
