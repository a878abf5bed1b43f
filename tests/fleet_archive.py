"""A generated log archive for `triage fleet`: servers in directories, several crash kinds,
healthy logs, .gz, an empty file, a hidden file and one unreadable (corrupt) .gz.

Small logs only (a few KB each), so that a few hundred analyse in seconds. Modification
times are set (in November 2026) because the fleet infers the year of vLLM's `MM-DD` stamps
from them. Shared by tests/test_fleet*.py and benchmarks/bench_fleet.py.
"""

from __future__ import annotations

import gzip
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

# what every server's i-th log is, by i % 8
KINDS = ["max-seq-len", "healthy", "segfault", "oom-gz", "unknown", "hub", "healthy", "oom-killer"]
FILES = {"max-seq-len": "vllm-v1-max-seq-len.log", "segfault": "segfault-killed.log",
         "oom-gz": "vllm-v0-interleaved-oom.log", "hub": "python-direct-cause.log",
         "oom-killer": "sglang-chained-capture-k8s.log"}
SIGNATURES = {"max-seq-len": "vllm-max-seq-len-exceeds-kv-cache", "segfault": "system-segfault",
              "oom-gz": "torch-cuda-out-of-memory", "hub": "hub-repo-not-found",
              # a capture failure the shell then reports Killed: filed under its cause, as `analyze` names it
              "oom-killer": "sglang-torch-compile-stream-capturing"}


@dataclass
class Archive:
    root: Path
    servers: int
    per_server: int
    logs: int = 0  # regular, visible, non-empty logs that can be read
    empty: int = 0
    broken: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # kind -> logs


def healthy(server: int, n: int) -> str:
    return (f"INFO 11-{10 + n % 18:02d} 08:00:01 [api_server.py:1043] vLLM API server version 0.10.1\n"
            f"INFO 11-{10 + n % 18:02d} 08:00:02 [model_runner.py:1203] Loading model weights took 14.99 GB\n"
            f"INFO 11-{10 + n % 18:02d} 08:01:02 [launcher.py:29] Available routes are: /health\n"
            "INFO:     Application startup complete.\n"
            f'INFO:     10.0.{server}.9:51234 - "POST /v1/completions HTTP/1.1" 200 OK\n')


# the GPU model the unknown crash's servers print: even servers one, odd servers the other
GPUS = ["NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"]


def unknown(server: int, n: int) -> str:
    """A crash the catalogue does not know, on a host that NCCL names, with its GPU model."""
    return (f"gpu-node-{server:02d}.cluster:4{n:03d}:4{n:03d} [0] NCCL INFO NCCL version 2.27.3+cuda12.9\n"
            f"GPU 0: {GPUS[server % 2]} (UUID: GPU-{n:08x}-0000-0000-0000-000000000000)\n"
            f"[2026-11-{10 + n % 18:02d} 1{n % 10}:00:00 TP{n % 8}] Scheduler hit an exception: Traceback (most recent call last):\n"
            f'  File "/opt/env{n}/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line {100 + n}, in run_batch\n'
            "    self.frobnicate(batch)\n"
            f"ZeroDivisionError: frobnicator divided {n} tokens by zero for request {n:032x}\n")


def make_archive(root: Path, servers: int = 30, per_server: int = 8) -> Archive:
    a = Archive(root, servers, per_server)
    root.mkdir(parents=True, exist_ok=True)
    for s in range(servers):
        d = root / f"node{s:02d}"
        d.mkdir(exist_ok=True)
        for i in range(per_server):
            kind = KINDS[i % len(KINDS)]
            n = s * per_server + i
            if kind == "healthy":
                path = d / f"serve-{i}.log"
                path.write_text(healthy(s, n))
            elif kind == "unknown":
                path = d / f"serve-{i}.log"
                path.write_text(unknown(s, n))
            elif kind == "oom-gz":
                path = d / f"serve-{i}.log.gz"
                path.write_bytes(gzip.compress((FIXTURES / FILES[kind]).read_bytes(), mtime=0))
            else:
                path = d / f"serve-{i}.log"
                shutil.copyfile(FIXTURES / FILES[kind], path)
            when = datetime(2026, 11, 10 + s % 18, 12, 0, tzinfo=timezone.utc).timestamp()  # noqa: UP017
            os.utime(path, (when, when))
            a.logs += 1
            a.counts[kind] = a.counts.get(kind, 0) + 1
    (root / "node00" / "empty.log").write_bytes(b"")
    a.empty = 1
    hidden = root / ".staging"
    hidden.mkdir(exist_ok=True)
    shutil.copyfile(FIXTURES / "segfault-killed.log", hidden / "partial.log")
    (root / "node00" / ".serve.log.swp").write_bytes(b"not a log")
    bad = root / f"node{min(1, servers - 1):02d}" / "rotated.log.gz"
    bad.write_bytes(b"\x1f\x8bnot really gzip")
    a.broken.append(str(bad))
    return a
