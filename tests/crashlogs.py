"""Realistic crash logs for tests of unknown failures (fingerprints, `triage new`, novel lines).

Modelled on real SGLang and vLLM output: the start-up lines, load lines and tracebacks follow
what the engines print (SGLang prefixes only a traceback's header with the rank; vLLM repeats
its prefix on every line). The crashes themselves are ones the catalogue does not know, and
every builder takes the parts that vary between two occurrences of the same crash: ranks,
timestamps, install prefix, port, tensor shapes, request ids, hex addresses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Variant:
    ranks: tuple[int, ...] = (1, 0)
    day: str = "2025-09-12"
    minute: str = "03:12"
    site: str = "/usr/local/lib/python3.10/dist-packages"
    port: int = 30000
    value_shape: str = "[8, 4, 128]"
    index_shape: str = "[6, 4, 128]"
    rid: str = "3767d16dc0963935810c3dc30bb47b39"
    hex_addr: str = "0x7f3a2c1b5e50"
    pid: int = 4182
    engine_site: str | None = None  # a source checkout (/sgl-workspace/sglang/python); torch stays in `site`


FIRST = Variant()
SECOND = Variant(ranks=(3, 2), day="2026-01-30", minute="17:48", site="/opt/conda/lib/python3.11/site-packages",
                 port=31555, value_shape="[16, 8, 64]", index_shape="[13, 8, 64]",
                 rid="a1b2c3d4e5f60718293a4b5c6d7e8f90", hex_addr="0x55d4c3a0b2c0", pid=90211)
# the lmsysorg/sglang image runs SGLang from a source checkout
CHECKOUT = Variant(ranks=(5, 4, 7, 6), day="2025-11-02", minute="08:01", site="/usr/local/lib/python3.12/dist-packages",
                   engine_site="/sgl-workspace/sglang/python", port=30010, value_shape="[32, 2, 256]",
                   index_shape="[31, 2, 256]", rid="0f1e2d3c4b5a69788796a5b4c3d2e1f0", hex_addr="0x7fb0e4d2a990", pid=77)

_SGL_FRAMES_OUTER = [
    ("sglang/srt/managers/scheduler.py", 2708, "run_scheduler_process", "scheduler.event_loop_overlap()"),
    ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    ("sglang/srt/managers/scheduler.py", 866, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
    ("sglang/srt/managers/scheduler.py", 1951, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
    ("sglang/srt/managers/tp_worker.py", 238, "forward_batch_generation",
     "logits_output, can_run_cuda_graph = self.model_runner.forward("),
    ("sglang/srt/model_executor/model_runner.py", 1874, "forward", "output = self._forward_raw("),
    ("sglang/srt/model_executor/model_runner.py", 1923, "_forward_raw", "ret = self.forward_extend("),
    ("sglang/srt/model_executor/model_runner.py", 1812, "forward_extend", "return self.model.forward("),
    ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    ("sglang/srt/models/qwen3_moe.py", 745, "forward", "hidden_states = self.model("),
    ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1762, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("sglang/srt/models/qwen3_moe.py", 640, "forward", "hidden_states, residual = layer("),
    ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1762, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("sglang/srt/models/qwen3_moe.py", 571, "forward", "hidden_states = self.self_attn("),
    ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1762, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("sglang/srt/models/qwen3_moe.py", 489, "forward", "attn_output = self.attn(q, k, v, forward_batch)"),
    ("torch/nn/modules/module.py", 1751, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1762, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("sglang/srt/layers/radix_attention.py", 108, "forward", "return forward_batch.attn_backend.forward("),
    ("sglang/srt/layers/attention/base_attn_backend.py", 81, "forward", "return self.forward_extend("),
]
KV_FRAMES = [
    ("sglang/srt/layers/attention/flashinfer_backend.py", 520, "forward_extend",
     "forward_batch.token_to_kv_pool.set_kv_buffer("),
    ("sglang/srt/mem_cache/memory_pool.py", 452, "set_kv_buffer", "self.k_buffer[layer_id - self.start_layer][loc] = cache_k"),
]
DTYPE_FRAMES = [
    ("sglang/srt/layers/attention/flashinfer_backend.py", 548, "forward_extend", "o = prefill_wrapper_paged.forward("),
    ("sglang/srt/layers/attention/flashinfer_backend.py", 612, "_run_paged_prefill", "return self._wrapper.run(q, k_cache, v_cache)"),
]


def _stamp(v: Variant, sec: int) -> str:
    return f"{v.day} {v.minute}:{sec:02d}"


def sglang_traceback(v: Variant, rank: int, exception_line: str, inner: list | None = None) -> list[str]:
    frames = _SGL_FRAMES_OUTER + (KV_FRAMES if inner is None else inner)
    out = [f"[{_stamp(v, 44)} TP{rank}] Scheduler hit an exception: Traceback (most recent call last):"]
    for path, line, func, code in frames:
        root = v.site if path.startswith("torch/") else (v.engine_site or v.site)
        out.append(f'  File "{root}/{path}", line {line}, in {func}')
        out.append(f"    {code}")
    out.append(exception_line)
    out.append("")
    return out


def shape_mismatch(v: Variant) -> str:
    return (f"RuntimeError: shape mismatch: value tensor of shape {v.value_shape} cannot be broadcast "
            f"to indexing result of shape {v.index_shape}")


def sglang_log(v: Variant = FIRST, exception_line: str | None = None, inner: list | None = None,
               crash: bool = True, moe_warning: bool = False, new_warnings: bool = False) -> str:
    """An SGLang TP server (tp_size = number of ranks) that serves, then dies in one forward pass.

    `moe_warning`: the usual start-up warning about a missing MoE kernel config (one a rank);
    `new_warnings`: two more warnings, one of them printed twice with different numbers."""
    tp = len(v.ranks)
    ranks = sorted(v.ranks)
    lines = [
        f"[{_stamp(v, 1)}] server_args=ServerArgs(model_path='Qwen/Qwen3-30B-A3B', tokenizer_path='Qwen/Qwen3-30B-A3B', "
        f"tokenizer_mode='auto', load_format='auto', trust_remote_code=False, dtype='auto', kv_cache_dtype='auto', "
        f"quantization=None, context_length=None, device='cuda', host='0.0.0.0', port={v.port}, "
        f"mem_fraction_static=0.85, chunked_prefill_size=8192, max_prefill_tokens=16384, page_size=1, "
        f"tp_size={tp}, pp_size=1, dp_size=1, attention_backend='flashinfer', sampling_backend='flashinfer', "
        f"enable_dp_attention=False, disable_radix_cache=False, disable_cuda_graph=False, cuda_graph_max_bs=160, "
        f"enable_torch_compile=False, log_level='info')",
    ]
    for r in ranks:
        lines.append(f"[{_stamp(v, 3)} TP{r}] Init torch distributed begin.")
    for r in ranks:
        lines.append(f"[{_stamp(v, 4)} TP{r}] Init torch distributed ends. mem usage=0.62 GB")
    for r in ranks:
        lines.append(f"[{_stamp(v, 4)} TP{r}] Load weight begin. avail mem=77.52 GB")
    if moe_warning:
        for r in ranks:
            lines.append(f"[{_stamp(v, 5)} TP{r}] Using default MoE kernel config. Performance might be sub-optimal! "
                         f"Config file not found at {v.site}/sglang/srt/layers/moe/fused_moe_triton/configs/"
                         f"E=128,N={768 // tp},device_name=NVIDIA_H100_80GB_HBM3.json")
    for r in ranks:
        lines.append(f"[{_stamp(v, 9)} TP{r}] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, "
                     f"avail mem=48.{10 + r} GB, mem usage=29.41 GB.")
    for r in ranks:
        lines.append(f"[{_stamp(v, 9)} TP{r}] KV Cache is allocated. #tokens: 412345, K size: 18.87 GB, V size: 18.87 GB")
    for r in ranks:
        lines.append(f"[{_stamp(v, 10)} TP{r}] Capture cuda graph begin. This can take up to several minutes. avail mem=9.2{r} GB")
    for r in ranks:
        lines.append(f"[{_stamp(v, 21)} TP{r}] Capture cuda graph end. Time elapsed: 11.3{r} s. mem usage=1.20 GB. avail mem=8.01 GB.")
    lines += [
        f"[{_stamp(v, 22)}] INFO:     Started server process [{v.pid}]",
        f"[{_stamp(v, 22)}] INFO:     Waiting for application startup.",
        f"[{_stamp(v, 22)}] INFO:     Application startup complete.",
        f"[{_stamp(v, 22)}] INFO:     Uvicorn running on http://0.0.0.0:{v.port} (Press CTRL+C to quit)",
        f"[{_stamp(v, 23)}] INFO:     127.0.0.1:51234 - \"GET /get_model_info HTTP/1.1\" 200 OK",
        f"[{_stamp(v, 24)} TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
        f"#running-req: 0, #queue-req: 0",
        f"[{_stamp(v, 25)}] INFO:     127.0.0.1:51240 - \"POST /generate HTTP/1.1\" 200 OK",
        f"[{_stamp(v, 25)}] The server is fired up and ready to roll!",
    ]
    if new_warnings:
        lines.append(f"[{_stamp(v, 26)}] Warning: the chat template of Qwen/Qwen3-30B-A3B does not support tool calls; "
                     f"tool_choice is ignored")
    for i in range(3):
        rid = v.rid[: 32 - i] + "f" * i
        lines.append(f"[{_stamp(v, 30 + i)}] Receive: obj=GenerateReqInput(rid='{rid}', text=None, input_ids=None, "
                     f"sampling_params={{'temperature': 0.7, 'max_new_tokens': 512}}, stream=True)")
        lines.append(f"[{_stamp(v, 30 + i)} TP0] Prefill batch. #new-seq: 1, #new-token: {1024 + 17 * i}, #cached-token: {64 * i}, "
                     f"token usage: 0.0{i + 1}, #running-req: {i}, #queue-req: 0")
        if new_warnings and i:
            lines.append(f"[{_stamp(v, 30 + i)} TP0] Warning: request {rid} with {4000 + 123 * i} prompt tokens "
                         f"exceeds the prefill chunk; it is split into {i + 1} chunks")
        lines.append(f"[{_stamp(v, 31 + i)} TP0] Decode batch. #running-req: {i + 1}, #token: {1100 + 40 * i}, token usage: 0.0{i + 1}, "
                     f"cuda graph: True, gen throughput (token/s): {95 + i}.12, #queue-req: 0")
    if not crash:
        lines.append(f"[{_stamp(v, 40)}] INFO:     Shutting down")
        lines.append(f"[{_stamp(v, 40)}] INFO:     Finished server process [{v.pid}]")
        return "\n".join(lines) + "\n"
    lines.append(f"[{_stamp(v, 43)} TP0] Prefill batch. #new-seq: 4, #new-token: 3172, #cached-token: 1536, token usage: 0.05, "
                 f"#running-req: 3, #queue-req: 0")
    exc = exception_line or shape_mismatch(v)
    for r in v.ranks:  # the rank that fails first prints first
        lines += sglang_traceback(v, r, exc, inner)
    lines += [
        f"[{_stamp(v, 44)}] Received sigquit from a child process. It usually means the child failed.",
        "Killed",
    ]
    return "\n".join(lines) + "\n"


def vllm_log(v: Variant = FIRST, exception_line: str | None = None) -> str:
    """A vLLM V1 server whose engine core dies in the scheduler while serving."""
    day = v.day[5:]
    ts = f"{day} {v.minute}"
    core = f"ERROR {ts}:40 [core.py:588]"
    site = v.site
    exc = exception_line or (f"AssertionError: request cmpl-{v.rid}-0 is not in the running queue "
                             f"(<vllm.v1.request.Request object at {v.hex_addr}>)")
    lines = [
        f"INFO {ts}:01 [api_server.py:1336] vLLM API server version 0.9.2",
        f"INFO {ts}:01 [cli_args.py:309] non-default args: {{'model': 'meta-llama/Llama-3.1-8B-Instruct', 'port': {v.port}}}",
        f"INFO {ts}:09 [config.py:841] This model supports multiple tasks: {{'generate', 'classify', 'embed', 'reward'}}. Defaulting to 'generate'.",
        f"INFO {ts}:12 [core.py:526] Waiting for init message from front-end.",
        f"INFO {ts}:15 [gpu_model_runner.py:1770] Model loading took 14.9889 GiB and 2.571043 seconds",
        f"INFO {ts}:22 [gpu_worker.py:232] Available KV cache memory: 53.66 GiB",
        f"INFO {ts}:22 [kv_cache_utils.py:716] GPU KV cache size: 439,536 tokens",
        f"INFO {ts}:31 [gpu_model_runner.py:2326] Graph capturing finished in 9 secs, took 0.54 GiB",
        f"INFO {ts}:32 [api_server.py:1407] Starting vLLM API server 0 on http://0.0.0.0:{v.port}",
        f"INFO {ts}:33 [loggers.py:118] Engine 000: Avg prompt throughput: 112.4 tokens/s, Avg generation throughput: "
        f"301.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 41.0%",
        f"{core} EngineCore encountered a fatal error.",
        f"{core} Traceback (most recent call last):",
    ]
    frames = [
        ("vllm/v1/engine/core.py", 579, "run_engine_core", "engine_core.run_busy_loop()"),
        ("vllm/v1/engine/core.py", 606, "run_busy_loop", "self._process_engine_step()"),
        ("vllm/v1/engine/core.py", 631, "_process_engine_step", "outputs, model_executed = self.step_fn()"),
        ("vllm/v1/engine/core.py", 235, "step", "engine_core_outputs = self.scheduler.update_from_output("),
        ("vllm/v1/core/sched/scheduler.py", 786, "update_from_output", "self.running.remove(request)"),
    ]
    for path, line, func, code in frames:
        lines.append(f'{core}   File "{site}/{path}", line {line}, in {func}')
        lines.append(f"{core}     {code}")
    lines.append(f"{core} {exc}")
    lines.append(f"ERROR {ts}:40 [async_llm.py:420] AsyncLLM output_handler failed.")
    return "\n".join(lines) + "\n"
