"""Many logs: parallel across cores, failures grouped across logs, the library API."""

import json
import shutil

from conftest import FIXTURES, run_cli


def _deployment(tmp_path, n=40):
    d = tmp_path / "logs"
    d.mkdir()
    kinds = ["vllm-v1-max-seq-len.log", None, "segfault-killed.log", "vllm-v0-interleaved-oom.log"]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        if kind is None:  # an uncatalogued crash, different rank, time and paths on every host
            (d / f"host{i:03d}.log").write_text(
                f"[2025-07-0{1 + i % 9} 1{i % 10}:00:00 TP{i % 8}] Scheduler hit an exception: Traceback (most recent call last):\n"
                f'  File "/opt/env{i}/lib/python3.1{i % 3}/site-packages/sglang/srt/managers/scheduler.py", line {100 + i}, in run_batch\n'
                "    self.frobnicate(batch)\n"
                f"ZeroDivisionError: frobnicator divided {i} tokens by zero for request {i:032x}\n")
        else:
            shutil.copy(FIXTURES / kind, d / f"host{i:03d}.log")
    return d


def test_directory_of_40_logs_uses_both_cores_and_groups(tmp_path, monkeypatch):
    import multiprocessing as mp

    import triage.commands.many as many
    from triage.catalogue.load import load_catalogue
    from triage.pipeline.analyze import Options

    pools: list[int] = []
    real = mp.get_context

    class Spy:
        def __init__(self, ctx):
            self.ctx = ctx

        def Pool(self, n, **kw):  # noqa: N802 - mirrors the multiprocessing API
            pools.append(n)
            return self.ctx.Pool(n, **kw)

    monkeypatch.setattr(mp, "get_context", lambda m: Spy(real(m)))
    monkeypatch.setattr(many.os, "cpu_count", lambda: 2)
    d = _deployment(tmp_path)
    paths = sorted(str(p) for p in d.iterdir())
    reports, errors = many.analyze_many(paths, load_catalogue(), Options())
    assert pools == [2] and not errors and len(reports) == 40
    s = many.summarise(reports)
    assert s.logs == 40 and s.failed == 40
    by_key = {g.key: g for g in s.groups}
    assert len(by_key["vllm-max-seq-len-exceeds-kv-cache"].logs) == 10
    assert len(by_key["torch-cuda-out-of-memory"].logs) == 10
    unknown = [g for g in s.groups if g.key.startswith("fingerprint:")]
    assert unknown and all(len(g.logs) == 10 for g in unknown)  # one fingerprint across 10 logs (ranks, times, paths differ)


def test_cli_summary_over_a_directory_and_a_glob(tmp_path):
    d = _deployment(tmp_path, n=8)
    p = run_cli("analyze", str(d), "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["summary"]["logs"] == 8 and len(doc["reports"]) == 8
    assert doc["failures"] and doc["findings"]  # the single-log keys, merged
    p = run_cli("analyze", str(d / "host00*.log"))
    out = p.stdout.decode()
    assert out.startswith("# Triage: 8 logs, 8 with a failure") and "| failure | logs |" in out


def test_one_unreadable_log_does_not_hide_the_others(tmp_path):
    d = _deployment(tmp_path, n=3)
    (d / "broken.log.gz").write_bytes(b"\x1f\x8bnot really gzip")
    p = run_cli("analyze", str(d), "--format", "json")
    assert p.returncode == 1
    assert json.loads(p.stdout)["summary"]["errors"]
    assert b"broken.log.gz" in p.stderr and b"Traceback" not in p.stderr


def test_library_api_matches_the_cli():
    from triage import analyze

    rep = analyze(str(FIXTURES / "sglang-nsa-tp8.log"))
    p = run_cli("analyze", str(FIXTURES / "sglang-nsa-tp8.log"), "--format", "json", "--no-redact")
    cli = json.loads(p.stdout)
    assert rep.findings[0].signature == cli["findings"][0]["signature"]
    assert [f.fingerprint for f in rep.failures] == [f["fingerprint"] for f in cli["failures"]]
    assert rep.exit_code == p.returncode == 1
