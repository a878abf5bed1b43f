"""Tracebacks: chains, interleaved ranks, rank folding, cut-off and headless excerpts."""

from triage.pipeline.parse.failures import build_failures, spans_of
from triage.pipeline.parse.lines import parse_line
from triage.pipeline.parse.markers import find_markers
from triage.pipeline.parse.traceback import TRUNCATED, parse_tracebacks


def failures_of(text: str):
    lines = [parse_line(i + 1, t) for i, t in enumerate(text.splitlines())]
    tracebacks = parse_tracebacks(lines)
    return build_failures(tracebacks, find_markers(lines, spans_of(tracebacks)))


FRAMES = [
    '  File "/sgl/sglang/srt/managers/scheduler.py", line 2708, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/sgl/sglang/srt/managers/scheduler.py", line 1951, in run_batch',
    "    batch_result = self.model_worker.forward_batch_generation(",
    '  File "/sgl/sglang/srt/layers/attention/nsa/forward_mha.py", line 443, in forward_mha_extend',
    "    page_table = metadata.page_table_1_flattened",
    "AttributeError: 'PrefillMetadata' object has no attribute 'page_table_1_flattened'",
    "",
]


def _rank_block(rank: int) -> list[str]:
    return [f"[2025-06-24 22:33:04 TP{rank}] Scheduler hit an exception: Traceback (most recent call last):", *FRAMES]


def test_interleaved_ranks_fold_into_one_failure_naming_the_first():
    blocks = {r: _rank_block(r) for r in (5, 1, 3, 0)}
    order = [(5, 2), (1, 3), (5, 4), (3, 1), (1, 6), (0, 9), (3, 9), (5, 9), (1, 9), (0, 9)]
    pos = dict.fromkeys(blocks, 0)
    out = ["[2025-06-24 22:33:03 TP0] Decode batch. #running-req: 512, cuda graph: True"]
    for r, n in order:
        out += blocks[r][pos[r] : pos[r] + n]
        pos[r] += n
    for r in blocks:
        out += blocks[r][pos[r]:]
    out.append("[2025-06-24 22:33:05] Received sigquit from a child process. It usually means the child failed.")
    fails = failures_of("\n".join(out))
    assert len(fails) == 1
    f = fails[0]
    assert f.exception == "AttributeError"
    assert "page_table_1_flattened" in f.message
    assert f.ranks == ["TP0", "TP1", "TP3", "TP5"]
    assert f.first_rank == "TP5"
    assert [fr.function for fr in f.frames][-1] == "forward_mha_extend"
    assert f.followed_by and "sigquit" in f.followed_by[0].text


def test_chain_keeps_the_inner_cause():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/x/torch/_ops.py", line 756, in __call__',
        "    return self._op(*args, **kwargs)",
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 257, in __init__',
        "    raise Exception(",
        "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing",
        "Possible solutions:",
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    ])
    (f,) = failures_of(text)
    assert f.exception == "Exception"
    assert f.cause is not None and f.cause.exception == "RuntimeError"
    assert f.cause.message.startswith("CUDA error: operation not permitted")
    assert [c.exception for c in f.chain] == ["RuntimeError", "Exception"]


def test_direct_cause_chain():
    text = "\n".join([
        "Traceback (most recent call last):",
        '  File "/opt/app/serve.py", line 41, in load_tokenizer',
        "    return AutoTokenizer.from_pretrained(path)",
        "OSError: Can't load tokenizer for '/models/x'.",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/opt/app/serve.py", line 52, in build_engine',
        '    raise RuntimeError("engine start failed") from e',
        "RuntimeError: engine start failed",
    ])
    (f,) = failures_of(text)
    assert f.exception == "RuntimeError"
    assert f.cause.exception == "OSError"


def test_vllm_prefixed_workers_interleaved_line_by_line():
    a = "(VllmWorkerProcess pid=303) ERROR 09-03 08:16:57 multiproc_worker_utils.py:226] "
    b = "(VllmWorkerProcess pid=306) ERROR 09-03 08:16:57 multiproc_worker_utils.py:226] "
    body = ["Traceback (most recent call last):",
            '  File "/v/vllm/worker/model_runner.py", line 1396, in capture_model',
            "    graph_runner.capture(**capture_inputs)",
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU {g} has a total capacity of 79.15 GiB"]
    lines = []
    for row in body:
        lines += [a + row.format(g=1), b + row.format(g=2)]
    (f,) = failures_of("\n".join(lines))
    assert f.exception == "torch.OutOfMemoryError"
    assert f.ranks == ["VllmWorkerProcess:303", "VllmWorkerProcess:306"]


def test_traceback_cut_off_is_still_a_failure():
    text = "\n".join(_rank_block(0)[:5])
    (f,) = failures_of(text)
    assert f.exception == TRUNCATED
    assert f.frames[-1].function == "run_batch"


def test_excerpt_starting_inside_a_traceback():
    text = "\n".join([
        '  File "/v/vllm/entrypoints/openai/api_server.py", line 530, in run_server',
        '    temp_socket.bind(("", args.port))',
        "OSError: [Errno 98] Address already in use",
    ])
    (f,) = failures_of(text)
    assert f.exception == "OSError"
    assert f.message == "[Errno 98] Address already in use"


def test_stripped_indentation_still_parses():
    text = "\n".join([
        "Traceback (most recent call last):",
        'File "/a/b.py", line 1, in f',
        "g()",
        'File "/a/c.py", line 2, in g',
        "raise ValueError('x')",
        "ValueError: x",
    ])
    (f,) = failures_of(text)
    assert f.exception == "ValueError"
    assert [fr.function for fr in f.frames] == ["f", "g"]


def test_markers_without_traceback():
    text = "\n".join([
        "[rank0]:[E219 12:14:43.351647859 ProcessGroupNCCL.cpp:685] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=7340032, NumelOut=7340032, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
        "[rank1]:[E219 12:14:43.351647859 ProcessGroupNCCL.cpp:685] [Rank 1] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=7340032, NumelOut=7340032, Timeout(ms)=600000) ran for 600099 milliseconds before timing out.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        "Fatal Python error: Aborted",
    ])
    fails = failures_of(text)
    assert len(fails) == 1
    assert fails[0].kind == "nccl"
    assert fails[0].ranks == ["rank0", "rank1"]
    assert len(fails[0].followed_by) == 2


def test_benign_lines_are_not_failures():
    text = "\n".join([
        "host:1:1 [0] NCCL WARN NET/Plugin: Could not find: libnccl-net.so",
        "[2025-01-01 00:00:00 TP0] Setup Custom allreduce failed with CUDA error: peer access. To silence this warning, specify --disable-custom-all-reduce explicitly.",
        "WARNING 10-10 10:22:58 _custom_ops.py:18] Failed to import from vllm._C with ImportError('libcuda.so.1: cannot open shared object file: No such file or directory')",
        '[2025-01-01 00:00:00] INFO:     127.0.0.1:5555 - "POST /generate HTTP/1.1" 500 Internal Server Error',
    ])
    assert failures_of(text) == []
