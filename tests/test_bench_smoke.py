"""Smoke test of the benchmark harness: the log generator's shapes, the rg pattern file, --help,
and bench_fleet.py on a tiny archive.

Small logs only (~200 KB; 2.5 MB for the long-line shape, whose lines are 600 KB), no timing.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
SMALL_MB = "0.2"


def make(tmp_path: Path, shape: str, *args: str, size: str = SMALL_MB) -> tuple[Path, dict, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    out, meta = tmp_path / f"{shape}.log", tmp_path / f"{shape}.json"
    subprocess.run([sys.executable, str(BENCH / "make_logs.py"), shape, "--size-mb", size, "--out", str(out),
                    "--meta", str(meta), *args], check=True, capture_output=True, timeout=60)
    data = out.read_bytes()
    lines = data.decode("utf-8").split("\n")
    assert lines[-1] == ""  # ends with a newline
    return out, json.loads(meta.read_text()), lines[:-1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def crash_lines(meta: dict, lines: list[str]) -> list[str]:
    c = meta["crash"]
    return lines[c["first_line"] - 1:c["last_line"]]


def test_quiet_shape_is_deterministic_sized_and_ends_in_the_crash(tmp_path):
    path, meta, lines = make(tmp_path, "quiet")
    again, _, _ = make(tmp_path / "again", "quiet")
    assert path.read_bytes() == again.read_bytes()
    assert abs(meta["bytes"] - 0.2 * 2**20) < 4096 and meta["lines"] == len(lines)
    assert lines[0].startswith("[") and "server_args=ServerArgs(" in lines[0]
    text = "\n".join(lines)
    for needle in ("Load weight end", "Capture cuda graph end", "The server is fired up and ready to roll!",
                   "Prefill batch. #new-seq:", "#cached-token:", "Decode batch. #running-req:",
                   "gen throughput (token/s):", '" 200 OK'):
        assert needle in text, needle
    c = meta["crash"]
    assert c["last_line"] == len(lines)  # the crash ends the log
    block = crash_lines(meta, lines)
    assert block[0].endswith("Scheduler hit an exception: Traceback (most recent call last):")
    assert sum("Scheduler hit an exception" in ln for ln in block) == len(c["ranks"]) == 4
    assert sum(c["message"] in ln for ln in block) == len(c["ranks"])
    assert text.count("Received sigquit from a child process") == len(c["ranks"])


def test_no_crash_means_no_traceback(tmp_path):
    _, meta, lines = make(tmp_path, "quiet", "--no-crash")
    assert meta["crash"] is None
    assert not any("Traceback" in ln for ln in lines)


def test_noisy_shape_has_the_request_tracebacks_and_one_crash(tmp_path):
    _, meta, lines = make(tmp_path, "noisy", "--tracebacks", "20")
    assert meta["request_tracebacks"] == 20 == sum(meta["request_traceback_kinds"].values())
    starts = [i for i, ln in enumerate(lines)
              if "ERROR:    Exception in ASGI application" in ln or "] Error in request: " in ln]
    assert len(starts) == 20
    c = meta["crash"]
    assert all(i + 1 < c["first_line"] for i in starts)  # all before the crash
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert min(gaps) > 0.3 * max(gaps)  # spread through the log, not bunched
    assert sum("Scheduler hit an exception" in ln for ln in lines) == len(c["ranks"])  # one crash, its ranks
    assert c["first_line"] > 0.9 * len(lines)
    assert sum(" 500 Internal Server Error" in ln or " 400 Bad Request" in ln for ln in lines) >= 10


def test_long_shape_has_megabyte_lines_with_a_keyword(tmp_path):
    _, meta, lines = make(tmp_path, "long", "--long-every", "200", "--line-bytes", "600000", size="2.5")
    long = [ln for ln in lines if len(ln) > 500_000]
    assert len(long) == meta["long_lines"] >= 2
    assert meta["longest_line"] == max(len(ln.encode()) for ln in long)
    keywords = ("CUDA out of memory", "an illegal memory access was encountered", "NCCL error",
                "Segmentation fault", "is longer than the model's context length")
    assert all(any(k in ln for k in keywords) for ln in long)
    assert all("Receive: obj=" in ln[:200] or "Finish: obj=" in ln[:200] for ln in long)  # request content
    assert sum(len(ln) < 5000 for ln in lines) > 100  # mixed with normal lines


def test_vllm_shape_looks_like_a_v1_server(tmp_path):
    _, meta, lines = make(tmp_path, "vllm")
    head = re.compile(r"^\((APIServer|EngineCore_DP0|Worker_TP\d) pid=\d+\) (INFO|WARNING|ERROR) "
                      r"\d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] ")
    assert sum(bool(head.match(ln)) for ln in lines) > 0.7 * len(lines)
    text = "\n".join(lines)
    for needle in ("vLLM API server version", "(EngineCore_DP0 pid=", "Avg prompt throughput:", "Running: ",
                   "Prefix cache hit rate:", "Application startup complete."):
        assert needle in text, needle
    assert text.count("EngineCore encountered a fatal error.") == 1
    block = "\n".join(crash_lines(meta, lines))
    assert meta["crash"]["message"] in block and "EngineDeadError" in block


def test_pattern_file_is_catalogue_patterns_one_per_line():
    # the baseline is a snapshot of the catalogue's patterns, refreshed with export_patterns.py
    # before a benchmark run: it need not follow every catalogue edit, but it must stay a
    # valid list of real catalogue patterns
    exp = load("export_patterns")
    lines = (BENCH / "patterns.txt").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == "" and all(lines[:-1])  # an empty pattern would match every line
    catalogue = {p for _, p in exp.catalogue_patterns(ROOT)}
    assert len(set(lines[:-1]) & catalogue) >= 0.5 * (len(lines) - 1)


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep not installed")
def test_rg_accepts_the_pattern_file():
    rg = subprocess.run(["rg", "--no-config", "-c", "-f", str(BENCH / "patterns.txt")], input=b"", timeout=30)
    assert rg.returncode == 1  # valid patterns, nothing matched


def test_failure_one_check():
    bench = load("bench_scan")
    crash = {"kind": "cuda-oom", "exceptions": ["torch.OutOfMemoryError"], "message": "CUDA out of memory",
             "first_line": 100, "last_line": 140}
    ok = {"failures": [{"exception": "torch.OutOfMemoryError", "message": "CUDA out of memory. Tried",
                        "line": 101, "exception_line": 120}], "findings": []}
    assert bench.check_failure_one(json.dumps(ok).encode(), crash)["status"] == "PASS"
    wrong = {"failures": [{"exception": "jinja2.exceptions.TemplateError", "message": "roles must alternate",
                           "line": 12, "exception_line": 20}] + ok["failures"]}
    assert bench.check_failure_one(json.dumps(wrong).encode(), crash)["status"] == "FAIL"
    assert bench.check_failure_one(b"", crash)["status"] == "FAIL"


def test_bench_scan_help_runs():
    p = subprocess.run([sys.executable, str(BENCH / "bench_scan.py"), "--help"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0
    assert "--shapes" in p.stdout and "--runs" in p.stdout and "--json" in p.stdout


def test_fleet_benchmark_prints_logs_per_second(tmp_path, monkeypatch, capsys):
    """bench_fleet.py at its smallest, on the local pool, with a logs/s figure. No timing is
    asserted. Not on Ray: starting a Ray instance here was the suite's second-longest test, and
    that Ray and the local pool agree is tests/test_fleet_ray.py's to show (on the same harness
    code: the benchmark calls run_fleet with either runner). Its main() in this process, as
    `python bench_fleet.py ...` would run it (a child cost 2.3 s of CPU, most of it start-up
    and the catalogue read again from YAML); the environment it sets is put back."""
    monkeypatch.setenv("TRIAGE_NO_CACHE", "1")  # what the script sets for itself, undone after the test
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_fleet.py", "--servers", "2", "--per-server", "8", "--json", "--no-ray"])
    monkeypatch.setattr(sys, "path", list(sys.path))  # it puts the checkout and tests/ in front
    assert load("bench_fleet").main() == 0
    out = json.loads(capsys.readouterr().out)
    assert out["files"] == 2 * 8 + 2  # the logs, the empty one and the corrupt .gz
    assert out["local_pool"]["logs_per_s"] > 0


@pytest.mark.slow  # it keeps both cores busy on purpose (tests/conftest.py: --slow, TRIAGE_SLOW=1)
def test_machine_probe_reports_both_timings() -> None:
    """The benchmark records how fast the machine was (alone, and with both cores busy) so that
    runs from different minutes can be told apart; no threshold, the figures only have to exist."""
    probe = load("bench_scan").machine_probe()
    assert set(probe) == {"probe_alone_s", "probe_two_at_once_s"}
    assert all(isinstance(v, float) and 0 < v < 60 for v in probe.values())


def test_bench_markdown_runs(tmp_path, monkeypatch):
    """benchmarks/bench_markdown.py on 200 tracebacks: both formats rendered from one analysis
    (the figures themselves are docs/performance.md's, not a timed test)."""
    monkeypatch.setenv("TRIAGE_NO_CACHE", "1")
    mod = load("bench_markdown")
    log = tmp_path / "tracebacks.log"
    mod._hostile().distinct_tracebacks(log, 200)
    row = mod.bench(log, 200)
    assert row["failures"] == 201 and row["markdown_total_s"] > 0 and row["json_total_s"] > 0


@pytest.mark.slow  # four interpreters; the same guards run in process in test_nothing_lost.py
def test_bench_hostile_runs_the_hostile_corpus_labels(tmp_path):
    """benchmarks/bench_hostile.py --cases labels: each hostile label of `catalogue backtest`
    (alias bomb, /dev/zero, FIFO, a large label: 3 MiB here, 300 by default) ends in one error
    line, exit 2, within its time bound."""
    rows = load("bench_hostile").bench_labels(tmp_path, label_mb=3, bound=60)
    assert [r["case"] for r in rows] == ["label-alias-bomb", "label-dev-zero", "label-fifo", "label-huge"]
    assert all(r["ok"] and r["exit"] == 2 and r["one_line"] for r in rows), rows
