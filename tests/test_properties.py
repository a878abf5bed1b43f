"""Property-based: for any bytes, and for random logs built from real line shapes, reading,
parsing, matching, redaction and rendering finish within a bound and give a well-formed report.

Deterministic (derandomize=True) so that CI sees the same examples every run; the library is
called directly (no subprocess) to keep the whole file within ~30 s.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import time

import pytest
from conftest import property_examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage.catalogue.load import load_catalogue
from triage.pipeline.analyze import Options, analyze_scan, analyze_text, prefilter_for
from triage.pipeline.read import iter_chunks
from triage.pipeline.redact import MASK, redact_report, redact_text
from triage.pipeline.scan import scan
from triage.render.json_out import render_json
from triage.render.markdown import render_markdown


@functools.cache
def _cat():  # noqa: ANN202 - loaded by the first test that runs, not when the suite is collected
    return load_catalogue()


OPTS = Options(prefer_hyperscan=False, workers=1)
# 150 examples with the slow tests, 30 in a plain `python -m pytest` (conftest)
PROFILE = settings(max_examples=property_examples(), deadline=None, derandomize=True, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BOUND = 5.0  # CPU seconds for one example (wall time would fail on a loaded machine); the real cost is milliseconds


def _fences_close(md: str) -> None:
    lines = md.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^ {0,3}(`{3,})[^`]*$", lines[i])
        if m:
            n = len(m.group(1))
            j = next((j for j in range(i + 1, len(lines)) if re.match(r"^ {0,3}`{3,}\s*$", lines[j])
                      and len(lines[j].strip()) >= n), None)
            assert j is not None, f"fence at line {i + 1} never closes"
            assert len(lines[j].strip()) == n, (lines[i], lines[j])
            i = j
        i += 1


def _check(report, started: float) -> None:  # noqa: ANN001
    assert report.exit_code in (0, 1)
    for r in (report, redact_report(report, ips=True)):
        doc = json.loads(render_json(r))
        assert doc["exit_code"] in (0, 1)
        assert isinstance(doc["failures"], list) and isinstance(doc["findings"], list)
        md = render_markdown(r)
        assert md.startswith("# Triage: ")
        _fences_close(md)
        assert "\x1b" not in md and "\x00" not in md
    assert time.process_time() - started < BOUND


def _analyze_bytes(data: bytes, size: int | None = None):  # noqa: ANN202
    pf = prefilter_for(_cat(), False)
    chunks = iter_chunks(io.BytesIO(data), size=size) if size else iter_chunks(io.BytesIO(data))
    return analyze_scan(scan(chunks, pf), "<bytes>", _cat(), OPTS)


@PROFILE
@given(st.binary(max_size=4096))
def test_any_bytes(data):
    t = time.process_time()
    report = _analyze_bytes(data)
    _check(report, t)
    assert report.lines == data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)


@PROFILE
@given(st.binary(max_size=2048), st.integers(min_value=1, max_value=64))
def test_chunk_size_does_not_change_the_result(data, size):
    """Tiny chunks (every line crosses a border) give the same report as one big chunk."""
    a = json.loads(render_json(_analyze_bytes(data)))
    b = json.loads(render_json(_analyze_bytes(data, size)))
    assert a == b


@PROFILE
@given(st.text(max_size=2048))
def test_any_text(text):
    t = time.process_time()
    _check(analyze_text(text, _cat(), options=OPTS), t)


# -- structured logs from real line shapes ------------------------------------------------------

_WORDS = st.sampled_from([
    "CUDA error: an illegal memory access was encountered", "CUDA out of memory. Tried to allocate 2.00 GiB",
    "NCCL WARN Call to ibv_reg_mr failed", "Watchdog caught collective operation timeout", "Decode batch.",
    "#running-req: 12, #token: 3, token usage: 0.50, gen throughput (token/s): 1.5, #queue-req: 0",
    "Prefill batch. #new-seq: 1, #new-token: 64, #cached-token: 0", "Load weight begin.", "Capture cuda graph begin.",
    "The server is fired up and ready to roll!", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "api_key='s3cr3t-v4lue'",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==", "<script>alert(1)</script>", "| a | b |", "```", "`` ` ````",
    "[link](http://x)", "\x1b[31mred\x1b[0m", "\x00", "\r", "\u202e", "café", "Running: 3 reqs, Waiting: 0 reqs",
    "Prefix cache hit rate: 12.5%", "AttributeError: 'X' object has no attribute 'y'", "nan", "1e999", "-1",
    "server_args=ServerArgs(model_path='m', tp_size=8, attention_backend='fa3')", "Received sigquit from a child",
    "terminate called after throwing an instance of 'c10::Error'", "Fatal Python error: Segmentation fault",
])
_PREFIX = st.sampled_from([
    "", "[2025-06-24 22:26:45 TP0] ", "[2025-06-24 22:26:45 DP1 TP3] ", "[rank3]:", "[rank0]:[E219 12:14:43.351 x.cpp:12] ",
    "INFO 05-12 10:11:12 [core.py:12] ", "ERROR 05-12 10:11:12 [engine.py:9] ", "(VllmWorker rank=1 pid=99) ",
    "(EngineCore_DP0 pid=4) ERROR 05-12 10:11:12 [core.py:1] ", "2025-01-01T00:00:00.123+00:00 stderr F ",
    "sglang-1  | ", "2024-03-06T17:53:22.335714Z ERROR shard-manager: ", "I0110 21:30:54.920681 60 server.cc:592] ",
])
_FRAME = st.builds(lambda f, n, fn, code: f'  File "/{f}.py", line {n}, in {fn}\n    {code}',
                   st.sampled_from(["sgl/sglang/srt/managers/scheduler", "v/vllm/worker", "x/<img>", "a`b"]),
                   st.integers(0, 10**6), st.sampled_from(["run", "forward", "`x`|y", "<module>"]), _WORDS)
_EXC = st.builds(lambda e, m: f"{e}: {m}", st.sampled_from(["RuntimeError", "torch.OutOfMemoryError", "ValueError",
                                                          "AttributeError", "KeyError", "Exception"]), _WORDS)
_TRACEBACK = st.builds(
    lambda head, frames, exc, cut: "\n".join(([head + "Traceback (most recent call last):"] + frames + [exc])[:cut]),
    _PREFIX, st.lists(_FRAME, max_size=6), _EXC, st.integers(1, 10))
_LINE = st.one_of(st.builds(lambda p, w: p + w, _PREFIX, _WORDS), _TRACEBACK,
                  st.builds(lambda p, w: p + w, _PREFIX, st.text(max_size=80)))


@st.composite
def _logs(draw) -> bytes:  # noqa: ANN001
    """Lines of several processes interleaved, in any line-ending style."""
    streams = draw(st.lists(st.lists(_LINE, max_size=12), min_size=1, max_size=4))
    order = draw(st.permutations([i for i, s in enumerate(streams) for _ in s]))
    pos = [0] * len(streams)
    lines = []
    for i in order:
        lines.append(streams[i][pos[i]])
        pos[i] += 1
    eol = draw(st.sampled_from(["\n", "\r\n", "mixed"]))
    text = "".join(ln + ("\r\n" if eol == "mixed" and k % 2 else "\n" if eol == "mixed" else eol)
                   for k, ln in enumerate("\n".join(lines).split("\n")))
    return text.encode("utf-8", "surrogatepass")


@PROFILE
@given(_logs())
def test_structured_logs(data):
    t = time.process_time()
    report = _analyze_bytes(data)
    _check(report, t)
    lf = _analyze_bytes(data.replace(b"\r\n", b"\n"))
    assert json.loads(render_json(report))["failures"] == json.loads(render_json(lf))["failures"]


@PROFILE
@given(_logs())
def test_secrets_in_structured_logs_are_masked(data):
    red = redact_report(_analyze_bytes(data))
    out = render_json(red) + render_markdown(red)
    for secret in ("hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567", "s3cr3t-v4lue", "dXNlcjpwYXNzd29yZA=="):
        assert secret not in out


@PROFILE
@given(st.text(max_size=300))
def test_redaction_is_idempotent_and_never_grows_a_secret(text):
    once = redact_text(text, ips=True)
    assert redact_text(once, ips=True) == once
    assert MASK not in text or MASK in once


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(st.binary(min_size=0, max_size=2048), st.integers(0, 2048))
def test_any_gzip_prefix_reads_or_fails_cleanly(data, cut):
    """A .gz cut anywhere: the readable text, or one TriageError; nothing else escapes."""
    from triage.core.errors import TriageError
    from triage.pipeline.read import _open_gzip

    gz = gzip.compress(data)[:cut]
    try:
        out = b"".join(iter_chunks(_open_gzip(io.BytesIO(gz)), name="x.gz"))
    except TriageError as e:
        assert "truncated or corrupt" in str(e)
    else:
        assert data.startswith(out) or not gz


@pytest.mark.parametrize("seed", range(3))
def test_random_large_input_is_fast(seed):
    import random

    rng = random.Random(seed)
    data = bytes(rng.getrandbits(8) for _ in range(300_000))
    t = time.process_time()
    _check(_analyze_bytes(data), t)
