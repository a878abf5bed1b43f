"""Novel warning/error templates: what the failed log says that a healthy one never did."""

from __future__ import annotations

import gzip

import crashlogs

from triage.commands.novel import novel, template, templates, warning_lines

VLLM_HEALTHY = """\
INFO 05-12 10:11:01 [api_server.py:1336] vLLM API server version 0.9.2
WARNING 05-12 10:11:02 [config.py:1363] Default sampling parameters have been overridden by the model's Hugging Face generation config recommended from the model creator. If this is not intended, please relaunch vLLM instance with `--generation-config vllm`.
INFO 05-12 10:11:09 [gpu_model_runner.py:1770] Model loading took 14.9889 GiB and 2.571043 seconds
WARNING 05-12 10:11:20 [fused_moe.py:690] Using default MoE config. Performance might be sub-optimal! Config file not found at /usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/fused_moe/configs/E=64,N=1408,device_name=NVIDIA_A100-SXM4-80GB.json
INFO 05-12 10:11:31 [api_server.py:1407] Starting vLLM API server 0 on http://0.0.0.0:8000
INFO 05-12 10:11:40 [logger.py:43] Received request cmpl-3767d16dc0963935810c3dc30bb47b39-0: prompt: 'Why did my server fail with an error?', params: SamplingParams(n=1, temperature=0.7)
"""

VLLM_FAILED = """\
INFO 05-13 08:00:01 [api_server.py:1336] vLLM API server version 0.9.2
WARNING 05-13 08:00:02 [config.py:1363] Default sampling parameters have been overridden by the model's Hugging Face generation config recommended from the model creator. If this is not intended, please relaunch vLLM instance with `--generation-config vllm`.
WARNING 05-13 08:00:20 [fused_moe.py:690] Using default MoE config. Performance might be sub-optimal! Config file not found at /opt/conda/lib/python3.11/site-packages/vllm/model_executor/layers/fused_moe/configs/E=64,N=704,device_name=NVIDIA_H100_80GB_HBM3.json
INFO 05-13 08:00:31 [api_server.py:1407] Starting vLLM API server 0 on http://0.0.0.0:8001
INFO 05-13 08:00:40 [logger.py:43] Received request cmpl-a1b2c3d4e5f60718293a4b5c6d7e8f90-0: prompt: 'Another error, please', params: SamplingParams(n=1, temperature=0.7)
WARNING 05-13 08:00:41 [scheduler.py:1057] Sequence group cmpl-a1b2c3d4e5f60718293a4b5c6d7e8f90-0 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1
INFO 05-13 08:00:42 [metrics.py:486] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 310.2 tokens/s, Running: 61 reqs, Swapped: 0 reqs, Pending: 3 reqs, GPU KV cache usage: 99.6%, CPU KV cache usage: 0.0%.
WARNING 05-13 08:00:47 [scheduler.py:1057] Sequence group cmpl-0f1e2d3c4b5a69788796a5b4c3d2e1f0-0 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=51
ERROR 05-13 08:00:52 [engine.py:160] RuntimeError('Worker failed with error: CUDA error: an illegal memory access was encountered')
"""


def _sglang_pair():
    healthy = crashlogs.sglang_log(crashlogs.SECOND, crash=False, moe_warning=True)
    failed = crashlogs.sglang_log(crashlogs.FIRST, moe_warning=True, new_warnings=True)
    return healthy, failed


def test_sglang_new_warnings_found_shared_ones_not():
    healthy, failed = _sglang_pair()
    lines = failed.splitlines()
    found = novel(lines, healthy.splitlines())
    by = {t: (n, first) for t, n, first in found}
    split = next(t for t in by if t.startswith("Warning: request"))
    chat = next(t for t in by if "chat template" in t)
    assert by[split][0] == 2 and by[chat][0] == 1
    assert "<n> prompt tokens" in split and "<id>" in split  # numbers and request ids masked
    assert "Warning: request" in lines[by[split][1] - 1] and "chat template" in lines[by[chat][1] - 1]
    assert not any("MoE kernel config" in t for t in by)  # the healthy log prints it too
    assert any("cannot be broadcast" in t for t in by)  # the crash itself is new as well
    counts = [n for _, n, _ in found]
    assert counts == sorted(counts, reverse=True)
    assert len(novel(lines, healthy.splitlines(), limit=2)) == 2


def test_vllm_levels_and_request_logging():
    found = novel(VLLM_FAILED.splitlines(), VLLM_HEALTHY.splitlines())
    assert [(t.split(" ", 1)[0], n, first) for t, n, first in found] == [("WARNING", 2, 6), ("ERROR", 1, 9)]
    assert "is preempted by PreemptionMode.RECOMPUTE" in found[0][0]
    # INFO lines and echoed prompts never count, whatever words they hold
    assert template(5, VLLM_FAILED.splitlines()[4]) is None
    assert template(1, "INFO 05-13 08:00:52 [x.py:1] retrying after error") is None
    assert not any("MoE config" in t for t in templates(VLLM_FAILED.splitlines()) if t not in templates(VLLM_HEALTHY.splitlines()))


def test_warning_lines_streams_only_candidate_lines(tmp_path):
    healthy, failed = _sglang_pair()
    path = tmp_path / "failed.log.gz"
    path.write_bytes(gzip.compress(failed.encode()))
    lines = failed.splitlines()
    got = list(warning_lines(str(path)))
    assert got and all(lines[no - 1] == text for no, text in got)
    assert len(got) < len(lines) / 2  # most lines are never decoded
    assert list(warning_lines(str(path), size=97)) == got  # chunk borders change nothing
    h = tmp_path / "healthy.log"
    h.write_text(healthy)
    assert novel(warning_lines(str(path)), warning_lines(str(h))) == novel(lines, healthy.splitlines())


def test_glog_levels():
    lines = ["I0110 21:30:54.920681 60 server.cc:592] Started GRPCInferenceService at 0.0.0.0:8001",
             "W0110 21:30:55.120681 60 pinned_memory_manager.cc:273] Unable to allocate pinned system memory, pinned memory pool will not be available: CUDA driver version is insufficient for CUDA runtime version",
             "E0110 21:31:02.001 60 model_lifecycle.cc:638] failed to load 'llama' version 1: Internal: unable to create stream"]
    t = templates(lines)
    assert len(t) == 2 and all(k.split(" ", 1)[0] in ("WARNING", "ERROR") for k in t)
