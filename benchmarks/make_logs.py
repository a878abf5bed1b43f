#!/usr/bin/env python3
"""Write a synthetic inference-server log of a given shape and size, deterministically.

Shapes:
  quiet  SGLang server (tensor parallel): ServerArgs line, per-rank startup (distributed init,
         weight loading, KV cache, CUDA graph capture), "fired up", then steady traffic:
         Prefill/Decode batch lines, HTTP access lines, --log-requests Receive/Finish lines,
         an occasional warning. With --crash (default) it ends in a multi-rank scheduler
         traceback and the launcher's "Received sigquit" lines.
  noisy  quiet plus --tracebacks request-level tracebacks the server survived (Exception in
         ASGI application with a jinja2 TemplateError, "Error in request" with a 400, a context
         length ValueError, a pydantic ValidationError, an exception group), spread evenly
         through the log, then the real crash near the end.
  long   quiet plus one line of --line-bytes (default ~1 MB) every --long-every lines: a
         request or response echo whose text holds a pasted error ("CUDA out of memory",
         "an illegal memory access was encountered", ...), i.e. a catalogue keyword on a line
         that is request content, not a failure.
  vllm   vLLM V1 server: "(APIServer pid=N) INFO MM-DD hh:mm:ss [file.py:N]" lines,
         EngineCore_DP0 / Worker_TPn processes, "Avg prompt throughput ... Running: N reqs
         ... Prefix cache hit rate" stats, access and request lines; the crash is a worker's
         CUDA error, the EngineCore fatal-error traceback and the API server's EngineDeadError.

The output is a pure function of the arguments (seeded PRNG, fixed start time) and is written
as it is generated, so any size streams in constant memory. --meta writes a JSON description
of what was planted (crash lines and message, request tracebacks, long lines) for checks.

Examples:
  python3 benchmarks/make_logs.py quiet --size-mb 1024 --out /tmp/quiet.log
  python3 benchmarks/make_logs.py noisy --size-mb 1024 --tracebacks 10000 --out /tmp/noisy.log
  python3 benchmarks/make_logs.py long --size-mb 64 --no-crash --out /tmp/long.log --meta /tmp/long.json
"""

from __future__ import annotations

import argparse
import calendar
import json
import random
import sys
import time

SHAPES = ("quiet", "noisy", "long", "vllm")
SGLANG_CRASHES = ("nsa-attr", "cuda-oom", "illegal-address", "req-slots")
DEFAULT_CRASH = {"quiet": "nsa-attr", "noisy": "cuda-oom", "long": "nsa-attr", "vllm": "illegal-address"}
TRACEBACKS_PER_GIB = 10_000

SITE = "/usr/local/lib/python3.12/dist-packages"
SGL = SITE + "/sglang"
VLLM = SITE + "/vllm"
TORCH = SITE + "/torch"

VOCAB = """
a about above after again all also always an and answer any are array as ask assistant at back
batch be because been before being below between both but by cache call can change check class
code come config context could data day debug different do does done down each error even every
example explain file first fix for from function get give good graph great had has have help her
here him his how if import in index input into is it its just key know last let like line list
long look make many may memory message method might model more most much must my need never new
next no not now number of off old on one only or order other our out output over own part people
place please point process prompt python question quite read reason request return right same say
see server should show since small so some something state step still story string such summary
system table take tell than that the their them then there these they thing think this those
through time to token tokens too translate two under until up use user value very want was way we
well were what when where which while who why will with word work world would write year yes you
your
""".split()  # noqa: SIM905

ENDPOINTS = [("POST", "/v1/chat/completions")] * 62 + [("POST", "/generate")] * 14 + \
            [("POST", "/v1/completions")] * 8 + [("GET", "/health")] * 12 + \
            [("GET", "/metrics")] * 3 + [("GET", "/v1/models")]


# --------------------------------------------------------------------------- output, clock

class Sink:
    """Collects lines, writes them out in ~1 MiB blocks; counts lines and (approximate) bytes."""

    FLUSH = 1 << 20

    def __init__(self, fh):
        self.fh = fh
        self.parts: list[str] = []
        self.pending = 0
        self.written = 0
        self.lines = 0
        self.last = 0  # length of the last line added

    def add(self, line: str) -> None:
        self.parts.append(line)
        self.last = len(line)
        self.pending += self.last + 1
        self.lines += 1
        if self.pending >= self.FLUSH:
            self.flush()

    @property
    def size(self) -> int:
        return self.written + self.pending

    def flush(self) -> None:
        if self.parts:
            self.parts.append("")
            data = "\n".join(self.parts).encode("utf-8")
            self.fh.write(data)
            self.written += len(data)
            self.parts = []
            self.pending = 0


class Clock:
    def __init__(self, start: str):
        self.t = float(calendar.timegm(time.strptime(start, "%Y-%m-%d %H:%M:%S")))
        self._sec = -1
        self._full = self._short = ""

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def _refresh(self) -> None:
        sec = int(self.t)
        if sec != self._sec:
            self._sec = sec
            tm = time.gmtime(sec)
            self._full = time.strftime("%Y-%m-%d %H:%M:%S", tm)
            self._short = self._full[5:]  # MM-DD hh:mm:ss, as vLLM prints it

    def full(self) -> str:
        self._refresh()
        return self._full

    def short(self) -> str:
        self._refresh()
        return self._short


class Recorder:
    """A Sink stand-in that keeps lines in a list: used to measure a block before writing it."""

    def __init__(self):
        self.lines: list[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)

    @property
    def size(self) -> int:
        return sum(len(s) + 1 for s in self.lines)


# --------------------------------------------------------------------------- SGLang

class SGLangServer:
    def __init__(self, a, sink: Sink, clock: Clock, rng: random.Random):
        self.a, self.out, self.clock, self.rng = a, sink, clock, rng
        self.tp = a.tp_size
        self.model = "deepseek-ai/DeepSeek-V3.1-Terminus"
        self.host_pid = 7000 + rng.randrange(20000)
        self.running = 0
        self.queue = 0
        self.usage = 0.0
        self.level = 0.4
        self.rids: list[str] = []
        self.max_tokens = 1_015_808
        self.warn_every = 5000  # one warning in this many traffic lines, on average

    # prefixes
    def p(self, rank: int | None = None) -> str:
        if rank is None:
            return f"[{self.clock.full()}] "
        return f"[{self.clock.full()} TP{rank}] "

    def words(self, lo: int, hi: int) -> str:
        return " ".join(self.rng.choices(VOCAB, k=self.rng.randint(lo, hi)))

    # ---- startup
    def startup(self) -> None:
        r, add, tp = self.rng, self.out.add, self.tp
        args = [
            ("model_path", repr(self.model)), ("tokenizer_path", repr(self.model)),
            ("tokenizer_mode", "'auto'"), ("load_format", "'auto'"), ("trust_remote_code", "True"),
            ("context_length", "None"), ("is_embedding", "False"), ("dtype", "'auto'"),
            ("kv_cache_dtype", "'auto'"), ("quantization", "'fp8'"), ("device", "'cuda'"),
            ("host", "'0.0.0.0'"), ("port", "30000"), ("mem_fraction_static", "0.83"),
            ("max_running_requests", "None"), ("max_total_tokens", "None"),
            ("chunked_prefill_size", "8192"), ("max_prefill_tokens", "16384"),
            ("schedule_policy", "'fcfs'"), ("page_size", "64"), ("tp_size", str(tp)), ("pp_size", "1"),
            ("dp_size", "1"), ("ep_size", "1"), ("random_seed", str(r.randrange(10**9))),
            ("watchdog_timeout", "300"), ("log_level", "'info'"),
            ("log_requests", str(self.a.log_requests > 0)), ("log_requests_level", str(self.a.log_requests)),
            ("enable_metrics", "True"), ("decode_log_interval", "40"), ("api_key", "None"),
            ("attention_backend", "'nsa'"), ("sampling_backend", "'flashinfer'"),
            ("grammar_backend", "'xgrammar'"), ("speculative_algorithm", "None"),
            ("enable_dp_attention", "False"), ("disable_radix_cache", "False"),
            ("disable_cuda_graph", "False"), ("cuda_graph_max_bs", "160"),
            ("enable_torch_compile", "False"), ("reasoning_parser", "'deepseek-v3'"),
            ("tool_call_parser", "'deepseekv31'"), ("disaggregation_mode", "'null'"),
        ]
        add(self.p() + "server_args=ServerArgs(" + ", ".join(f"{k}={v}" for k, v in args) + ")")
        self.clock.advance(3.2)
        for k in range(tp):
            add(self.p(k) + "Init torch distributed begin.")
        for k in range(tp):
            pid = self.host_pid + 1 + k
            add(f"node-0:{pid}:{pid} [{k}] NCCL INFO Bootstrap: Using eth0:10.8.{r.randrange(256)}.{r.randrange(1, 255)}<0>")
            add(f"node-0:{pid}:{pid} [{k}] NCCL INFO NCCL version 2.27.3+cuda12.8")
        self.clock.advance(2.4)
        for k in range(tp):
            add(self.p(k) + f"Init torch distributed ends. mem usage={r.uniform(0.4, 1.2):.2f} GB")
            add(self.p(k) + f"Load weight begin. avail mem={r.uniform(136.0, 138.5):.2f} GB")
        shards = 163
        for i in range(11):
            self.clock.advance(r.uniform(6, 9))
            done = shards * i // 10
            add(self.p(0) + f"Loading safetensors checkpoint shards: {10 * i:3d}% Completed | {done}/{shards} "
                f"[{i // 2:02d}:{(i * 37) % 60:02d}<{(10 - i) // 2:02d}:{(i * 23) % 60:02d}, {r.uniform(2.5, 4.5):.2f}it/s]")
        for k in range(tp):
            add(self.p(k) + f"Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, "
                f"avail mem={r.uniform(52, 58):.2f} GB, mem usage={r.uniform(79, 84):.2f} GB.")
        for k in range(tp):
            add(self.p(k) + f"KV Cache is allocated. #tokens: {self.max_tokens}, KV size: {r.uniform(38, 42):.2f} GB")
            add(self.p(k) + f"Memory pool end. avail mem={r.uniform(13, 16):.2f} GB")
        for k in range(tp):
            add(self.p(k) + f"Capture cuda graph begin. This can take up to several minutes. avail mem={r.uniform(13, 16):.2f} GB")
        sizes = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160]
        for i, bs in enumerate(reversed(sizes), 1):
            self.clock.advance(r.uniform(0.6, 1.6))
            bar = ("\u2588" * (10 * i // len(sizes))).ljust(10)
            add(f"Capturing batches (bs={bs} avail_mem={r.uniform(11, 13):.2f} GB): {100 * i // len(sizes):3d}%|{bar}| "
                f"{i}/{len(sizes)} [00:{i:02d}<00:{len(sizes) - i:02d}, {r.uniform(0.7, 1.3):.2f}it/s]")
        for k in range(tp):
            add(self.p(k) + f"Capture cuda graph end. Time elapsed: {r.uniform(14, 30):.2f} s. "
                f"mem usage={r.uniform(0.8, 2.2):.2f} GB. avail mem={r.uniform(10, 12):.2f} GB.")
        add(self.p(0) + f"max_total_num_tokens={self.max_tokens}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests=4096, context_len=163840, available_gpu_mem={r.uniform(10, 12):.2f} GB")
        self.clock.advance(1.1)
        add(self.p() + f"INFO:     Started server process [{self.host_pid}]")
        add(self.p() + "INFO:     Waiting for application startup.")
        add(self.p() + "INFO:     Application startup complete.")
        add(self.p() + "INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
        self.clock.advance(0.9)
        add(self.p() + f'INFO:     127.0.0.1:{r.randint(32768, 60999)} - "GET /get_model_info HTTP/1.1" 200 OK')
        add(self.p(0) + "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, "
            "#running-req: 0, #queue-req: 0")
        self.clock.advance(2.7)
        add(self.p() + f'INFO:     127.0.0.1:{r.randint(32768, 60999)} - "POST /generate HTTP/1.1" 200 OK')
        add(self.p() + "The server is fired up and ready to roll!")
        self.running = self.queue = 0
        self.usage = 0.0
        self.rids = []

    # ---- steady state
    def _walk(self) -> None:
        r = self.rng
        if r.random() < 0.0003:
            self.level = r.choice((0.1, 0.25, 0.4, 0.4, 0.55, 0.7, 0.9))
        self.usage = min(0.99, max(0.0, self.usage + 0.06 * (self.level - self.usage) + r.uniform(-0.02, 0.02)))
        target = int(self.usage * 700)
        self.running = max(0, self.running + (target - self.running) // 6 + r.randint(-4, 4))
        self.queue = max(0, self.queue + (3 if self.usage > 0.9 else -2) + r.randint(-1, 1))

    def decode(self) -> None:
        self._walk()
        r = self.rng
        self.out.add(self.p(0) + f"Decode batch. #running-req: {self.running}, #token: {int(self.usage * self.max_tokens)}, "
                     f"token usage: {self.usage:.2f}, cuda graph: {self.running <= 160}, "
                     f"gen throughput (token/s): {self.running * r.uniform(7.5, 13.5):.2f}, #queue-req: {self.queue}")

    def prefill(self) -> None:
        r = self.rng
        seqs = r.randint(1, 12)
        cached = 0 if r.random() < 0.55 else r.randint(64, 48000)
        self.out.add(self.p(0) + f"Prefill batch. #new-seq: {seqs}, #new-token: {r.randint(16 * seqs, 8192)}, "
                     f"#cached-token: {cached}, token usage: {self.usage:.2f}, "
                     f"#running-req: {self.running}, #queue-req: {self.queue}")

    def access(self, code: int = 200) -> None:
        r = self.rng
        method, path = r.choice(ENDPOINTS)
        text = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[code]
        self.out.add(self.p() + f'INFO:     10.{r.randrange(256)}.{r.randrange(256)}.{r.randint(1, 254)}:{r.randint(32768, 60999)} '
                     f'- "{method} {path} HTTP/1.1" {code} {text}')

    def new_rid(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    def receive(self, text: str | None = None) -> None:
        r = self.rng
        rid = self.new_rid()
        self.rids.append(rid)
        if len(self.rids) > 96:
            del self.rids[:48]
        if text is None:
            text = self.words(15, 110) if self.a.log_requests >= 2 else ""
        body = f"text='{text}', " if text else ""
        self.out.add(self.p() + f"Receive: obj=GenerateReqInput(rid='{rid}', {body}input_ids=None, "
                     f"sampling_params={{'temperature': {r.choice((0.0, 0.6, 0.7, 1.0))}, 'top_p': 0.95, "
                     f"'max_new_tokens': {r.choice((256, 512, 1024, 2048, 4096))}}}, return_logprob=False, "
                     f"stream={r.random() < 0.7}, lora_path=None, return_hidden_states=False)")

    def finish(self, text: str | None = None) -> None:
        r = self.rng
        rid = self.rids.pop(r.randrange(len(self.rids))) if self.rids else self.new_rid()
        if text is None:
            text = self.words(8, 80) if self.a.log_requests >= 2 else ""
        body = f"'text': '{text}', " if text else ""
        prompt = r.randint(20, 24000)
        reason = "{'type': 'stop', 'matched': 1}" if r.random() < 0.9 else "{'type': 'length', 'length': 2048}"
        self.out.add(self.p() + f"Finish: obj=GenerateReqInput(rid='{rid}', stream=True), out={{{body}'meta_info': "
                     f"{{'id': '{rid}', 'finish_reason': {reason}, 'prompt_tokens': {prompt}, "
                     f"'completion_tokens': {r.randint(1, 2048)}, 'cached_tokens': {r.randint(0, prompt)}, "
                     f"'e2e_latency': {r.uniform(0.1, 80):.3f}}}}}")

    def warning(self) -> None:
        r = self.rng
        k = r.randrange(5)
        if k == 0:
            self.out.add(self.p() + "WARNING:  Invalid HTTP request received.")
        elif k == 1:
            self.out.add(self.p(0) + f"KV cache pool is full. Retract requests. #retracted_reqs: {r.randint(1, 6)}, "
                         f"#new_token_ratio: {r.uniform(0.2, 0.5):.4f} -> {r.uniform(0.6, 0.95):.4f}")
        elif k == 2:
            self.out.add(self.p() + f"The request {self.new_rid()} was aborted by the client.")
        elif k == 3:
            self.out.add(self.p(0) + f"{TORCH}/cuda/graphs.py:84: UserWarning: The CUDA Graph is empty. This usually means "
                         "that the graph was attempted to be captured on wrong device or stream.")
        else:
            self.out.add(self.p() + f"Slow request detected: rid={self.new_rid()}, e2e_latency={r.uniform(120, 400):.1f}s")

    def step(self) -> None:
        r = self.rng
        x = r.random()
        self.clock.advance(x * 0.07)
        lr = self.a.log_requests
        if x < 0.40:
            self.decode()
        elif x < 0.52:
            self.prefill()
        elif x < 0.74:
            self.access()
        elif x < 0.87:
            self.receive() if lr else self.decode()
        elif x < 1.0 - 1.0 / self.warn_every:
            self.finish() if lr else self.access()
        else:
            self.warning()

    def traffic_until(self, limit: int) -> None:
        out, step = self.out, self.step
        while out.size < limit:
            step()

    # ---- the crash
    def crash_frames(self, kind: str):
        sched = SGL + "/srt/managers/scheduler.py"
        runner = SGL + "/srt/model_executor/model_runner.py"
        head = [
            (sched, 2961, "run_scheduler_process", "scheduler.event_loop_overlap()"),
            (TORCH + "/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
        ]
        forward = [
            (sched, 1019, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
            (sched, 2093, "run_batch", "batch_result = self.model_worker.forward_batch_generation(model_worker_batch)"),
            (SGL + "/srt/managers/tp_worker.py", 262, "forward_batch_generation",
             "logits_output, can_run_cuda_graph = self.model_runner.forward("),
            (runner, 2035, "forward", "output = self._forward_raw("),
            (runner, 2092, "_forward_raw", "ret = self.forward_extend("),
            (runner, 1971, "forward_extend", "return self.model.forward("),
            (SGL + "/srt/models/deepseek_v2.py", 3015, "forward", "hidden_states = self.model("),
            (TORCH + "/nn/modules/module.py", 1773, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
        ]
        if kind == "nsa-attr":
            return head + forward + [
                (SGL + "/srt/models/deepseek_v2.py", 1391, "forward_absorb_core", "attn_output = self.attn_mqa("),
                (SGL + "/srt/layers/radix_attention.py", 111, "forward", "return forward_batch.attn_backend.forward("),
                (SGL + "/srt/layers/attention/nsa_backend.py", 934, "forward_extend",
                 "return forward_mha_extend(q, k, v, layer, forward_batch, metadata)"),
                (SGL + "/srt/layers/attention/nsa/forward_mha.py", 447, "forward_mha_extend",
                 "page_table = metadata.page_table_1_flattened"),
            ], ["AttributeError: 'PrefillMetadata' object has no attribute 'page_table_1_flattened'"], \
                {"exceptions": ["AttributeError"], "message": "object has no attribute 'page_table_1_flattened'"}
        if kind == "cuda-oom":
            return head + forward + [
                (SGL + "/srt/models/deepseek_v2.py", 655, "forward_normal",
                 "final_hidden_states = self.experts(hidden_states=hidden_states, topk_output=topk_output)"),
                (SGL + "/srt/layers/moe/fused_moe_triton/fused_moe.py", 1561, "fused_experts_impl",
                 "intermediate_cache1 = torch.empty("),
            ], ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.62 GiB. GPU {rank} has a total "
                "capacity of 139.72 GiB of which 1.19 GiB is free. Process {pid} has 138.52 GiB memory in use. Of the "
                "allocated memory 129.88 GiB is allocated by PyTorch, and 3.05 GiB is reserved by PyTorch but "
                "unallocated. If reserved but unallocated memory is large try setting "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"], \
                {"exceptions": ["torch.OutOfMemoryError", "OutOfMemoryError"],
                 "message": "CUDA out of memory. Tried to allocate 3.62 GiB"}
        if kind == "illegal-address":
            return head + forward + [
                (SGL + "/srt/layers/logits_processor.py", 341, "forward",
                 "logits = self._get_logits(pruned_states, lm_head, logits_metadata)"),
                (SGL + "/srt/layers/logits_processor.py", 517, "_get_logits",
                 "logits = tensor_model_parallel_all_gather(logits)"),
            ], ["torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
                "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
                "might be incorrect.",
                "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", ""], \
                {"exceptions": ["torch.AcceleratorError", "AcceleratorError", "RuntimeError"],
                 "message": "an illegal memory access was encountered"}
        if kind == "req-slots":
            return head + [
                (sched, 1011, "event_loop_overlap", "batch = self.get_next_batch_to_run()"),
                (sched, 1722, "get_next_batch_to_run", "new_batch = self.get_new_batch_prefill()"),
                (sched, 1911, "get_new_batch_prefill", "new_batch.prepare_for_extend()"),
                (SGL + "/srt/managers/schedule_batch.py", 1287, "prepare_for_extend",
                 "req_pool_indices = self.alloc_req_slots(bs, self.reqs)"),
                (SGL + "/srt/managers/schedule_batch.py", 1052, "alloc_req_slots", "raise RuntimeError("),
            ], ["RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
                "`--max-running-requests`. self.req_to_token_pool.available_size()=0, num_reqs=3, "],\
                {"exceptions": ["RuntimeError"], "message": "alloc_req_slots runs out of memory"}
        raise ValueError(f"unknown crash kind {kind!r}")

    def crash_block(self, sink, rng: random.Random, kind: str) -> dict:
        """Write the crash to sink: each failing rank's traceback, the ranks' lines interleaved in
        runs as separate processes print them, then the launcher's sigquit lines."""
        frames, tail, planted = self.crash_frames(kind)
        failing = sorted(rng.sample(range(self.tp), min(self.a.failing_ranks, self.tp)))
        per_rank = []
        for k in failing:
            lines = ["Scheduler hit an exception: Traceback (most recent call last):"]
            for path, no, fn, src in frames:
                lines.append(f'  File "{path}", line {no}, in {fn}')
                lines.append("    " + src)
            lines += [t.format(rank=k, pid=self.host_pid + 1 + k) for t in tail]
            per_rank.append((k, lines))
        pos = [0] * len(per_rank)
        live = list(range(len(per_rank)))
        while live:
            i = rng.choice(live)
            k, lines = per_rank[i]
            n = rng.randint(1, 9)
            for j in range(pos[i], min(pos[i] + n, len(lines))):
                sink.add((self.p(k) if j == 0 else "") + lines[j])
            pos[i] += n
            if pos[i] >= len(lines):
                live.remove(i)
            self.clock.advance(0.0004)
        self.clock.advance(0.2)
        for _ in failing:
            sink.add(self.p() + "Received sigquit from a child process. It usually means the child failed.")
        return {"kind": kind, "ranks": [f"TP{k}" for k in failing], **planted}


# --------------------------------------------------------------------------- noisy

class NoisySGLang(SGLangServer):
    """Request-level tracebacks the server survived, one every span bytes."""

    def __init__(self, *args, tracebacks: int):
        super().__init__(*args)
        self.tracebacks = tracebacks
        self.done = 0
        self.kinds: dict[str, int] = {}
        self.next_at = 0.0
        self.span = 0.0

    def plan(self, start: int, end: int) -> None:
        self.span = max(1.0, (end - start) / max(1, self.tracebacks))
        self.next_at = start + self.span / 2

    def frame(self, path: str, no: int, fn: str, src: str) -> None:
        self.out.add(f'  File "{path}", line {no}, in {fn}')
        self.out.add("    " + src)
        if self.rng.random() < 0.01:  # another process prints in the middle of the traceback
            self.decode()

    ASGI = [
        (SITE + "/uvicorn/protocols/http/httptools_impl.py", 409, "run_asgi",
         "result = await app(  # type: ignore[func-returns-value]"),
        (SITE + "/uvicorn/middleware/proxy_headers.py", 60, "__call__", "return await self.app(scope, receive, send)"),
        (SITE + "/fastapi/applications.py", 1054, "__call__", "await super().__call__(scope, receive, send)"),
        (SITE + "/starlette/applications.py", 113, "__call__", "await self.middleware_stack(scope, receive, send)"),
        (SITE + "/starlette/routing.py", 715, "__call__", "await self.middleware_stack(scope, receive, send)"),
        (SITE + "/fastapi/routing.py", 301, "app", "raw_response = await run_endpoint_function("),
    ]

    def request_traceback(self) -> None:
        r, add = self.rng, self.out.add
        x = r.random()
        if x < 0.35:
            kind = "asgi-template"
            add(self.p() + "ERROR:    Exception in ASGI application")
            add("Traceback (most recent call last):")
            for f in self.ASGI:
                self.frame(*f)
            self.frame(SGL + "/srt/entrypoints/http_server.py", 721, "openai_v1_chat_completions",
                       "return await raw_request.app.state.openai_serving_chat.handle_request(request, raw_request)")
            self.frame(SGL + "/srt/entrypoints/openai/serving_base.py", 41, "handle_request",
                       "adapted_request, processed_request = self._convert_to_internal_request(request, raw_request)")
            self.frame(SGL + "/srt/entrypoints/openai/serving_chat.py", 240, "_apply_jinja_template",
                       "prompt_ids = self.tokenizer_manager.tokenizer.apply_chat_template(")
            self.frame(SITE + "/jinja2/sandbox.py", 401, "call", "return __context.call(__obj, *args, **kwargs)")
            add("jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...")
            self.access(500)
        elif x < 0.60:
            kind = "error-in-request"
            add(self.p() + "Error in request: 'content'")
            add("Traceback (most recent call last):")
            self.frame(SGL + "/srt/entrypoints/openai/serving_base.py", 38, "handle_request",
                       "adapted_request, processed_request = self._convert_to_internal_request(request, raw_request)")
            self.frame(SGL + "/srt/entrypoints/openai/serving_chat.py", 118, "_convert_to_internal_request",
                       "processed_messages = self._process_messages(request, is_multimodal)")
            self.frame(SGL + "/srt/entrypoints/openai/serving_chat.py", 189, "_process_messages",
                       "openai_compatible_messages.append({\"role\": message.role, \"content\": message[\"content\"]})")
            add("KeyError: 'content'")
            self.access(400)
        elif x < 0.80:
            kind = "context-length"
            self.access(200)  # a stream: the status went out before the error
            add(self.p() + "ERROR:    Exception in ASGI application")
            add("Traceback (most recent call last):")
            self.frame(SITE + "/starlette/responses.py", 251, "wrap", "await func()")
            self.frame(SITE + "/starlette/responses.py", 240, "stream_response", "async for chunk in self.body_iterator:")
            self.frame(SGL + "/srt/entrypoints/openai/serving_chat.py", 433, "_generate_chat_stream",
                       "async for content in self.tokenizer_manager.generate_request(")
            self.frame(SGL + "/srt/managers/tokenizer_manager.py", 478, "generate_request",
                       "tokenized_obj = await self._tokenize_one_request(obj)")
            self.frame(SGL + "/srt/managers/tokenizer_manager.py", 569, "_validate_one_request", "raise ValueError(")
            n = 163840 + r.randint(1, 120000)
            add(f"ValueError: The input ({n} tokens) is longer than the model's context length (163840 tokens).")
        elif x < 0.90:
            kind = "validation"
            add(self.p() + "ERROR:    Exception in ASGI application")
            add("Traceback (most recent call last):")
            for f in self.ASGI[:4]:
                self.frame(*f)
            self.frame(SGL + "/srt/entrypoints/openai/serving_chat.py", 164, "_convert_to_internal_request",
                       "adapted_request = GenerateReqInput(**prompt_kwargs)")
            self.frame(SITE + "/pydantic/main.py", 253, "__init__",
                       "validated_self = self.__pydantic_validator__.validate_python(data, self_instance=self)")
            add("pydantic_core._pydantic_core.ValidationError: 1 validation error for ChatCompletionRequest")
            add("messages.1.content")
            add("  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]")
            add("    For further information visit https://errors.pydantic.dev/2.11/v/string_type")
            self.access(500)
        else:
            kind = "exception-group"
            add(self.p() + "ERROR:    Exception in ASGI application")
            add("  + Exception Group Traceback (most recent call last):")
            add(f'  |   File "{SITE}/starlette/_utils.py", line 76, in collapse_excgroups')
            add("  |     yield")
            add(f'  |   File "{SITE}/starlette/middleware/base.py", line 174, in __call__')
            add("  |     async with anyio.create_task_group() as task_group:")
            add("  | exceptiongroup.ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)")
            add("  +-+---------------- 1 ----------------")
            add("    | Traceback (most recent call last):")
            add(f'    |   File "{SGL}/srt/entrypoints/http_server.py", line 721, in openai_v1_chat_completions')
            add("    |     return await raw_request.app.state.openai_serving_chat.handle_request(request, raw_request)")
            add(f'    |   File "{SITE}/jinja2/sandbox.py", line 401, in call')
            add("    |     return __context.call(__obj, *args, **kwargs)")
            add("    | jinja2.exceptions.TemplateError: System message must be at the beginning.")
            add("    +------------------------------------")
            self.access(500)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.done += 1

    def traffic_until(self, limit: int) -> None:
        out, step = self.out, self.step
        while out.size < limit:
            if out.size >= self.next_at and self.done < self.tracebacks:
                self.request_traceback()
                self.next_at += self.span
                continue
            step()

    def finish_tracebacks(self) -> None:
        while self.done < self.tracebacks:
            self.request_traceback()


# --------------------------------------------------------------------------- long lines

PASTED = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
    "79.25 GiB of which 4.75 MiB is free.",
    "RuntimeError: CUDA error: an illegal memory access was encountered\\nCUDA kernel errors might be "
    "asynchronously reported at some other API call",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
    "unhandled cuda error",
    "Fatal Python error: Segmentation fault\\n\\nCurrent thread 0x00007f3a2bfff640 (most recent call first):",
    "Traceback (most recent call last):\\n  File \\\"train.py\\\", line 12, in <module>\\nValueError: The input "
    "(200000 tokens) is longer than the model's context length (131072 tokens).",
]


class LongSGLang(SGLangServer):
    def __init__(self, *args, every: int, line_bytes: int):
        super().__init__(*args)
        self.every = max(1, every)
        self.line_bytes = max(1000, line_bytes)
        self.count = 0
        self.limit = 0
        self.long_lines = 0
        self.longest = 0
        pool_rng = random.Random(self.rng.getrandbits(64))
        # the pasted text comes from a few 64 KiB slabs, cut at random offsets (fast)
        self.slabs = []
        for _ in range(6):
            s = " ".join(pool_rng.choices(VOCAB, k=14000))
            self.slabs.append((s * 2)[:65536 * 2])

    def payload(self) -> str:
        r = self.rng
        need = self.line_bytes - 400
        parts, n = [], 0
        keyword = r.choice(PASTED)
        at = r.randrange(need)
        placed = False
        while n < need:
            slab = self.slabs[r.randrange(len(self.slabs))]
            off = r.randrange(65536)
            piece = slab[off:off + min(65536, need - n)]
            if not placed and n + len(piece) >= at:
                piece = piece + " here is the error I get: " + keyword + " what does it mean? "
                placed = True
            parts.append(piece)
            n += len(piece)
        return "".join(parts)

    def traffic_until(self, limit: int) -> None:
        self.limit = limit
        super().traffic_until(limit)

    def step(self) -> None:
        self.count += 1
        # a long line that would overshoot the size is left out (a small log may get none)
        if self.count % self.every == 0 and self.out.size + self.line_bytes < self.limit:
            if self.rng.random() < 0.7:
                self.receive(self.payload())
            else:
                self.finish(self.payload())
            self.long_lines += 1
            self.longest = max(self.longest, self.out.last)  # ASCII: characters are bytes
            return
        super().step()


# --------------------------------------------------------------------------- vLLM V1

class VLLMServer:
    def __init__(self, a, sink: Sink, clock: Clock, rng: random.Random):
        self.a, self.out, self.clock, self.rng = a, sink, clock, rng
        self.tp = a.tp_size
        self.model = "meta-llama/Llama-3.3-70B-Instruct"
        self.api = 1 + rng.randrange(50)
        self.core = self.api + 200 + rng.randrange(100)
        self.running = self.waiting = 0
        self.usage = 0.0
        self.level = 0.4
        self.rids: list[str] = []
        self.warn_every = 5000

    def api_p(self, level: str, where: str) -> str:
        return f"(APIServer pid={self.api}) {level} {self.clock.short()} [{where}] "

    def core_p(self, level: str, where: str) -> str:
        return f"(EngineCore_DP0 pid={self.core}) {level} {self.clock.short()} [{where}] "

    def worker_p(self, k: int, level: str, where: str) -> str:
        return f"(Worker_TP{k} pid={self.core + 1 + k}) {level} {self.clock.short()} [{where}] "

    def startup(self) -> None:
        r, add, tp, m = self.rng, self.out.add, self.tp, self.model
        add(self.api_p("INFO", "api_server.py:1896") + "vLLM API server version 0.11.0")
        add(self.api_p("INFO", "utils.py:233") + f"non-default args: {{'model_tag': '{m}', 'host': '0.0.0.0', "
            f"'model': '{m}', 'max_model_len': 131072, 'tensor_parallel_size': {tp}, "
            "'gpu_memory_utilization': 0.92, 'enable_prefix_caching': True, 'enable_log_requests': True}")
        self.clock.advance(6.1)
        add(self.api_p("INFO", "model.py:547") + "Resolved architecture: LlamaForCausalLM")
        add(self.api_p("INFO", "model.py:1510") + "Using max model len 131072")
        add(self.api_p("INFO", "scheduler.py:205") + "Chunked prefill is enabled with max_num_batched_tokens=8192.")
        self.clock.advance(4.0)
        add(self.core_p("INFO", "core.py:644") + "Waiting for init message from front-end.")
        add(self.core_p("INFO", "core.py:77") + f"Initializing a V1 LLM engine (v0.11.0) with config: model='{m}', "
            f"speculative_config=None, tokenizer='{m}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
            "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=131072, download_dir=None, load_format=auto, "
            f"tensor_parallel_size={tp}, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, "
            "quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, "
            f"served_model_name={m}, enable_prefix_caching=True, chunked_prefill_enabled=True")
        add(self.core_p("INFO", "multiproc_executor.py:720") + "Reducing Torch parallelism from 64 threads to 1 to avoid "
            "unnecessary CPU contention. Set OMP_NUM_THREADS in the external environment to tune this value as needed.")
        self.clock.advance(9.3)
        for k in range(tp):
            add(self.worker_p(k, "INFO", "parallel_state.py:1208") + f"rank {k} in world size {tp} is assigned as "
                f"DP rank 0, PP rank 0, TP rank {k}, EP rank {k}")
        for k in range(tp):
            add(self.worker_p(k, "INFO", "gpu_model_runner.py:2602") + f"Starting to load model {m}...")
        for i in range(0, 31, 3):
            self.clock.advance(r.uniform(1.5, 3))
            add(f"Loading safetensors checkpoint shards: {i * 100 // 30:3d}% Completed | {i}/30 "
                f"[00:{i * 2:02d}<00:{(30 - i) * 2:02d}, {r.uniform(0.4, 0.6):.2f}it/s]")
        for k in range(tp):
            add(self.worker_p(k, "INFO", "default_loader.py:267") + f"Loading weights took {r.uniform(40, 60):.2f} seconds")
            add(self.worker_p(k, "INFO", "gpu_model_runner.py:2653") + f"Model loading took 32.8848 GiB and "
                f"{r.uniform(41, 62):.6f} seconds")
        self.clock.advance(25.0)
        for k in range(tp):
            add(self.worker_p(k, "INFO", "gpu_worker.py:298") + f"Available KV cache memory: {r.uniform(36, 38):.2f} GiB")
        add(self.core_p("INFO", "kv_cache_utils.py:1087") + "GPU KV cache size: 1,187,280 tokens")
        add(self.core_p("INFO", "kv_cache_utils.py:1091") + "Maximum concurrency for 131,072 tokens per request: 9.06x")
        add("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
            "\u2588\u2588\u2588| 67/67 [00:06<00:00, 10.41it/s]")
        add("Capturing CUDA graphs (decode, FULL): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| "
            "35/35 [00:03<00:00, 10.87it/s]")
        for k in range(tp):
            add(self.worker_p(k, "INFO", "gpu_model_runner.py:3480") + f"Graph capturing finished in {r.randint(8, 12)} "
                f"secs, took {r.uniform(0.6, 1.1):.2f} GiB")
        add(self.core_p("INFO", "core.py:210") + f"init engine (profile, create kv cache, warmup model) took "
            f"{r.uniform(50, 70):.2f} seconds")
        add(self.api_p("INFO", "loggers.py:142") + "Engine 000: vllm cache_config_info with initialization after "
            "num_gpu_blocks is: 74205")
        add(self.api_p("INFO", "api_server.py:1634") + "Supported_tasks: ['generate']")
        add(self.api_p("INFO", "api_server.py:1912") + "Starting vLLM API server 0 on http://0.0.0.0:8000")
        add(f"(APIServer pid={self.api}) INFO:     Started server process [{self.api}]")
        add(f"(APIServer pid={self.api}) INFO:     Waiting for application startup.")
        add(f"(APIServer pid={self.api}) INFO:     Application startup complete.")
        self.running = self.waiting = 0
        self.usage = 0.0
        self.rids = []

    def stats(self) -> None:
        r = self.rng
        if r.random() < 0.003:
            self.level = r.choice((0.1, 0.25, 0.4, 0.4, 0.55, 0.7, 0.9))
        self.usage = min(0.99, max(0.0, self.usage + 0.2 * (self.level - self.usage) + r.uniform(-0.03, 0.03)))
        self.running = max(0, int(self.usage * 300) + r.randint(-5, 5))
        self.waiting = max(0, self.waiting + (4 if self.usage > 0.9 else -3) + r.randint(-1, 1))
        self.out.add(self.api_p("INFO", "loggers.py:123") + f"Engine 000: Avg prompt throughput: {r.uniform(0, 25000):.1f} "
                     f"tokens/s, Avg generation throughput: {self.running * r.uniform(8, 14):.1f} tokens/s, "
                     f"Running: {self.running} reqs, Waiting: {self.waiting} reqs, GPU KV cache usage: "
                     f"{self.usage * 100:.1f}%, Prefix cache hit rate: {r.uniform(15, 85):.1f}%")

    def access(self, code: int = 200) -> None:
        r = self.rng
        method, path = r.choice(ENDPOINTS)
        if path == "/generate":
            path = "/v1/completions"
        text = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}[code]
        self.out.add(f"(APIServer pid={self.api}) INFO:     10.{r.randrange(256)}.{r.randrange(256)}.{r.randint(1, 254)}:"
                     f'{r.randint(32768, 60999)} - "{method} {path} HTTP/1.1" {code} {text}')

    def receive(self) -> None:
        r = self.rng
        rid = f"chatcmpl-{r.getrandbits(128):032x}"
        self.rids.append(rid)
        if len(self.rids) > 96:
            del self.rids[:48]
        prompt = " ".join(r.choices(VOCAB, k=r.randint(15, 110)))
        self.out.add(self.api_p("INFO", "logger.py:40") + f"Received request {rid}: prompt: '<|begin_of_text|>"
                     f"<|start_header_id|>user<|end_header_id|>\\n\\n{prompt}<|eot_id|><|start_header_id|>assistant"
                     f"<|end_header_id|>\\n\\n', params: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
                     f"repetition_penalty=1.0, temperature={r.choice((0.0, 0.6, 0.7, 1.0))}, top_p=0.95, top_k=0, "
                     f"min_p=0.0, seed=None, stop=[], stop_token_ids=[], max_tokens={r.choice((256, 1024, 4096))}, "
                     "min_tokens=0, logprobs=None, skip_special_tokens=True), prompt_token_ids: None, "
                     "prompt_embeds shape: None, lora_request: None.")

    def added(self) -> None:
        r = self.rng
        rid = self.rids.pop(r.randrange(len(self.rids))) if self.rids else f"chatcmpl-{r.getrandbits(128):032x}"
        self.out.add(self.api_p("INFO", "async_llm.py:328") + f"Added request {rid}.")

    def warning(self) -> None:
        r = self.rng
        k = r.randrange(3)
        if k == 0:
            self.out.add(self.api_p("WARNING", "protocol.py:93") + "The following fields were present in the request but "
                         "ignored: {'stream_options'}")
        elif k == 1:
            self.out.add(self.core_p("WARNING", "scheduler.py:338") + "Preempting request due to insufficient KV cache "
                         "blocks; the request will be recomputed.")
        else:
            self.out.add(f"(APIServer pid={self.api}) WARNING:  Invalid HTTP request received.")

    def step(self) -> None:
        r = self.rng
        x = r.random()
        self.clock.advance(x * 0.1)
        if x < 0.25:
            self.stats()
        elif x < 0.52:
            self.access()
        elif x < 0.76:
            self.receive()
        elif x < 1.0 - 1.0 / self.warn_every:
            self.added()
        else:
            self.warning()

    def traffic_until(self, limit: int) -> None:
        out, step = self.out, self.step
        while out.size < limit:
            step()

    def crash_block(self, sink, rng: random.Random, kind: str) -> dict:
        if kind != "illegal-address":
            raise ValueError("the vllm shape plants an illegal-address crash only")
        failing = sorted(rng.sample(range(self.tp), min(self.a.failing_ranks, self.tp)))
        frames = [
            (VLLM + "/v1/executor/multiproc_executor.py", 666, "worker_busy_loop", "output = func(*args, **kwargs)"),
            (VLLM + "/v1/worker/worker_base.py", 362, "execute_model", "return self.worker.execute_model(scheduler_output, *args, **kwargs)"),
            (TORCH + "/utils/_contextlib.py", 120, "decorate_context", "return func(*args, **kwargs)"),
            (VLLM + "/v1/worker/gpu_worker.py", 447, "execute_model", "output = self.model_runner.execute_model(scheduler_output,"),
            (VLLM + "/v1/worker/gpu_model_runner.py", 2212, "execute_model", "valid_sampled_token_ids = sampled_token_ids.tolist()"),
        ]
        blocks = []
        for k in failing:
            lines = ["WorkerProc hit an exception.", "Traceback (most recent call last):"]
            for path, no, fn, src in frames:
                lines += [f'  File "{path}", line {no}, in {fn}', "    " + src]
            lines += ["torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
                      "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                      "below might be incorrect.",
                      "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
                      "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", ""]
            blocks.append((k, lines))
        pos = [0] * len(blocks)
        live = list(range(len(blocks)))
        while live:
            i = rng.choice(live)
            k, lines = blocks[i]
            for j in range(pos[i], min(pos[i] + rng.randint(1, 6), len(lines))):
                sink.add(self.worker_p(k, "ERROR", "multiproc_executor.py:671") + lines[j])
                pos[i] += 1
            if pos[i] >= len(lines):
                live.remove(i)
            self.clock.advance(0.0003)
        self.clock.advance(0.05)
        sink.add(self.core_p("ERROR", "dump_input.py:69") + "Dumping input data for V1 LLM engine (v0.11.0) with config: "
                 f"model='{self.model}', tensor_parallel_size={self.tp}, enable_prefix_caching=True")
        sink.add(self.core_p("ERROR", "dump_input.py:76") + "Dumping scheduler output for model execution: "
                 f"SchedulerOutput(scheduled_new_reqs=[], num_scheduled_tokens={{chatcmpl-{rng.getrandbits(128):032x}: 181}}, "
                 "total_num_scheduled_tokens=181, finished_req_ids=[])")
        core = [
            "EngineCore encountered a fatal error.",
            "Traceback (most recent call last):",
            f'  File "{VLLM}/v1/engine/core.py", line 701, in run_engine_core',
            "    engine_core.run_busy_loop()",
            f'  File "{VLLM}/v1/engine/core.py", line 728, in run_busy_loop',
            "    self._process_engine_step()",
            f'  File "{VLLM}/v1/engine/core.py", line 754, in _process_engine_step',
            "    outputs, model_executed = self.step_fn()",
            f'  File "{VLLM}/v1/engine/core.py", line 284, in step',
            "    model_output = self.execute_model_with_error_logging(",
            f'  File "{VLLM}/v1/executor/multiproc_executor.py", line 262, in get_response',
            "    raise RuntimeError(",
            "RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
            "be incorrect.', please check the stack trace above for the root cause",
        ]
        for ln in core:
            sink.add(self.core_p("ERROR", "core.py:710") + ln)
        self.clock.advance(0.02)
        api = [
            "AsyncLLM output_handler failed.",
            "Traceback (most recent call last):",
            f'  File "{VLLM}/v1/engine/async_llm.py", line 439, in output_handler',
            "    outputs = await engine_core.get_output_async()",
            f'  File "{VLLM}/v1/engine/core_client.py", line 846, in get_output_async',
            "    raise self._format_exception(outputs) from None",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) "
            "for the root cause.",
        ]
        for ln in api:
            sink.add(self.api_p("ERROR", "async_llm.py:480") + ln)
        for _ in range(3):
            sink.add(f"(APIServer pid={self.api}) INFO:     10.{rng.randrange(256)}.{rng.randrange(256)}."
                     f'{rng.randint(1, 254)}:{rng.randint(32768, 60999)} - "POST /v1/chat/completions HTTP/1.1" '
                     "500 Internal Server Error")
        sink.add(f"(APIServer pid={self.api}) INFO:     Shutting down")
        sink.add(f"(APIServer pid={self.api}) INFO:     Waiting for application shutdown.")
        sink.add(f"(APIServer pid={self.api}) INFO:     Application shutdown complete.")
        sink.add(f"(APIServer pid={self.api}) INFO:     Finished server process [{self.api}]")
        return {"kind": kind, "ranks": [f"TP{k}" for k in failing],
                "exceptions": ["torch.AcceleratorError", "AcceleratorError", "RuntimeError"],
                "message": "an illegal memory access was encountered"}


# --------------------------------------------------------------------------- driver

def build(a, sink: Sink, clock: Clock, rng: random.Random, target: int):
    if a.shape == "vllm":
        return VLLMServer(a, sink, clock, rng)
    if a.shape == "noisy":
        n = a.tracebacks if a.tracebacks is not None else max(1, round(TRACEBACKS_PER_GIB * target / 2**30))
        return NoisySGLang(a, sink, clock, rng, tracebacks=n)
    if a.shape == "long":
        return LongSGLang(a, sink, clock, rng, every=a.long_every, line_bytes=a.line_bytes)
    return SGLangServer(a, sink, clock, rng)


def generate(a, fh) -> dict:
    """Write the log to the binary file fh; return what was planted."""
    target = max(1, int(a.size_mb * 2**20))
    sink, clock = Sink(fh), Clock(a.start)
    rng = random.Random(f"{a.shape}:{a.seed}")
    crash_seed = rng.getrandbits(64)
    srv = build(a, sink, clock, rng, target)
    srv.startup()
    meta: dict = {"shape": a.shape, "seed": a.seed, "size_mb": a.size_mb, "tp_size": a.tp_size}
    if a.shape == "noisy":
        # spread the request tracebacks over the traffic before the crash
        srv.plan(sink.size, int(target * (a.crash_at if a.crash and a.crash_at is not None else 1.0)))
    crash = None
    if a.crash:
        kind = a.crash_kind or DEFAULT_CRASH[a.shape]
        # measure the crash block with a throwaway clock, so that it ends the log at the target size
        probe_clock = Clock(a.start)
        probe_clock.t = clock.t
        saved = srv.clock
        srv.clock, rec = probe_clock, Recorder()
        srv.crash_block(rec, random.Random(crash_seed), kind)
        srv.clock = saved
        if a.crash_at is None:
            srv.traffic_until(target - rec.size)
        else:
            srv.traffic_until(int(target * a.crash_at))
        if a.shape == "noisy":
            srv.finish_tracebacks()
        first = sink.lines + 1
        crash = srv.crash_block(sink, random.Random(crash_seed), kind)
        crash.update(first_line=first, last_line=sink.lines)
        if sink.size < target:  # --crash-at before the end: a supervisor restarts the server
            clock.advance(40.0)
            srv.startup()
            srv.traffic_until(target)
    else:
        srv.traffic_until(target)
        if a.shape == "noisy":
            srv.finish_tracebacks()
    sink.flush()
    meta.update(bytes=sink.written, lines=sink.lines, crash=crash)
    if a.shape == "noisy":
        meta["request_tracebacks"] = srv.done
        meta["request_traceback_kinds"] = dict(sorted(srv.kinds.items()))
    if a.shape == "long":
        meta.update(long_lines=srv.long_lines, longest_line=srv.longest, long_every=srv.every,
                    line_bytes=srv.line_bytes)
    return meta


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shape", choices=SHAPES)
    ap.add_argument("--size-mb", type=float, required=True, help="size to write, MiB (fractions allowed)")
    ap.add_argument("--out", required=True, help="output file")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--crash", action=argparse.BooleanOptionalAction, default=True,
                    help="plant a crash near the end (default) or write a healthy log")
    ap.add_argument("--crash-kind", choices=SGLANG_CRASHES,
                    help="SGLang shapes: which crash (quiet/long: nsa-attr, noisy: cuda-oom); vllm: illegal-address")
    ap.add_argument("--crash-at", type=float, default=None,
                    help="put the crash at this fraction of the size and restart the server after it "
                         "(default: the crash ends the log)")
    ap.add_argument("--tracebacks", type=int, default=None,
                    help=f"noisy: request-level tracebacks (default {TRACEBACKS_PER_GIB} per GiB, at least 1)")
    ap.add_argument("--long-every", type=int, default=1000, help="long: one long line every N lines (default 1000)")
    ap.add_argument("--line-bytes", type=int, default=1_000_000, help="long: length of a long line (default 1000000)")
    ap.add_argument("--tp-size", type=int, default=None, help="tensor-parallel ranks (default 8 SGLang, 4 vLLM)")
    ap.add_argument("--failing-ranks", type=int, default=4, help="ranks that print the crash (default 4)")
    ap.add_argument("--log-requests", type=int, choices=(0, 1, 2), default=2,
                    help="SGLang --log-requests-level: 0 none, 1 metadata, 2 with text (default)")
    ap.add_argument("--start", default="2025-09-14 06:12:03", help="time of the first line (UTC)")
    ap.add_argument("--meta", help="also write what was planted, as JSON, to this file")
    a = ap.parse_args(argv)
    if a.size_mb <= 0:
        ap.error("--size-mb must be positive")
    if a.crash_at is not None and not 0.0 < a.crash_at <= 1.0:
        ap.error("--crash-at must be in (0, 1]")
    if a.tp_size is None:
        a.tp_size = 4 if a.shape == "vllm" else 8
    if a.tp_size < 1 or a.failing_ranks < 1:
        ap.error("--tp-size and --failing-ranks must be at least 1")
    if a.shape == "vllm" and a.crash_kind not in (None, "illegal-address"):
        ap.error("the vllm shape plants an illegal-address crash only")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    t0 = time.perf_counter()
    with open(a.out, "wb") as fh:
        meta = generate(a, fh)
    if a.meta:
        with open(a.meta, "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=1)
            fh.write("\n")
    took = time.perf_counter() - t0
    extra = ""
    if "request_tracebacks" in meta:
        extra += f", {meta['request_tracebacks']} request tracebacks"
    if "long_lines" in meta:
        extra += f", {meta['long_lines']} long lines (longest {meta['longest_line']:,} bytes)"
    crash = meta["crash"]
    where = f", crash {crash['kind']} at lines {crash['first_line']}-{crash['last_line']}" if crash else ", no crash"
    print(f"{a.shape}: wrote {meta['bytes']:,} bytes, {meta['lines']:,} lines to {a.out} in {took:.1f} s{extra}{where}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
