"""A fake SGLang server for the `watch` and `run` tests: writes a realistic log over a second or two.

    python fakeserver.py SCENARIO [--log PATH] [--delay SECONDS]

Without --log it writes to stdout (for `triage run`). The lines are modelled on
fixtures/sglang-nsa-tp8.log (startup, load, crash) and fixtures/sglang-chained-capture-k8s.log
(crash during CUDA-graph capture). Scenarios:

  ready          starts up, becomes ready, serves a few batches, exits 0
  capture-crash  crashes while capturing CUDA graphs, exits 1
  load-crash     becomes ready, serves, then crashes under load (NSA page_table_1_flattened), exits 1
  hang           stops writing while capturing CUDA graphs and sleeps (until killed)
  rotate         renames the log to PATH.1 half-way through loading and goes on in a new PATH
  late           creates the log only after 1 s, then starts up and becomes ready
  sigint         becomes ready, then serves until SIGINT: writes a line and exits 42
  crash-exit     crashes during capture, exits 7

Scenarios for `run --retry`, each a catalogued failure that a launch change avoids; SGLang flags
after the scenario are taken as the server's own and printed in its ServerArgs line:

  nsa            ready, then dies under load of sglang-nsa-page-table-1-flattened unless
                 --disable-radix-cache is given; with it, serves and exits 0
  compile        dies capturing CUDA graphs of sglang-torch-compile-stream-capturing while
                 --enable-torch-compile is given; without it, ready, then serves until stopped
                 (a server left running at ready must still be running when triage sees ready)
  detok          ready, then the detokenizer dies (sglang-detokenizer-decode-status-evicted)
                 unless SGLANG_DETOKENIZER_MAX_STATES is set; with it, serves and exits 0
  unknown        dies while loading of an exception no signature describes
  gpu-lost       a GPU falls off the bus while loading (cuda-gpu-fallen-off-bus), exits 1
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass

TS = "2025-06-24 22:26:47"
TP = 2



def server_args(flags: list[str]) -> str:
    return (f"[{TS}] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3.2-Exp', tp_size={TP}, "
            f"attention_backend='nsa', kv_cache_dtype='fp8_e4m3', disable_radix_cache={'--disable-radix-cache' in flags}, "
            "disable_cuda_graph=False, cuda_graph_max_bs=256, "
            f"enable_torch_compile={'--enable-torch-compile' in flags}, watchdog_timeout=300)")


HEAD = [
    *(f"[{TS} TP{r}] Attention backend not set. Use nsa backend by default." for r in range(TP)),
    *(f"[{TS} TP{r}] Init torch distributed begin." for r in range(TP)),
    *(f"[{TS} TP{r}] Init torch distributed ends. mem usage=1.33 GB" for r in range(TP)),
    *(f"[{TS} TP{r}] Load weight begin. avail mem=137.09 GB" for r in range(TP)),
]
LOAD = [f"[{TS} TP0] Loading safetensors checkpoint shards: {p:3d}% Completed | {n}/163 [00:02<00:38, 4.28it/s]"
        for p, n in ((0, 0), (27, 45), (55, 90), (82, 134), (100, 163))]
KV = [
    *(f"[{TS} TP{r}] Load weight end. type=DeepseekV32ForCausalLM, dtype=torch.bfloat16, avail mem=58.65 GB, "
      "mem usage=79.15 GB." for r in range(TP)),
    *(f"[{TS} TP{r}] KV Cache is allocated. #tokens: 1154304, KV size: 41.16 GB" for r in range(TP)),
]
CAPTURE = [
    *(f"[{TS} TP{r}] Capture cuda graph begin. This can take up to several minutes. avail mem=14.34 GB"
      for r in range(TP)),
    "Capturing batches (bs=256 avail_mem=12.16 GB):   5%|          | 1/19 [00:01<00:18,  0.98it/s]",
    "Capturing batches (bs=64 avail_mem=13.18 GB):  47%|████      | 9/19 [00:09<00:10,  0.91it/s]",
]
CAPTURE_END = [
    "Capturing batches (bs=1 avail_mem=12.12 GB): 100%|██████████| 19/19 [00:19<00:00,  0.83it/s]",
    *(f"[{TS} TP{r}] Capture cuda graph end. Time elapsed: 22.09 s. mem usage=1.16 GB. avail mem=12.68 GB."
      for r in range(TP)),
    f"[{TS} TP0] max_total_num_tokens=1154304, chunked_prefill_size=8192, max_prefill_tokens=16384, "
    "max_running_requests=4096, context_len=163840, available_gpu_mem=12.31 GB",
    f"[{TS}] INFO:     Started server process [3852]",
    f"[{TS}] INFO:     Waiting for application startup.",
    f"[{TS}] INFO:     Application startup complete.",
    f"[{TS}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    f"[{TS}] INFO:     127.0.0.1:40580 - \"GET /get_model_info HTTP/1.1\" 200 OK",
    f"[{TS} TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
    "#running-req: 0, #queue-req: 0",
    f"[{TS}] INFO:     127.0.0.1:63838 - \"POST /generate HTTP/1.1\" 200 OK",
    f"[{TS}] The server is fired up and ready to roll!",
]
SERVE = [
    f"[{TS} TP0] Decode batch. #running-req: {n}, #token: {n * 2000}, token usage: 0.{n:02d}, cuda graph: True, "
    f"gen throughput (token/s): {n * 13.4:.2f}, #queue-req: 0"
    for n in (1, 8, 60, 209)
]
CAPTURE_CRASH = [
    f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 255, in __init__',
    "    self.capture()",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 340, in capture',
    "    ) = self.capture_one_batch_size(bs, forward)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/_ops.py", line 756, in __call__',
    "    return self._op(*args, **kwargs)",
    "RuntimeError: CUDA error: operation not permitted when stream is capturing",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 741, in init_cuda_graphs',
    "    self.cuda_graph_runner = CudaGraphRunner(self)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 257, in __init__',
    "    raise Exception(",
    "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing",
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
    "",
    f"[{TS}] Received sigquit from a child process. It usually means the child failed.",
]


def _load_crash() -> list[str]:
    out: list[str] = []
    for r in range(TP):
        out += [
            f"[{TS} TP{r}] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2708, in run_scheduler_process',
            "    scheduler.event_loop_overlap()",
            '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1951, in run_batch',
            "    batch_result = self.model_worker.forward_batch_generation(",
            '  File "/sgl-workspace/sglang/python/sglang/srt/layers/attention/nsa_backend.py", line 911, in forward_extend',
            "    return forward_mha_extend(q, k, v, layer, forward_batch, metadata)",
            '  File "/sgl-workspace/sglang/python/sglang/srt/layers/attention/nsa/forward_mha.py", line 443, in forward_mha_extend',
            "    page_table = metadata.page_table_1_flattened",
            "AttributeError: 'PrefillMetadata' object has no attribute 'page_table_1_flattened'",
            "",
        ]
    return out + [f"[{TS}] Received sigquit from a child process. It usually means the child failed."]


LOAD_CRASH = _load_crash()


def prefill(cached: bool) -> list[str]:
    """Requests sharing a system prompt: the radix cache serves 3 of every 4 prompt tokens."""
    return [f"[{TS} TP0] Prefill batch. #new-seq: 4, #new-token: {2048 if cached else 8192}, "
            f"#cached-token: {6144 if cached else 0}, token usage: 0.{n:02d}, #running-req: {n}, #queue-req: 0"
            for n in (8, 60)]


DETOK_CRASH = [
    f"[{TS}] DetokenizerManager hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/detokenizer_manager.py", line 224, in run_detokenizer_process',
    "    manager.event_loop()",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/detokenizer_manager.py", line 158, in event_loop',
    "    s = self.decode_status[recv_obj.rids[i]]",
    "KeyError: 'dc49ad867dc144249f59f4e85c7229cd'",
    "",
    f"[{TS}] Received sigquit from a child process. It usually means the child failed.",
]

UNKNOWN_CRASH = [
    f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2708, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/frobnicate.py", line 77, in frobnicate_shards',
    "    raise ValueError(f\"shard {idx} frobnication checksum mismatch: {got:#x} != {want:#x}\")",
    "ValueError: shard 17 frobnication checksum mismatch: 0x3f2a != 0x3f2b",
    "",
    f"[{TS}] Received sigquit from a child process. It usually means the child failed.",
]

GPU_LOST = [
    "NVRM: Xid (PCI:0000:06:00): 79, pid=3852, GPU has fallen off the bus.",
    f"[{TS} TP1] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2708, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py", line 399, in synchronize',
    "    return torch._C._cuda_synchronize()",
    "RuntimeError: CUDA error: unspecified launch failure",
    "",
    f"[{TS}] Received sigquit from a child process. It usually means the child failed.",
]


def retry_scenario(name: str, log: Log, flags: list[str]) -> int:
    """The scenarios a launch change gets past; see the module docstring."""
    if name in ("unknown", "gpu-lost"):
        log.write(HEAD + LOAD[:2] + (UNKNOWN_CRASH if name == "unknown" else GPU_LOST))
        return 1
    log.write(HEAD + LOAD + KV + CAPTURE)
    if name == "compile" and "--enable-torch-compile" in flags:
        log.write(CAPTURE_CRASH)
        return 1
    log.write(CAPTURE_END + SERVE[:2] + prefill(cached="--disable-radix-cache" not in flags) + SERVE[2:])
    if name == "nsa" and "--disable-radix-cache" not in flags:
        log.write(LOAD_CRASH)
        return 1
    if name == "detok" and not os.environ.get("SGLANG_DETOKENIZER_MAX_STATES"):
        log.write(DETOK_CRASH)
        return 1
    log.write(SERVE[-1:])
    if name == "compile":
        time.sleep(60)  # the test stops it; exiting at once would race the watcher's look at ready
    return 0


@dataclass
class Pause:
    seconds: float


class Rotate:
    """Move the log to PATH.1 and go on in a new PATH."""


Step = list[str] | Pause | Rotate
EXIT_STATUS = {"capture-crash": 1, "crash-exit": 7, "load-crash": 1}


def script(scenario: str, flags: list[str] | tuple[str, ...] = ()) -> list[Step]:
    """What a scenario writes, in order, with its pauses: played by this process in real time
    (`main`), or by a test on a clock of its own (tests/test_watch.py). `sigint` and the retry
    scenarios are not scripts: they depend on a signal or on their launch."""
    steps: list[Step] = []
    if scenario == "late":
        steps.append(Pause(1.0))
    steps.append([server_args(list(flags)), *HEAD, *LOAD[:3]])
    if scenario == "rotate":
        # in real time, a watcher started after this server (and importing for a while on a busy
        # machine) should see the first file before it moves; on a test's clock it always does
        steps += [Pause(2.0), Rotate()]
    steps.append(LOAD[3:] + KV + CAPTURE)
    if scenario == "hang":
        return [*steps, Pause(60.0)]
    if scenario in ("capture-crash", "crash-exit"):
        return [*steps, CAPTURE_CRASH]
    steps.append(CAPTURE_END + SERVE)
    if scenario == "load-crash":
        steps += [Pause(0.5), SERVE + LOAD_CRASH]
    return steps


class Log:
    def __init__(self, path: str | None, delay: float) -> None:
        self.path, self.delay = path, delay
        self.fh = open(path, "a", encoding="utf-8") if path else sys.stdout  # noqa: SIM115

    def write(self, lines: list[str]) -> None:
        for ln in lines:
            self.fh.write(ln + "\n")
            self.fh.flush()
            time.sleep(self.delay)

    def rotate(self) -> None:
        assert self.path is not None
        self.fh.close()
        os.rename(self.path, self.path + ".1")
        self.fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def play(self, steps: list[Step]) -> None:
        for step in steps:
            if isinstance(step, Pause):
                time.sleep(step.seconds)
            elif isinstance(step, Rotate):
                self.rotate()
            else:
                self.write(step)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--log")
    ap.add_argument("--delay", type=float, default=0.01)
    a, flags = ap.parse_known_args()
    if a.scenario in ("nsa", "compile", "detok", "unknown", "gpu-lost"):
        log = Log(a.log, a.delay)
        log.write([server_args(flags)])
        return retry_scenario(a.scenario, log, flags)
    if a.scenario == "sigint":
        def on_sigint(_sig: int, _frame: object) -> None:
            log.write([f"[{TS}] Received SIGINT, shutting down gracefully."])
            sys.exit(42)
        signal.signal(signal.SIGINT, on_sigint)
        log = Log(a.log, a.delay)
        log.play(script("ready", flags))
        while True:
            log.write(SERVE[:1])
            time.sleep(0.2)
    steps = script(a.scenario, flags)
    if steps and isinstance(steps[0], Pause):  # "late": the file itself appears only after the pause
        time.sleep(steps.pop(0).seconds)
    log = Log(a.log, a.delay)
    log.play(steps)
    return EXIT_STATUS.get(a.scenario, 0)


if __name__ == "__main__":
    sys.exit(main())
