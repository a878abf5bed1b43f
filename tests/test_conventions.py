"""The command-line conventions of issue 15, each through the CLI: --version, -h, --format,
-o, --exit-zero, -q/-v, the JSON envelope, option validation, configuration, schemas, TTY
rendering, and the reports that one bad line or option used to lose."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
import threading
import warnings
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples"
NSA = EXAMPLES / "sglang-nsa-crash.log"
COMPILE = EXAMPLES / "sglang-capture-torch-compile.log"
VLLM = EXAMPLES / "vllm-kv-cache-too-small.log"
ENVELOPE = {"schema", "triage_version", "exit_code", "reports", "summary", "failures", "findings"}


@pytest.fixture(autouse=True)
def _no_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user configuration or TRIAGE_* setting leaks in from the machine running the tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg")))
    for name in list(os.environ):
        if name.startswith("TRIAGE_") and name not in ("TRIAGE_NO_CACHE", "TRIAGE_DEBUG"):
            monkeypatch.delenv(name)


def cli(*args: str | Path) -> tuple[int, str, str]:
    """The CLI in process (run_main: the entry point's error handling included)."""
    from triage.cli import run_main
    from triage.core.verbosity import LOG

    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = run_main([str(a) for a in args])
    finally:
        LOG.setLevel(0)  # -q/-v of one call must not leak into the next test
    return code, out.getvalue(), err.getvalue()


def _drain(master: int, chunks: list[bytes]) -> None:
    while True:
        try:
            b = os.read(master, 1 << 16)
        except OSError:  # the slave side closed
            return
        if not b:
            return
        chunks.append(b)


def tty(*args: str, env: dict[str, str] | None = None, process: bool = False) -> str:
    """stdout of `triage` when it is a terminal (a pseudo-terminal, read as it is written): in
    this process (conftest.run_cli), or with `process` the real `python -m triage`."""
    master, slave = pty.openpty()
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(master, chunks), daemon=True)
    reader.start()
    settings = {"COLUMNS": "120", "TERM": "xterm", **(env or {})}
    if process:
        p = subprocess.Popen([sys.executable, "-m", "triage", *args], stdout=slave, stderr=subprocess.PIPE,
                             env={**os.environ, **settings})
        os.close(slave)
        assert p.wait(timeout=120) in (0, 1), p.stderr.read() if p.stderr else ""
    else:
        done = run_cli(*args, env=settings, stdout_fd=slave)
        os.close(slave)
        assert done.returncode in (0, 1), done.stderr
    reader.join(30)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


# --- conventions ----------------------------------------------------------------------------

def test_version_and_engine_version_are_two_options() -> None:
    from triage import __version__

    assert cli("--version") == (0, f"triage {__version__}\n", "")
    assert cli("-V")[1] == f"triage {__version__}\n"
    for spelling in ("--engine-version", "--version"):  # the old spelling on analyze still works
        code, out, _ = cli("analyze", NSA, spelling, "0.5.3", "-f", "json")
        assert code == 1 and json.loads(out)["environment"]["version"] == "0.5.3"
    assert "--engine-version" in cli("analyze", "-h")[1]
    assert "--version" not in cli("analyze", "-h")[1].replace("--engine-version", "")  # the alias is hidden


def _commands() -> list[list[str]]:
    from typer.main import get_command

    from triage.cli import app

    def walk(cmd, path: list[str]) -> list[list[str]]:  # noqa: ANN001
        subs = getattr(cmd, "commands", None)
        if not subs:
            return [path]
        return [path] + [p for name, c in sorted(subs.items()) for p in walk(c, [*path, name])]

    return walk(get_command(app), [])


def test_every_command_has_h_and_no_python_types_in_help() -> None:
    seen = 0
    for path in _commands():
        code, out, err = cli(*path, "-h")
        assert code == 0 and out.startswith("Usage: triage"), (path, err)
        assert not re.search(r"<(list\[|str>|int>|float>|path>|bool>)", out), (path, out)
        assert "{" not in out.splitlines()[0], (path, out.splitlines()[0])  # `LOG...`, not typer's `{LOG}...`
        seen += 1
    assert seen >= 10
    assert "--install-completion" in cli("-h")[1]  # shell completion is on


def test_shell_completion_completes_commands_and_options(monkeypatch) -> None:
    """What the installed completion script asks triage (bash's protocol, as typer wires it).

    `--show-completion` is a switch: the shell is the one typer detects among the process's
    ancestors (a trailing `bash` is not read). A suite started with no shell above it (a
    detached job, some CI runners) detected none: 'Shell  not supported.', exit 1. The
    detection is fixed to bash here; what is tested is the script it prints."""
    monkeypatch.setattr("typer.completion._get_shell_name", lambda: "bash")
    def complete(words: str, process: bool = False) -> list[str]:
        env = {"_TRIAGE_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        if process:  # the installed script runs the real entry point
            p = subprocess.run([sys.executable, "-m", "triage"], capture_output=True, env={**os.environ, **env},
                               timeout=120)
        else:
            p = run_cli(env=env)
        assert p.returncode == 0, p.stderr
        return p.stdout.decode().split()

    assert complete("triage ana", process=True) == ["analyze"]
    assert complete("triage analyze --engine-v") == ["--engine-version"]
    assert "backtest" in complete("triage catalogue b")
    code, out, err = cli("--show-completion")
    assert code == 0 and "_TRIAGE_COMPLETE" in out and "complete_bash" in out, (code, err)


def test_format_accepts_markdown_md_and_json() -> None:
    md = cli("analyze", NSA, "--format", "md")
    assert md[0] == 1 and md[1].startswith("# Triage:")
    assert cli("analyze", NSA, "--format", "markdown")[1] == md[1]
    assert json.loads(cli("analyze", NSA, "-f", "json")[1])["exit_code"] == 1
    code, _, err = cli("analyze", NSA, "-f", "xml")
    assert code == 2 and err.startswith("triage: error:") and "'xml'" in err and "Value error" not in err


def test_output_file_on_every_report_writing_command(tmp_path: Path) -> None:
    for args, name in ((["analyze", NSA, "-f", "json"], "a.json"), (["signatures"], "s.md"),
                       (["show", "system-oom-killer"], "show.md"), (["schema", "report"], "r.json")):
        target = tmp_path / name
        code, out, _ = cli(*args, "-o", target)
        assert out == "" and target.read_text(encoding="utf-8"), args
    code, out, _ = cli("watch", VLLM, "-t", "60", "--grace", "0", "-o", tmp_path / "w.md")
    assert code == 1 and out == "" and "vllm-max-seq-len-exceeds-kv-cache" in (tmp_path / "w.md").read_text()
    code, _, err = cli("analyze", NSA, "-o", NSA)
    assert code == 2 and "one of the inputs" in err
    code, out, _ = cli("run", "--retry", "1", "--dry-run", "--log", NSA, "-o", tmp_path / "plan.md")
    assert code == 0 and out == "" and "--disable-radix-cache" in (tmp_path / "plan.md").read_text()


def test_exit_zero_keeps_the_report_and_usage_errors() -> None:
    code, out, _ = cli("analyze", NSA, "--exit-zero")
    assert code == 0 and "sglang-nsa-page-table-1-flattened" in out
    assert cli("analyze", NSA)[0] == 1
    assert cli("analyze", "no-such.log", "--exit-zero")[0] == 2


def test_quiet_and_verbose() -> None:
    code, out, err = cli("watch", VLLM, "-t", "60", "--grace", "0")
    assert code == 1 and "triage: failure at line" in err
    code, out, err = cli("watch", VLLM, "-t", "60", "--grace", "0", "-q")
    assert code == 1 and err == "" and "vllm-max-seq-len-exceeds-kv-cache" in out
    code, out, err = cli("analyze", NSA, "-v")
    assert code == 1 and "triage: configuration:" in err and "triage: catalogue:" in err
    assert cli("analyze", NSA, "-q", "-v")[0] == 2


# --- the JSON contract ----------------------------------------------------------------------

def test_json_has_one_envelope_for_one_log_or_many() -> None:
    one = json.loads(cli("analyze", NSA, "-f", "json")[1])
    many = json.loads(cli("analyze", NSA, VLLM, "-f", "json")[1])
    assert set(one) >= ENVELOPE and set(many) >= ENVELOPE
    assert one["schema"] == many["schema"] == "triage-report/2"
    assert len(one["reports"]) == 1 and len(many["reports"]) == 2
    assert one["summary"]["logs"] == 1 and many["summary"]["logs"] == 2
    # the 0.1 single-log keys stay readable at the top level
    assert one["environment"] == one["reports"][0]["environment"] and one["failures"] == one["reports"][0]["failures"]
    assert many["findings"] == [x for r in many["reports"] for x in r["findings"]]


def test_json_output_validates_against_the_report_model() -> None:
    from triage.commands.contract import Document

    doc = Document.model_validate_json(cli("analyze", NSA, VLLM, "-f", "json")[1])
    assert [r.source for r in doc.reports] == [str(NSA), str(VLLM)]


def test_schemas_are_generated_and_current() -> None:
    for name in ("report", "catalogue", "signature", "workaround"):
        code, out, _ = cli("schema", name)
        assert code == 0
        schema = json.loads(out)
        assert schema["$schema"].startswith("https://json-schema.org/")
        kept = ROOT / "docs" / "schemas" / f"{name}.json"
        assert kept.read_text(encoding="utf-8") == out, f"run python scripts/gen_docs.py ({kept} is stale)"
    report = json.loads(cli("schema", "report")[1])
    assert set(report["properties"]) >= ENVELOPE
    assert cli("schema", "nope")[0] == 2


def test_published_schemas_accept_the_catalogue_and_the_reports_and_flag_typos() -> None:
    """What an editor does with docs/schemas/: every built-in entry validates, a misspelt key
    does not; the JSON that analyze prints validates against the report schema."""
    jsonschema = pytest.importorskip("jsonschema")  # installed with ray (the test extra)
    import yaml

    def validator(name: str):  # noqa: ANN202
        schema = json.loads(cli("schema", name)[1])
        return jsonschema.validators.validator_for(schema)(schema)

    for kind, top in (("signature", ROOT / "signatures"), ("workaround", ROOT / "workarounds")):
        own, either = validator(kind), validator("catalogue")
        files = sorted(top.rglob("*.yaml"))
        assert len(files) > 100
        for f in files:
            # the C loader, as the catalogue's own loader reads these files: the same data for a
            # tenth of the pure-Python parser's 1.4 s over the 700 files
            entry = yaml.load(f.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
            assert not list(own.iter_errors(entry)) and not list(either.iter_errors(entry)), f
        typo = {("keyword" if k == "keywords" else "titel" if k == "title" else k): v for k, v in entry.items()}
        assert list(own.iter_errors(typo)), kind
    report = validator("report")
    for logs in ([NSA], sorted(EXAMPLES.glob("*.log"))):
        doc = json.loads(cli("analyze", *logs, "-f", "json")[1])
        assert not list(report.iter_errors(doc))
        assert list(report.iter_errors({**doc, "reports": "none"}))


def test_cli_reference_is_current() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gen_docs import cli_markdown
    finally:
        sys.path.pop(0)
    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == cli_markdown(), \
        "docs/cli.md is stale: run python scripts/gen_docs.py"


# --- reports that used to be lost ---------------------------------------------------------

def test_a_cut_off_quote_loses_no_report(tmp_path: Path) -> None:
    cut = tmp_path / "cut.log"
    cut.write_text('Killed  python -m sglang.launch_server --model-path "deepseek --tp 8\n' + NSA.read_text())
    code, out, err = cli("analyze", cut, VLLM, "-f", "json")
    assert code == 1 and "internal error" not in err
    assert len(json.loads(out)["reports"]) == 2
    code, out, err = cli("analyze", NSA, "--command", "python -m sglang.launch_server --model-path 'x --tp 8")
    assert code == 1 and "internal error" not in err and "--disable-radix-cache" in out


def test_summary_files_each_log_under_its_best_finding() -> None:
    code, out, _ = cli("analyze", *sorted(EXAMPLES.glob("*.log")), "-f", "json")
    groups = {g["key"]: g for g in json.loads(out)["summary"]["groups"]}
    assert "sglang-torch-compile-stream-capturing" in groups and "system-oom-killer" not in groups
    md = cli("analyze", *sorted(EXAMPLES.glob("*.log")))[1]
    assert "`sglang-torch-compile-stream-capturing`" in md.split("\n---\n")[0]


def test_catalogue_text_is_escaped_for_markdown() -> None:
    out = cli("show", "system-oom-killer")[1]
    assert "\\<pid>" in out and not re.search(r"(?<!\\)<pid>", out)
    report = cli("analyze", COMPILE)[1]  # system-oom-killer is its second finding
    assert "system-oom-killer" in report and not re.search(r"(?<![\\`])<pid>", report)


def test_terminal_gets_rendered_markdown_without_entities() -> None:
    out = tty("signatures", process=True)  # once through the real entry point
    assert "&lt;" not in out and "&gt;" not in out and "|---|" not in out and "\x1b[" in out
    plain = tty("show", "system-oom-killer", env={"NO_COLOR": "1"})
    assert "<pid>" in plain and "\\<" not in plain and not re.search("\x1b\\[3[0-9]m", plain)
    piped = cli("show", "system-oom-killer")[1]
    assert "\\<pid>" in piped and "\x1b[" not in piped  # piped: plain Markdown


def test_log_text_cannot_turn_into_emphasis(tmp_path: Path) -> None:
    """A message such as `__init__` or `*docs*` is shown as written, not as bold or italics."""
    from markdown_it import MarkdownIt

    log = tmp_path / "init.log"
    log.write_text("[2025-01-01 00:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
                   "    scheduler.event_loop()\n"
                   "TypeError: __init__() got <class 'int'>, see *docs* and _private_ (max_model_len)\n")
    md = cli("analyze", log)[1]
    assert "max_model_len" in md  # an underscore inside a word needs no escape
    html = MarkdownIt("commonmark").enable("table").render(md)
    verdict = next(ln for ln in html.splitlines() if "Verdict:" in ln)
    assert "__init__()" in verdict and "*docs*" in verdict and "_private_" in verdict, verdict
    assert "<em>" not in verdict and verdict.count("<strong>") == 1, verdict  # only the "Verdict:" label
    shown = tty("analyze", str(log))
    assert "__init__() got <class 'int'>, see *docs* and _private_" in shown


def test_terminal_keeps_a_patched_command_on_one_line() -> None:
    """rich wraps code blocks at the terminal's width; the command to copy must stay one line."""
    shown = tty("analyze", str(COMPILE), env={"COLUMNS": "60"})
    command = next(ln for ln in shown.splitlines() if "sglang.launch_server" in ln)
    assert "--tp 2 --mem-fraction-static 0.8 --quantization gptq_marlin" in command, shown


def test_run_of_a_server_that_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("run", "-t", "10", "--", "false")
    assert code == 1
    assert "exited with status 1 before writing anything" in out and "no failure found in 0 lines" not in out


def test_watch_refuses_a_compressed_log(tmp_path: Path) -> None:
    gz = tmp_path / "x.log.gz"
    import gzip

    gz.write_bytes(gzip.compress(NSA.read_bytes()))
    code, _, err = cli("watch", gz, "-t", "1")
    assert code == 2 and "triage analyze" in err
    renamed = tmp_path / "x.log"
    renamed.write_bytes(gz.read_bytes())  # gzip without the suffix: found by its magic bytes
    assert cli("watch", renamed, "-t", "1")[0] == 2


def test_options_are_validated() -> None:
    for args, says in ((["--engine-version", "notaversion"], "not a version"), (["-j", "-1"], "--jobs -1"),
                       # typer 0.29 said "Input should be a valid integer, unable to parse string as an integer"
                       (["-j", "abc"], "'--jobs' / '-j': expected a whole number")):
        code, _, err = cli("analyze", NSA, *args)
        assert code == 2 and says in err and err.count("\n") == 1
    code, out, _ = cli("analyze", NSA, "--command", "vllm serve foo --tensor-parallel-size 8")
    assert code == 1 and "--command starts vllm, but this log was written by sglang" in out
    assert "vllm serve foo" not in out


def test_no_strptime_deprecation_for_dates_without_a_year(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import datetime

    from triage.pipeline.parse import timeline
    from triage.pipeline.parse.timeline import seconds_between

    # Python before 3.13 never warns, so the formats are checked too: a day needs a year
    formats: list[str] = []

    class Spy(datetime):
        @classmethod
        def strptime(cls, text: str, fmt: str) -> datetime:  # type: ignore[override]
            formats.append(fmt)
            return datetime.strptime(text, fmt)

    monkeypatch.setattr(timeline, "datetime", Spy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert cli("analyze", VLLM)[0] == 1
        assert seconds_between("02-28 23:59:59", "02-29 00:00:09") == 10.0
    assert any("%d" in f for f in formats) and all("%Y" in f for f in formats if "%d" in f), formats


def test_redaction_of_each_kind_the_issue_named(tmp_path: Path) -> None:
    """NGC (bare and in `export NGC_KEY=`), Groq, Replicate, Databricks, Stripe, a Slack webhook
    and an Azure AccountKey, in the launch line and the exception message, through analyze."""
    body = "AbCdEfGhJkLmNpQrStUvWxYz23456789"
    secrets = ["nvapi-" + body * 2, "nvapi-" + body[::-1] * 2, "gsk_" + body + "WGdyb3FY" + body[:20], "r8_" + body + "1234567",
               "dapi" + "0123456789abcdef" * 2, "sk_live_" + body[:24],
               "hooks.slack.com/services/T0" + "1234567/B0" + "1234567/" + body[:24],
               "AccountKey=" + body * 2 + "AbCdEfGhJk==;"]
    lines = [f"export NGC_KEY={secrets[0]}", f"[2025-01-01 00:00:00] ngc {secrets[1]} groq {secrets[2]} replicate {secrets[3]}",
             f"databricks {secrets[4]} stripe {secrets[5]} alerts https://{secrets[6]}",
             f"DefaultEndpointsProtocol=https;AccountName=acme;{secrets[7]}EndpointSuffix=core.windows.net",
             "[2025-01-01 00:00:02 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process',
             "    scheduler.event_loop()", "RuntimeError: rejected " + " ".join(secrets)]
    log = tmp_path / "keys.log"
    log.write_text("\n".join(lines) + "\n")

    def hidden(s: str) -> str:  # what must go: the token, not its label
        return s.split("=", 1)[1].rstrip(";") if s.startswith("AccountKey=") else s.split("/", 2)[-1]

    for fmt in ("md", "json"):
        code, out, _ = cli("analyze", log, "-f", fmt)
        assert code == 1 and "RuntimeError" in out
        assert [hidden(s)[:12] for s in secrets if hidden(s) in out] == [], fmt
        kept = cli("analyze", log, "-f", fmt, "--no-redact")[1]
        assert all(hidden(s) in kept for s in secrets)  # the report does carry them when asked to


# --- configuration --------------------------------------------------------------------------

_HOLDS_TRIAGE = [  # every way TOML can spell a tool.triage table
    '[tool.triage]\nformat = "md"\n',
    '[ tool . "triage" ] # settings\nformat = "md"\n',
    '[tool] # all tools\ntriage = { format = "md" }\n',
    '[tool]\ntriage.format = "md"\n',
    'tool.triage.format = "md"\n',
    'tool = { triage = { format = "md" } }\n',
    '[[tool.triage.catalogue]]\npath = "x"\n',
    '[tool]\ndoc = """\n[project.scripts]\n"""\ntriage = { format = "md" }\n',
]
_MENTIONS_TRIAGE = [  # triage named, no tool.triage table
    '[project]\nname = "triage"\ndependencies = ["triage>=0.1", "regex"]\n',
    '[project.scripts]\ntriage = "triage.cli:main"\n[tool.ruff]\nsrc = ["triage"]\n',
    '[tool.setuptools.packages.find]\ninclude = ["triage*"]\n',
]


@pytest.mark.parametrize("text", _HOLDS_TRIAGE + _MENTIONS_TRIAGE)
def test_the_pyproject_prefilter_never_skips_a_tool_triage_table(text: str) -> None:
    from triage.commands.settings import _may_name_triage

    tomllib = pytest.importorskip("tomllib")

    holds = "triage" in tomllib.loads(text).get("tool", {})
    assert holds == (text in _HOLDS_TRIAGE)
    assert _may_name_triage(text) or not holds  # no table is ever skipped
    if text in _MENTIONS_TRIAGE:
        assert not _may_name_triage(text)  # and the common mentions are not parsed for nothing


def test_configuration_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "triage"
    user.mkdir(parents=True)
    (user / "triage.toml").write_text('format = "json"\n')
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    monkeypatch.chdir(project / "sub")
    assert cli("analyze", NSA)[1].startswith("{")  # no project file: the user's
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert cli("analyze", NSA)[1].startswith("{")  # a pyproject.toml without [tool.triage] does not count
    (project / "pyproject.toml").write_text('[tool.triage]\nformat = "md"\nexit-zero = true\n')
    code, out, _ = cli("analyze", NSA)
    assert code == 0 and out.startswith("# Triage")  # nearest project file wins over the user's
    (project / "sub" / "triage.toml").write_text('format = "json"\n')
    assert cli("analyze", NSA)[:2] == (1, cli("analyze", NSA, "-f", "json")[1])  # nearer still; no exit-zero there
    monkeypatch.setenv("TRIAGE_FORMAT", "markdown")
    assert cli("analyze", NSA)[1].startswith("# Triage")  # environment over files
    assert cli("analyze", NSA, "-f", "json")[1].startswith("{")  # command line over environment
    assert cli("--isolated", "analyze", NSA, "--exit-zero")[1].startswith("# Triage")


def test_configuration_errors_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "triage.toml").write_text('colour = "always"\n')
    code, _, err = cli("analyze", NSA)
    assert code == 2 and "unknown setting 'colour'" in err
    assert cli("analyze", "-h")[0] == 0  # help does not need a valid configuration
    (tmp_path / "triage.toml").write_text('catalogue = ["extra"]\n')
    code, _, err = cli("analyze", NSA)
    assert code == 2 and str(tmp_path / "extra") in err  # relative to the file
    (tmp_path / "triage.toml").write_text("jobs = \n")
    assert cli("analyze", NSA)[0] == 2
    # a value the option would refuse names the file or variable it came from, not the option
    for text, says in (('format = "xml"\n', "triage.toml: format = 'xml': expected markdown"),
                       ("jobs = -1\n", "triage.toml: jobs = -1: expected 0")):
        (tmp_path / "triage.toml").write_text(text)
        code, _, err = cli("analyze", NSA)
        assert code == 2 and says in err and "--" not in err, err
    for name, value in (("TRIAGE_FORMAT", "xml"), ("TRIAGE_JOBS", "-1")):
        monkeypatch.setenv(name, value)
        code, _, err = cli("--isolated", "analyze", NSA)
        assert code == 2 and err.startswith(f"triage: error: {name}={value}: expected") and "--" not in err, err
        monkeypatch.delenv(name)
    monkeypatch.setenv("TRIAGE_REDACT_IPS", "maybe")
    assert cli("--isolated", "analyze", NSA)[0] == 2


def test_configured_catalogue_and_redaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "ip.log"
    log.write_text('Traceback (most recent call last):\n  File "/x/sglang/srt/managers/scheduler.py", line 10, in run\n'
                   "    connect()\nRuntimeError: could not connect to 10.1.2.3:5000\n")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "triage.toml").write_text("redact-ips = true\n")
    assert "10.1.2.3" not in cli("analyze", log, "-f", "json")[1]
    assert "10.1.2.3" in cli("analyze", log, "-f", "json", "--no-redact-ips")[1]


# --- thin CLI -------------------------------------------------------------------------------

def test_cli_and_library_give_the_same_reports() -> None:
    import triage
    from triage.commands.analyze import analyze_logs, render

    logs = [str(p) for p in sorted(EXAMPLES.glob("*.log"))]
    assert cli("analyze", *logs, "-j", "1")[1] == render(analyze_logs(logs, jobs=1), "md")
    lib = triage.analyze(str(NSA), redact=True).model_dump(mode="json")
    assert json.loads(cli("analyze", NSA, "-f", "json")[1])["reports"][0] == lib


def test_cli_module_holds_no_pipeline_work() -> None:
    text = (ROOT / "triage" / "cli.py").read_text(encoding="utf-8")
    for word in ("analyze_many", "redact_report", "report.markdown", "render_json", "summarise(", "compare(", "backtest_out"):
        assert word not in text, word


def test_readme_quick_start_is_two_commands_in_a_venv_and_ci_runs_the_second() -> None:
    """The set-up contract (issue 35): exactly two commands, each making its own virtual
    environment (a Debian system Python refuses `pip install`), the first installing and
    analysing a bundled log, the second installing the test extra and running the suite;
    `.ci/run` runs the second verbatim and fails when it fails."""
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)\n```", quick, re.S)
    assert len(blocks) == 2 and all("\n" not in b for b in blocks), blocks
    venv = "python3 -m venv .venv && . .venv/bin/activate && "
    run, test = blocks
    assert run.startswith(venv + "pip install . && triage analyze examples/")
    assert (ROOT / run.rsplit(" ", 1)[1]).is_file()
    assert test == venv + "pip install '.[test]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci and "set -euo pipefail" in ci and ci[-1] == test  # its status is the script's
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
    assert ".venv/" in (ROOT / ".gitignore").read_text().split()
