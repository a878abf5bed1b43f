"""Recommendations that fit the server: applied already, right spelling, patched command, cost."""

import shlex

import pytest
from conftest import FIXTURES, analyze_json, run_cli

from triage.catalogue.flags import flag_index, flag_name


def _seed(tmp_path, **subs):
    text = (FIXTURES / "sglang-nsa-tp8.log").read_text()
    for a, b in subs.items():
        text = text.replace(a, b)
    p = tmp_path / "seed.log"
    p.write_text(text)
    return p


def test_already_applied_workaround_is_not_recommended_again(tmp_path):
    log = _seed(tmp_path, **{"disable_radix_cache=False": "disable_radix_cache=True"})
    code, d = analyze_json(log)
    top = d["findings"][0]
    assert top["signature"] == "sglang-nsa-page-table-1-flattened"
    (w,) = [w for w in top["workarounds"] if "--disable-radix-cache" in w["flags"]]
    assert w["status"] == "already-applied" and "already" in w["note"]
    assert not any(x["status"] == "recommended" and "--disable-radix-cache" in x["flags"] for x in top["workarounds"])
    out = run_cli("analyze", str(log)).stdout.decode()
    assert "**Already applied:**" in out and "**Do now:** add `--disable-radix-cache`" not in out
    assert d["patched_command"] is None or d["patched_command"].count("--disable-radix-cache") <= 1


@pytest.mark.parametrize("name", ["sglang-nsa-tp8.log", "sglang-cuda-oom-8ranks.log", "sglang-chained-capture-k8s.log",
                                  "vllm-v1-max-seq-len.log", "vllm-v0-interleaved-oom.log"])
def test_patched_command_is_valid_for_the_engine(name):
    _, d = analyze_json(FIXTURES / name)
    cmd = d["patched_command"]
    assert cmd, name
    engine = d["environment"]["engine"]
    idx = flag_index(engine)
    args = shlex.split(cmd)
    flags = [idx.get(a.split("=")[0]).flag if idx.exists(a.split("=")[0]) else a for a in args if a.startswith("--")]
    assert flags and all(idx.exists(f) for f in flags), [f for f in flags if not idx.exists(f)]
    assert len(flags) == len(set(flags)), "a flag appears twice (counting unique-prefix spellings)"
    top = next(w for w in d["findings"][0]["workarounds"] if w["status"] == "recommended" and (w["flags"] or w["remove_flags"]))
    for f in top["flags"]:
        assert flag_name(f) in flags
    for f in top["remove_flags"]:
        assert flag_name(f) not in flags


def test_shell_launch_line_is_patched_in_place():
    _, d = analyze_json(FIXTURES / "sglang-chained-capture-k8s.log")
    assert d["patched_command"] == ("python3 -m sglang.launch_server --model-path /models/Qwen2.5-72B-Instruct --tp 2 "
                                    "--mem-fraction-static 0.8 --quantization gptq_marlin")


def test_user_command_is_patched(tmp_path):
    _, d = analyze_json(FIXTURES / "sglang-nsa-tp8.log", "--command",
                        "python -m sglang.launch_server --model-path m --tp 8 --api-key s3cr3t")
    assert d["patched_command"].endswith("--disable-radix-cache")
    assert "s3cr3t" not in d["patched_command"]  # redacted like every other string


def _prefill_log(tmp_path, cached: int, new: int) -> str:
    lines = ["[2025-01-01 00:00:00] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3.2-Exp', tp_size=2, "
             "attention_backend='nsa', kv_cache_dtype='fp8_e4m3', disable_radix_cache=False)"]
    for i in range(50):
        lines.append(f"[2025-01-01 00:00:{i:02d} TP0] Prefill batch, #new-seq: 4, #new-token: {new}, #cached-token: {cached}, "
                     f"token usage: 0.10, #running-req: {100 + i}, #queue-req: 0, cuda graph: False")
    lines += ["[2025-01-01 00:01:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
              '  File "/sgl/sglang/srt/layers/attention/nsa/forward_mha.py", line 443, in forward_mha_extend',
              "    page_table = metadata.page_table_1_flattened",
              "AttributeError: 'PrefillMetadata' object has no attribute 'page_table_1_flattened'"]
    p = tmp_path / f"p{cached}.log"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_cost_of_disabling_radix_cache_measured_from_the_log(tmp_path):
    _, low = analyze_json(_prefill_log(tmp_path, cached=0, new=4000))
    w = low["findings"][0]["workarounds"][0]
    assert "0.0%" in w["measured_cost"] and "almost nothing" in w["measured_cost"]
    _, high = analyze_json(_prefill_log(tmp_path, cached=3000, new=1000))
    w = high["findings"][0]["workarounds"][0]
    assert "75.0%" in w["measured_cost"] and "recomputed" in w["measured_cost"]
    assert low["findings"][0]["confidence"] > 0.9  # nsa backend and fp8 KV cache both held
    assert any("kv_cache_dtype" in y and "held" in y for y in low["findings"][0]["why"])


def test_condition_that_fails_marks_the_finding_unlikely(tmp_path):
    from pathlib import Path

    p = Path(_prefill_log(tmp_path, cached=0, new=10))
    p.write_text(p.read_text().replace("attention_backend='nsa'", "attention_backend='fa3'"))
    _, d = analyze_json(p)
    f = next(x for x in d["findings"] if x["signature"] == "sglang-nsa-page-table-1-flattened")
    assert f["unlikely"] and "attention_backend" in f["unlikely"] and f["confidence"] < 0.5
    assert d["findings"][0]["signature"] != f["signature"]  # an unlikely match does not lead


def test_values_computed_from_the_running_config_and_the_message():
    _, d = analyze_json(FIXTURES / "vllm-v1-max-seq-len.log")
    flags = [f for w in d["findings"][0]["workarounds"] for f in w["flags"]]
    assert "--max-model-len 79136" in flags  # the estimate the error message printed
    assert "--gpu-memory-utilization 0.9" in flags  # 0.85 running + 0.05
    _, d = analyze_json(FIXTURES / "sglang-cuda-oom-8ranks.log")
    flags = [f for w in d["findings"][0]["workarounds"] for f in w["flags"]]
    assert "--mem-fraction-static 0.8" in flags and "--chunked-prefill-size 4096" in flags


def test_deprecated_and_removed_flags_respelled_for_the_version(tmp_path):
    text = (FIXTURES / "sglang-chained-capture-k8s.log").read_text()
    p = tmp_path / "new.log"
    p.write_text(text.replace("/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py",
                              "/usr/local/lib/python3.12/site-packages/sglang-0.5.21/sglang/srt/managers/scheduler.py"))
    _, d = analyze_json(p)
    assert d["environment"]["version"] == "0.5.21"
    ws = {w["id"]: w for x in d["findings"] for w in x["workarounds"]}
    assert ws["sglang-disable-cuda-graph"]["flags"] == ["--cuda-graph-backend-decode=disabled"]
    hint = next(w for w in ws.values() if w["id"].startswith("engine-hint") and "--cuda-graph-max-bs" in w["action"])
    assert "--cuda-graph-max-bs-decode" in hint["note"]
    _, old = analyze_json(FIXTURES / "sglang-chained-capture-k8s.log", "--version", "0.4.3")
    ws = {w["id"]: w for x in old["findings"] for w in x["workarounds"]}
    assert ws["sglang-disable-cuda-graph"]["flags"] == ["--disable-cuda-graph"]


def test_engine_hints_cited_and_never_taken_for_running_flags():
    _, d = analyze_json(FIXTURES / "sglang-chained-capture-k8s.log")
    hints = d["failures"][0]["hints"]
    assert [h["source"] for h in hints] == ["engine-hint"] * len(hints) and len(hints) >= 3
    assert "cuda_graph_runner" in "".join(h["note"] for h in hints) or "graph_runner" in "".join(h["note"] for h in hints)
    assert any(h["remove_flags"] == ["--enable-torch-compile"] for h in hints)
    settings = d["environment"]["settings"]
    assert settings["cuda_graph_max_bs"] == 160  # from server_args, not the hint's "e.g., 16"
    top = d["findings"][0]["workarounds"]
    assert top[0]["source"] == "catalogue"  # the catalogue ranks above the engine's generic advice


def test_state_at_crash_and_startup_phases_in_the_report():
    out = run_cli("analyze", str(FIXTURES / "sglang-nsa-tp8.log")).stdout.decode()
    assert "while serving at" in out and "running requests" in out and "peak before it" in out
    _, d = analyze_json(FIXTURES / "sglang-nsa-tp8.log")
    names = [p["name"] for p in d["timeline"]["phases"]]
    assert names == ["loading weights", "allocating KV cache", "capturing CUDA graphs", "warming up"]
    assert d["timeline"]["ready_seconds"] == 73.0 and d["timeline"]["kv_cache_tokens"]


def test_baseline_flags_a_slower_start_and_novel_lines(tmp_path):
    slow = (FIXTURES / "sglang-clean.log").read_text().replace("22:27:53", "22:29:53").replace("22:27:58", "22:29:58")
    p = tmp_path / "slow.log"
    p.write_text(slow + "[2025-06-24 22:40:00] WARNING: KV cache pool is nearly full, 12 requests retracted\n")
    _, d = analyze_json(p, "--baseline", str(FIXTURES / "sglang-clean.log"))
    b = d["baseline"]
    assert b["slower"] and b["ready_seconds"] > b["baseline_ready_seconds"]
    assert any(ph["slower"] for ph in b["phases"])
    assert any("retracted" in n["template"] for n in b["novel"])


def test_vllm_already_applied_enforce_eager_moves_to_the_next_workaround(tmp_path):
    p = tmp_path / "vllm.log"
    p.write_text("\n".join([
        "INFO 05-12 10:11:05 [api_server.py:1043] vLLM API server version 0.8.5",
        "INFO 05-12 10:11:05 [cli_args.py:325] non-default args: {'model_tag': 'Qwen/Qwen2-72B-Instruct', "
        "'tensor_parallel_size': 2, 'enforce_eager': True, 'gpu_memory_utilization': 0.95, 'max_num_seqs': 256}",
        "ERROR 05-12 10:12:44 [core.py:515] EngineCore failed to start.",
        "ERROR 05-12 10:12:44 [core.py:515] Traceback (most recent call last):",
        'ERROR 05-12 10:12:44 [core.py:515]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1890, in capture_model',
        "ERROR 05-12 10:12:44 [core.py:515]     self._dummy_run(num_tokens)",
        "ERROR 05-12 10:12:44 [core.py:515] RuntimeError: CUDA error: out of memory",
    ]) + "\n")
    _, d = analyze_json(p)
    top = d["findings"][0]
    assert top["signature"] == "vllm-cuda-graph-capture-oom"
    eager = next(w for w in top["workarounds"] if "--enforce-eager" in w["flags"])
    assert eager["status"] == "already-applied"
    first = next(w for w in top["workarounds"] if w["status"] == "recommended")
    assert "--enforce-eager" not in first["flags"]
    assert "--max-num-seqs 128" in first["flags"] or "--gpu-memory-utilization 0.9" in first["flags"]
    assert "--enforce-eager" not in (d["patched_command"] or "").split()[4:] or d["patched_command"].count("--enforce-eager") == 1
