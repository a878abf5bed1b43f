"""One generated log with a secret of every kind in every position - the launch line, a config
dict, traceback locals, the exception message, a token hard-wrapped across lines - checked in
every output: `analyze` Markdown and JSON (stdout and -o), the patched launch command, the
`triage new` skeleton, `watch` and `run` reports and JSON events with their stderr lines
("failure at ..."), `run --retry`'s attempts, plan and summary, the `fleet` board, and the last
lines shown on a watch timeout.

The kinds: every rule of triage's own in triage/pipeline/secret_rules.py (gitleaks' rules,
221 of them, each masks its own example in tests/test_secret_rules.py), and the 18 kinds issue
35 found in every output (KINDS_OF_ISSUE_35), some of them held by a gitleaks rule or one of
triage's generic rules rather than a rule of their own.

With --no-redact the same secrets do reach the report, so each check is a real one.
"""

from __future__ import annotations

import html
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from triage.pipeline.secret_rules import RULES

OWN = [r for r in RULES if r.group is None]  # triage's own rules; gitleaks' follow them in RULES
_S = "Zq8xV2pL9mW4rT7yB3nKc5Jd"  # a made-up body, nobody's credential
# issue 35: (kind, the line a log prints, the secret in it); these reached every output
KINDS_OF_ISSUE_35 = [
    ("google-oauth-token", "creds.token=ya29.a0AfH6SMB{s}", _S + _S),
    ("google-oauth-client-secret", "client_secret={s}", "GOCSPX-" + _S + "abcd"),
    ("azure-ad-client-secret", "AZURE_CLIENT_SECRET {s}", "abc8Q~" + _S + "x9K2mL4pQ7"),
    ("stripe-webhook-secret", "endpoint secret {s}", "whsec_" + _S + _S[:8]),
    ("sendgrid", "SENDGRID {s}", "SG." + _S[:22] + "." + _S + _S[:19]),
    ("npm", "//registry.npmjs.org/:_authToken={s}", "npm_" + _S + _S[:12]),
    ("pypi", "password = {s}", "pypi-AgEIcHlwaS5vcmc" + _S + _S + _S),
    ("dockerhub", "docker login -p {s}", "dckr_pat_" + _S + "xyz"),
    ("xai", "XAI key {s}", "xai-" + _S + _S + _S + "12345678"),
    ("langsmith", "tracing with {s}", "lsv2_pt_0123456789abcdef0123456789abcdef_0123456789"),
    ("telegram-bot", "bot url https://api.telegram.org/bot{s}/getMe", "1234567890:AA" + _S + "abcdefghi"),
    ("discord-webhook", "alerts to https://discord.com/api/webhooks/123456789012345678/{s}", _S + _S + "x-y_z"),
    ("DB_PASS=", "DB_PASS={s}", "dbpass-Rq7-41x"),
    ("SSH_PASSPHRASE=", "SSH_PASSPHRASE={s}", "ssh-phrase-Kx2"),
    ('"MYSQL_PWD"', '{{"MYSQL_PWD": "{s}"}}', "mysqlpw-Zz9q"),
    ('kaggle "key"', '{{"username": "kaggler", "key": "{s}"}}', "9f8e7d6c5b4a39281706f5e4d3c2b1a0"),
    ("curl -u user:pass", "+ curl -sf -u admin:{s} https://registry.internal/v2/", "curlpw-83jd"),
    ("--api-key in a Python list", "argv=['python', '-m', 'sglang.launch_server', '--api-key', '{s}', '--tp', '8']",
     "listed-key-4471"),
]
PLANTED = [(r.id, r.example.format(s=r.secret), r.secret) for r in OWN] + [
    (f"issue 35: {kind}", line.format(s=secret), secret) for kind, line, secret in KINDS_OF_ISSUE_35]
EXAMPLES = [example for _, example, _ in PLANTED]
SECRETS = [secret for _, _, secret in PLANTED]
WRAPPED = [r.secret for r in OWN if r.wrap is not None]
# a value holding a quote: shlex prints it back as 'ab'"'"'...' (the tail leaked)
QUOTED = "ab'quotedTAIL-9k2"


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


# an example the shell would take apart (quotes, JSON) is one quoted word of the command, as a
# launch script would write it; the flag forms (`--api-key KEY`) stay words of their own
COMMAND = ("python -m sglang.launch_server --model-path org/model "
           + " ".join(e if shlex.split(e) == e.split() else shlex.quote(e) for e in EXAMPLES)
           + " --api-key " + shlex.quote(QUOTED))


def test_the_kinds_of_issue_35_are_all_planted():
    """36 kinds before the issue, its 18, and triage's own rules added for them."""
    assert len(KINDS_OF_ISSUE_35) == 18 and len({kind for kind, _, _ in PLANTED}) == len(PLANTED) >= 54


def pieces(secret: str) -> list[str]:
    """What must not appear: the secret, and both halves of a wrapped one."""
    h = len(secret) // 2
    return [secret, secret[:h], secret[h:]] if secret in WRAPPED else [secret]


def leaks(text: str) -> list[str]:
    found = []
    shown = html.unescape(text)  # the HTML report escapes `&`, `<` and quotes: a secret is read as a browser shows it
    for kind, _, secret in [*PLANTED, ("quoted --api-key", "", "quotedTAIL-9k2")]:
        for p in pieces(secret):
            if p in text or p in shown or json.dumps(p)[1:-1] in text:
                found.append(f"{kind}: {p[:16]}...")
    return found


def triage(*args: str, ok: tuple[int, ...] = (1,)) -> subprocess.CompletedProcess:
    """`triage ARGS` in this process (conftest.run_cli: the entry point's error handling, bytes
    through pipes' encodings), its output as text."""
    p = run_cli(*args, env={"TRIAGE_DEBUG": ""})  # the run's catalogue cache: conftest.pytest_configure
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
    for kind, example, secret in PLANTED:
        assert secret in failure["message"], (kind, "exception message")
        assert f"{example!r}" in raw, (kind, "config dict")
        assert "locals: self=<Client>, " in raw and example in raw, (kind, "traceback locals")
        assert secret in env or json.dumps(secret)[1:-1] in env, (kind, "launch command")
    for t in WRAPPED:
        assert t[len(t) // 2:] + " and" in raw, "wrapped line"
    settings_env = d["environment"]["settings"]["env"]
    assert sorted(settings_env) == sorted(EXAMPLES), "the set literal is parsed as the set it is"
    assert "credentials_json = " + json.dumps(json.dumps({f"k{i}": e for i, e in enumerate(EXAMPLES)})) in raw


@pytest.mark.parametrize("fmt", ["md", "json", "issue", "html"])
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
    p = triage("watch", str(log), "--grace", "0.1", "--timeout", "60", "-f", fmt)
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
    # the timeout is checked after each read, so the lines are all read first, however short it
    # is: 0.01 s, not 0.2 s of polling (or 1 s of sleeping) per call
    p = triage("watch", str(log), "--timeout", "0.01", "-f", fmt, ok=(3,))
    assert not leaks(p.stdout) and not leaks(p.stderr)
    assert "[REDACTED]" in p.stdout
    kept = triage("watch", str(log), "--timeout", "0.01", "-f", fmt, "--no-redact", ok=(3,))
    assert leaks(kept.stdout)


FAKE = str(Path(__file__).parent / "fakeserver.py")
# the secrets as a server's own flags: a relaunch prints them back in its commands
SECRET_FLAGS = ["--api-key", QUOTED, "--hf-token", next(r.secret for r in OWN if r.id == "huggingface-token"),
                "--ssl-keyfile-password", "kw-pass-771x"]


@pytest.fixture(scope="module")
def nsa_log(tmp_path_factory) -> Path:
    """A crash that has a catalogued flag workaround, so there is a patched command and a relaunch."""
    log = tmp_path_factory.mktemp("nsa") / "crash.log"
    with log.open("w") as fh:
        subprocess.run([sys.executable, FAKE, "nsa", "--delay", "0"], stdout=fh, timeout=30, check=False)
    return log


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
def test_patched_command(nsa_log, fmt):
    command = shlex.join(["python", "-m", "sglang.launch_server", *SECRET_FLAGS]) + " " + " ".join(EXAMPLES[:12])
    p = triage("analyze", str(nsa_log), "-f", fmt, "--command", command)
    assert "--disable-radix-cache" in p.stdout  # the patched command is there
    assert not leaks(p.stdout) and "quotedTAIL" not in p.stdout and "kw-pass-771x" not in p.stdout
    kept = triage("analyze", str(nsa_log), "-f", fmt, "--command", command, "--no-redact")
    assert "quotedTAIL" in kept.stdout


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_retry_attempts_plan_and_summary(tmp_path, fmt):
    """`run --retry` prints each attempt's command (stderr, JSON events), the summary and the
    deployment's launch command: the server's secret flags are masked in all of them."""
    p = triage("run", "--retry", "2", "--until", "exit", "--log", str(tmp_path / "s.log"), "--grace", "0.3",
               "--timeout", "30", "-f", fmt, "--", sys.executable, FAKE, "nsa", "--delay", "0.002", *SECRET_FLAGS,
               ok=(0,))
    assert "relaunching as attempt 2" in own_stderr(p)
    for text in (p.stdout, own_stderr(p)):
        assert not leaks(text) and "quotedTAIL" not in text and "kw-pass-771x" not in text
    plan = triage("run", "--retry", "2", "--dry-run", "-f", fmt, "--log", str(tmp_path / "s.log"), "--",
                  "python", "-m", "sglang.launch_server", *SECRET_FLAGS, ok=(0,))
    assert "quotedTAIL" not in plan.stdout + plan.stderr and "kw-pass-771x" not in plan.stdout


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """One server per kind, each dying of an exception nobody catalogued whose message holds the
    secret: the board shows an unknown failure by its message."""
    root = tmp_path_factory.mktemp("archive")
    for i, (_, example, _) in enumerate(PLANTED):
        node = root / f"node{i:02d}"
        node.mkdir()
        (node / "server.log").write_text(
            "[2025-01-01 00:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/sgl/sglang/srt/net/client.py", line 3, in connect\n    session.connect()\n'
            f"Frob{i}Error: gave up with {example}\n")
    return root


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_fleet_board(archive, fmt):
    p = triage("fleet", str(archive), "-f", fmt, "-j", "1")
    assert "Frob1Error" in p.stdout
    assert not leaks(p.stdout) and not leaks(p.stderr)
    kept = triage("fleet", str(archive), "-f", fmt, "-j", "1", "--no-redact").stdout
    reached = [kind for kind, _, secret in PLANTED if secret in kept or json.dumps(secret)[1:-1] in kept]
    assert len(reached) >= len(PLANTED) - 4  # the board cuts a long message: the longest few go
