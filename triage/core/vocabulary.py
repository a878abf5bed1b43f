"""The log vocabulary every stage shares: literal anchors that make a line worth parsing,
beyond the catalogue's own keywords.

The scanner looks for these (and the signatures' keywords) in one pass; every other line
is counted and skipped. WINDOW anchors also pull in the lines that follow them, because a
traceback's frames carry no keyword of their own.
"""

from __future__ import annotations

# Lines that carry a request's content (prompts, outputs). User text can say anything, a pasted
# traceback or an error message included, so no stage treats such a line as the server's own.
CONTENT_PREFIXES = ("Receive: obj=", "Finish: obj=", "Received request ", "Generate request ", "Added request ",
                    "Finished request ")
CONTENT_BYTES = tuple(p.encode() for p in CONTENT_PREFIXES)

# the first of these in a chunk marks where a failure begins: the load figures just before it
# are the load at the crash
FAILURE_HINTS = (b"Traceback (most recent", b"Fatal Python error", b"terminate called", b"NCCL WARN",
                 b"Watchdog caught", b"Received sigquit", b"hit an exception", b"fatal error")

# lines after these belong to a traceback or crash dump
WINDOW = {
    "Traceback (most recent call last)": 700,
    "During handling of the above exception": 400,
    "The above exception was the direct cause": 400,
    "Fatal Python error": 80,
    "terminate called after throwing": 60,
    "Exception raised from": 40,
    'File "': 200,
    # printed launch configuration can be hard-wrapped over a few lines
    "server_args=": 40,
    "args: Namespace(": 40,
    "non-default args:": 40,
    "with config:": 20,
}

# single lines: failure markers, configuration, version and timeline milestones
LINE = [
    # failures that are not Python tracebacks
    "NCCL WARN",
    "NCCL error",
    "ncclUnhandledCudaError",
    "ncclSystemError",
    "ncclInternalError",
    "ncclRemoteError",
    "Watchdog caught collective operation timeout",
    "CUDA error:",
    "Cuda failure",
    "Segmentation fault",
    "Bus error",
    "Killed",
    "Out of memory: Kill",
    "Received sigquit from a child proces",
    "SIGQUIT received",
    "hit an exception",
    "EngineCore encountered a fatal error",
    "EngineCore failed to start",
    "Engine core initialization failed",
    "died unexpectedly",
    "scheduler is dead",
    "scheduler died during initialization",
    "watchdog timeout",
    "Watchdog timeout",
    "what():",
    "ShardCannotStart",
    "failed to start",
    "Error: ",
    "ERROR ",
    "CRITICAL ",
    "[E]",
    "[ERROR]",
    "UNAVAILABLE:",
    # the shape of a failure, whatever its message: any exception name, the engines' error
    # vocabulary, signals (rare on healthy lines; request content is skipped by the parsers)
    "Error",
    "Exception",
    "Interrupt",
    "Assertion failed",
    "with exception",
    "FATAL",
    "[TM][",
    "CUBLAS_STATUS",
    "cudaError",
    "core dumped",
    "signal 11",
    "signal 6",
    "SIGSEGV",
    "SIGABRT",
    "Current thread 0x",
    "unexpectedly failed",
    "exited on signal",
    "Process received signal",
    "CUresult error",
    "exception=",
    # version and configuration
    "server version",
    "LLM engine (v",
    "version 0.",
    "sglang-0.",
    "sglang==",
    "Initializing an LLM engine",
    "Initializing a V1 LLM engine",
    "Possible solutions",
    "sglang.launch_server",
    "sglang serve",
    "vllm serve",
    "vllm.entrypoints.openai.api_server",
    # the GPUs, where the log names them
    "device_name=",
    "total capacity of",
    "compute capability",
    "(UUID: GPU-",  # nvidia-smi -L, printed by launch scripts: `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`
    # timeline milestones
    "Load weight end",
    "Loading weights took",
    "Model loading took",
    "Capture cuda graph",
    "CUDA graph begin",
    "CUDA graph end",
    "Capturing CUDA graph",
    "Capturing cudagraphs",
    "Capturing the model for CUDA graphs",
    "Graph capturing finished",
    "KV Cache is allocated",
    "GPU KV cache size",
    "max_total_num_tokens=",
    "The server is fired up and ready to roll",
    "Application startup complete",
    "Starting vLLM",
    "Load weight begin",
    "Init torch distributed begin",
    "KV cache pool is full",
]

# Frequent runtime lines: never per-line work; the scanner keeps the last one before each
# failure and aggregates the figures with C-speed scans over the chunk.
LOAD = ["Decode batch", "Prefill batch", "Avg prompt throughput"]
