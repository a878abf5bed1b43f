"""The command line: the JSON contract, exit codes, inputs, and one-line errors."""

import gzip
import json
import shutil

import pytest
from conftest import FIXTURES, analyze_json, run_cli, run_process

CONTRACT_FAILURE = {"exception", "message", "line", "ranks", "fingerprint"}
CONTRACT_FINDING = {"signature", "title", "confidence", "severity", "workarounds", "evidence"}
CONTRACT_WORKAROUND = {"id", "flags", "remove_flags", "env", "cost"}


def test_seed_case_multi_rank_nsa_crash():
    code, d = analyze_json(FIXTURES / "sglang-nsa-tp8.log")
    assert code == 1
    assert len(d["failures"]) == 1
    f = d["failures"][0]
    assert f["exception"] == "AttributeError"
    assert len(f["ranks"]) == 4 and f["first_rank"] in f["ranks"]
    top = d["findings"][0]
    assert top["signature"] == "sglang-nsa-page-table-1-flattened"
    assert any("--disable-radix-cache" in w["flags"] for w in top["workarounds"])
    assert top["evidence"] and all(isinstance(e["line"], int) for e in top["evidence"])


def test_json_contract_field_names():
    _, d = analyze_json(FIXTURES / "sglang-nsa-tp8.log")
    assert set(d["failures"][0]) >= CONTRACT_FAILURE
    finding = d["findings"][0]
    assert set(finding) >= CONTRACT_FINDING
    assert 0.0 <= finding["confidence"] <= 1.0
    assert finding["severity"] in {"crash", "hang", "degraded", "warning"}
    assert set(finding["workarounds"][0]) >= CONTRACT_WORKAROUND
    assert {"line", "text"} <= set(finding["evidence"][0])


def test_clean_log_exits_zero_and_says_so():
    p = run_cli("analyze", str(FIXTURES / "sglang-clean.log"))
    assert p.returncode == 0, p.stderr
    assert b"no failure found" in p.stdout
    code, d = analyze_json(FIXTURES / "sglang-clean.log")
    assert code == 0 and d["failures"] == [] and d["findings"] == []


def test_markdown_report_sections():
    p = run_cli("analyze", str(FIXTURES / "sglang-nsa-tp8.log"))
    out = p.stdout.decode()
    assert p.returncode == 1
    for needle in ("**Verdict:**", "**Do now:**", "--disable-radix-cache", "## Timeline", "## Environment",
                   "## Why this matched", "```text", "Patched launch command"):
        assert needle in out, needle


def test_unknown_failure_gets_a_full_section(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
                   "    foo()\n"
                   "ZeroDivisionError: division by zero in the frobnicator\n")
    p = run_cli("analyze", str(log))
    out = p.stdout.decode()
    assert p.returncode == 1
    assert "unknown failure" in out and "ZeroDivisionError" in out
    assert "Fingerprint" in out and "triage new" in out


def test_gzip_and_stdin(tmp_path):
    code, d = analyze_json(FIXTURES / "sglang-illegal-address.log.gz")
    assert code == 1 and d["failures"][0]["exception"] == "torch.AcceleratorError"
    data = (FIXTURES / "vllm-v1-max-seq-len.log").read_bytes()
    p = run_cli("analyze", "-", "--format", "json", stdin=gzip.compress(data))
    assert p.returncode == 1
    assert json.loads(p.stdout)["findings"][0]["signature"] == "vllm-max-seq-len-exceeds-kv-cache"


def test_output_file_and_refusal_to_overwrite_input(tmp_path):
    log = tmp_path / "a.log"
    shutil.copy(FIXTURES / "sglang-nsa-tp8.log", log)
    before = log.read_bytes()
    out = tmp_path / "report.md"
    p = run_cli("analyze", str(log), "--output", str(out))
    assert p.returncode == 1 and out.read_text().startswith("# Triage:")
    p = run_cli("analyze", str(log), "--output", str(log))
    assert p.returncode == 2
    assert log.read_bytes() == before
    assert b"refusing" in p.stderr and b"Traceback" not in p.stderr


def test_missing_file_is_one_line_exit_2():
    p = run_cli("analyze", "/nonexistent/server.log")
    assert p.returncode == 2
    assert p.stderr.decode().count("\n") == 1 and "no such file" in p.stderr.decode()


def test_usage_error_is_one_line_exit_2():
    p = run_cli("analyze", "--format", "xml", str(FIXTURES / "sglang-clean.log"))
    assert p.returncode == 2
    assert p.stderr.decode().count("\n") == 1 and b"Traceback" not in p.stderr


def test_signatures_json_lists_fields():
    p = run_cli("signatures", "--engine", "sglang", "--format", "json")
    assert p.returncode == 0
    sigs = json.loads(p.stdout)["signatures"]
    assert len(sigs) >= 20
    assert {"id", "title", "engine", "severity", "references", "workarounds"} <= set(sigs[0])
    assert all(s["engine"] == "sglang" for s in sigs)


def test_show_signature_and_unknown_id():
    p = run_cli("show", "sglang-nsa-page-table-1-flattened")
    assert p.returncode == 0 and b"--disable-radix-cache" in p.stdout and b"## References" in p.stdout
    p = run_cli("show", "no-such-thing")
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1


def test_vllm_kv_cache_log_reports_version_and_patched_command():
    code, d = analyze_json(FIXTURES / "vllm-v1-max-seq-len.log")
    assert code == 1
    assert d["environment"]["engine"] == "vllm" and d["environment"]["version"] == "0.9.1"
    assert d["findings"][0]["signature"] == "vllm-max-seq-len-exceeds-kv-cache"
    assert d["patched_command"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert "--max-model-len" in d["patched_command"]


@pytest.mark.parametrize("args", [
    ("analyze", str(FIXTURES / "sglang-nsa-tp8.log")),  # a report, exit 1
    ("analyze", "--format", "xml", str(FIXTURES / "sglang-clean.log")),  # a usage error, exit 2
], ids=["report", "usage-error"])
def test_in_process_runner_is_the_real_command(args):
    """The suite runs the CLI in process (conftest.run_cli); `python -m triage` must give the
    same bytes and exit code, or every in-process test proves less than it claims."""
    real, here = run_process(*args), run_cli(*args)
    assert (here.returncode, here.stdout, here.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode in (1, 2) and (real.stdout if real.returncode == 1 else real.stderr)


def test_a_command_built_alone_says_and_does_what_the_whole_app_does(monkeypatch):
    """run_main builds only the command the arguments name (cli._command(only)); its help, and
    its options, are those of the same command inside the whole app."""
    import triage.cli as cli

    names = [cli._name(c) for c in cli.app.registered_commands]
    assert "analyze" in names and len(names) >= 8
    whole = cli._command()
    for name in names:
        alone = cli._command(name)
        assert list(alone.commands) == [name]
        a, w = alone.commands[name], whole.commands[name]
        assert [p.name for p in a.params] == [p.name for p in w.params]
        assert [p.name for p in alone.params] == [p.name for p in whole.params]  # --config, --isolated, ...
        shown = run_cli(name, "--help").stdout
        assert shown.startswith(f"Usage: triage {name} ".encode()) and shown == _help_of_whole(cli, name)
    assert cli._only(["analyze", "x.log"]) == "analyze"
    assert cli._only(["--isolated", "analyze", "x.log"]) == "analyze"  # the program's options first
    assert cli._only(["--config", "t.toml", "analyze", "x.log"]) == "analyze"
    assert cli._only(["catalogue", "check"]) is None and cli._only([]) is None
    monkeypatch.setenv("_TRIAGE_COMPLETE", "bash_complete")
    assert cli._only(["analyze"]) is None  # completion lists everything


def _help_of_whole(cli, name: str) -> bytes:  # noqa: ANN001
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(BaseException):
        cli._command()(args=[name, "--help"], prog_name="triage", standalone_mode=False)
    return out.getvalue().encode()


def test_global_options_on_either_side_of_the_command(tmp_path):
    """As ruff's: `triage -q analyze`, `triage analyze --config F`, `triage --no-redact analyze`
    (issue 35: click refused each); nothing of a server's own command after `run --` is moved."""
    import triage.cli as cli

    log = str(FIXTURES / "sglang-nsa-tp8.log")
    conf = tmp_path / "t.toml"
    conf.write_text('format = "json"\n')
    plain = run_cli("analyze", log, "-q")
    for args in (("-q", "analyze", log), ("analyze", "-q", log), ("--quiet", "analyze", log)):
        p = run_cli(*args)
        assert (p.returncode, p.stdout, p.stderr) == (plain.returncode, plain.stdout, plain.stderr), args
    for args in (("analyze", log, "--config", str(conf)), ("analyze", f"--config={conf}", log),
                 ("--config", str(conf), "analyze", log), ("-q", "analyze", "--config", str(conf), log)):
        p = run_cli(*args)
        assert p.returncode == 1 and json.loads(p.stdout)["exit_code"] == 1, (args, p.stderr)
    p = run_cli("analyze", log, "--isolated", "-f", "json", "--exit-zero")
    assert p.returncode == 0 and json.loads(p.stdout)
    assert run_cli("--exit-zero", "analyze", log).returncode == 0
    assert run_cli("-q", "schema", "report").returncode == 0  # nothing to be quiet about: accepted
    g = cli._global_options_anywhere
    assert g(["run", "--log", "l", "--config", "c", "--", "srv", "--config", "z", "-q"]) == [
        "--config", "c", "run", "--log", "l", "--", "srv", "--config", "z", "-q"]
    assert g(["-v", "run", "srv", "--config", "z"]) == ["run", "-v", "srv", "--config", "z"]
    assert g(["analyze", "--command", "--config", "x.log"]) == ["analyze", "--command", "--config", "x.log"]
    assert g(["-v", "catalogue", "check", "--config", "c"]) == ["--config", "c", "catalogue", "check", "-v"]
    assert run_cli("analyze", log, "--config", str(tmp_path / "missing.toml")).returncode == 2
