"""Runs of digits no server prints (int() refuses a string of over 4,300 digits) and malformed
decimals are text, not figures: analyze gives its report, never an internal error."""

import pytest

from triage.pipeline.analyze import analyze_text

RUN = "9" * 5000
CRASH = ('Traceback (most recent call last):\n  File "/sgl/scheduler.py", line 10, in event_loop\n    self.run()\n'
         "RuntimeError: boom\n")


@pytest.mark.parametrize("text", [
    f'Traceback (most recent call last):\n  File "/x/s.py", line {RUN}, in f\n    g()\nRuntimeError: boom\n',
    f'Fatal Python error: Segmentation fault\n\nThread 0x0001 (most recent call first):\n  File "/x/s.py", line {RUN} in f\n',
    f"[2025-09-14 06:14:29 TP{RUN}] Scheduler hit an exception: {CRASH}",
    f"[2025-09-14 06:14:29 TP0] KV Cache is allocated. #tokens: {RUN}, K size: 1 GB\n{CRASH}",
    f"[2025-09-14 06:14:29 TP0] max_total_num_tokens={RUN}, chunked_prefill_size=8192\n{CRASH}",
    f"INFO 09-14 06:14:29 [kv_cache_utils.py:1] GPU KV cache size: , tokens\n{CRASH}",
    f"torch.OutOfMemoryError: CUDA out of memory. GPU {RUN} has a total capacity of 1.2.3 GiB of which 0 bytes is free\n",
    f"[2025-09-14 06:14:29 TP0] Decode batch. #running-req: {RUN}, #token: 1, token usage: 0.3.5, "
    f"gen throughput (token/s): 1.2.3, #queue-req: {RUN}\n{CRASH}",
])
def test_no_figure_no_crash(catalogue, text):
    report = analyze_text(text, catalogue)
    assert report.failures  # the failure is still found and reported
