"""Line prefixes of every dialect, including the wrappers real pasted logs carry."""

import pytest

from triage.pipeline.parse.lines import parse_line

CASES = [
    # (raw line, message, rank, dialect, ts)
    ("[2025-06-24 22:26:45 DP15 TP15] Decode batch. #running-req: 3", "Decode batch. #running-req: 3", "DP15 TP15", "sglang", "2025-06-24 22:26:45"),
    ("[2025-06-24 22:26:45 TP0] Scheduler hit an exception: Traceback (most recent call last):",
     "Scheduler hit an exception: Traceback (most recent call last):", "TP0", "sglang", "2025-06-24 22:26:45"),
    ("[2025-06-24 22:26:45 PP1 TP0] Load weight end.", "Load weight end.", "PP1 TP0", "sglang", "2025-06-24 22:26:45"),
    ("[TP5 EP5] Scheduler hit an exception: x", "Scheduler hit an exception: x", "TP5 EP5", "sglang", None),
    ("[12:00:00 TP0] Decode batch.", "Decode batch.", "TP0", "sglang", "12:00:00"),
    ("[2025-06-24 22:26:45] Received sigquit from a child process.", "Received sigquit from a child process.", None, "sglang", "2025-06-24 22:26:45"),
    ("[2026-10-30 12:00:00.123 TP3] x", "x", "TP3", "sglang", "2026-10-30 12:00:00.123"),
    ("INFO 05-12 10:11:12 [core.py:123] Initializing", "Initializing", None, "vllm", "05-12 10:11:12"),
    ("INFO 01-11 15:51:02 llm_engine.py:70] old format", "old format", None, "vllm", "01-11 15:51:02"),
    ("(VllmWorker rank=3 pid=123) ERROR 05-12 10:11:12 [multiproc_executor.py:527] boom", "boom", "rank3", "vllm", "05-12 10:11:12"),
    ("(EngineCore_DP0 pid=456) ERROR 05-12 10:11:12 [core.py:710] boom", "boom", "EngineCore_DP0:456", "vllm", "05-12 10:11:12"),
    ("(EngineCore pid=4242) INFO 11-01 12:34:56 [core.py:88] up", "up", "EngineCore:4242", "vllm", "11-01 12:34:56"),
    ("(Worker_TP1 pid=9) INFO 11-01 12:34:56 [gpu_worker.py:1] w", "w", "TP1", "vllm", "11-01 12:34:56"),
    ("[rank0]:[E219 12:14:43.351647859 ProcessGroupNCCL.cpp:1595] [PG 0 Rank 0] timeout", "[PG 0 Rank 0] timeout", "rank0", "torch", None),
    ("(SGLangEngine pid=952, ip=10.150.236.219) [2025-11-06 01:16:21 TP0] Scheduler hit", "Scheduler hit", "TP0", "sglang", "2025-11-06 01:16:21"),
    ("2025-03-18T09:12:01.104512Z stdout F [2025-03-18 09:12:01 TP1] Load weight end.", "Load weight end.", "TP1", "sglang", "2025-03-18 09:12:01"),
    ("vllm-1  | INFO 05-12 10:11:12 [api_server.py:1] up", "up", None, "vllm", "05-12 10:11:12"),
    ("\x1b[36m(VllmWorkerProcess pid=303)\x1b[0m INFO 09-03 08:15:02 multiproc_worker_utils.py:215] ready", "ready", "VllmWorkerProcess:303", "vllm", "09-03 08:15:02"),
    ("INFO:     Application startup complete.", "Application startup complete.", None, "uvicorn", None),
    ("2024-03-06T17:53:22.335714Z ERROR shard-manager: text_generation_launcher: Shard complete", "shard-manager: text_generation_launcher: Shard complete", None, "tracing", "2024-03-06T17:53:22.335714Z"),
    ("  File \"/x/y.py\", line 3, in f", "  File \"/x/y.py\", line 3, in f", None, None, None),
]


@pytest.mark.parametrize("raw,message,rank,dialect,ts", CASES)
def test_prefixes(raw, message, rank, dialect, ts):
    ln = parse_line(1, raw)
    assert ln.message == message
    assert ln.rank == rank
    assert ln.dialect == dialect
    assert ln.ts == ts


def test_carriage_return_and_ansi_are_stripped():
    ln = parse_line(7, "\x1b[1;33m[2025-01-01 00:00:00 TP0] warn\x1b[0m\r")
    assert ln.text == "[2025-01-01 00:00:00 TP0] warn"
    assert ln.message == "warn"


def test_doubled_worker_prefix_keeps_the_last():
    ln = parse_line(1, "(VllmWorkerProcess pid=303) (VllmWorkerProcess pid=306) INFO 09-03 08:15:02 x.py:1] hi")
    assert ln.rank == "VllmWorkerProcess:306"
    assert ln.message == "hi"
