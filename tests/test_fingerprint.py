"""Fingerprints: one per crash, whatever varies between occurrences; two for two crashes."""

from __future__ import annotations

import crashlogs
import pytest

from triage.core.fingerprint import fingerprint, frame_module, is_library, mask, top_frames
from triage.pipeline.analyze import analyze_text


def _fp(catalogue, text: str) -> str:
    rep = analyze_text(text, catalogue)
    assert len(rep.failures) == 1, [(f.exception, f.line) for f in rep.failures]
    return rep.failures[0].fingerprint


@pytest.mark.parametrize("other", [crashlogs.SECOND, crashlogs.CHECKOUT], ids=["site-packages", "source-checkout"])
def test_same_sglang_crash_one_fingerprint(catalogue, other):
    """Ranks, timestamps, install prefix (dist-packages, site-packages, a source checkout),
    port, tensor shapes and request ids differ; the crash is the same."""
    a = crashlogs.sglang_log(crashlogs.FIRST)
    b = crashlogs.sglang_log(other)
    assert a != b
    rep = analyze_text(b, catalogue)
    assert len(rep.failures[0].ranks) == len(other.ranks)  # every rank's copy is one failure
    assert _fp(catalogue, a) == _fp(catalogue, b)


def test_same_vllm_crash_one_fingerprint(catalogue):
    """Request ids and hex addresses inside the message, different pids and prefixes."""
    a = crashlogs.vllm_log(crashlogs.FIRST)
    b = crashlogs.vllm_log(crashlogs.SECOND)
    assert crashlogs.FIRST.hex_addr in a and crashlogs.SECOND.hex_addr in b
    assert _fp(catalogue, a) == _fp(catalogue, b)


def test_same_type_different_message_two_fingerprints(catalogue):
    a = crashlogs.sglang_log(crashlogs.FIRST)
    b = crashlogs.sglang_log(crashlogs.FIRST, exception_line="RuntimeError: expected scalar type BFloat16 but found Float")
    assert _fp(catalogue, a) != _fp(catalogue, b)


def test_same_message_different_frames_two_fingerprints(catalogue):
    """The same RuntimeError text raised from the KV-cache write and from the prefill kernel
    call are two crashes (engine frames count; torch's wrapper frames do not)."""
    a = crashlogs.sglang_log(crashlogs.FIRST)
    b = crashlogs.sglang_log(crashlogs.FIRST, inner=crashlogs.DTYPE_FRAMES)
    assert _fp(catalogue, a) != _fp(catalogue, b)
    # ... and that difference survives another rank, prefix and shape
    c = crashlogs.sglang_log(crashlogs.SECOND, inner=crashlogs.DTYPE_FRAMES)
    assert _fp(catalogue, b) == _fp(catalogue, c)


def test_frames_skip_library_and_ignore_install_prefix():
    frames = [
        ("/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", "run_batch"),
        ("/usr/lib/python3.10/threading.py", "run"),
        ("/usr/local/lib/python3.10/dist-packages/sglang/srt/mem_cache/memory_pool.py", "set_kv_buffer"),
        ("/usr/local/lib/python3.10/dist-packages/torch/nn/modules/module.py", "_call_impl"),
        ("/usr/local/lib/python3.10/dist-packages/torch/utils/_contextlib.py", "decorate_context"),
    ]
    assert top_frames(frames, n=2) == ["sglang/srt/mem_cache/memory_pool.py:set_kv_buffer",
                                       "sglang/srt/managers/scheduler.py:run_batch"]
    assert not is_library("/opt/conda/lib/python3.11/site-packages/vllm/v1/engine/core.py")
    assert is_library("/usr/lib/python3.12/concurrent/futures/thread.py")
    assert frame_module("/sgl-workspace/sglang/python/sglang/srt/x.py") == "sglang/srt/x.py"
    assert frame_module("/workspace/vllm/vllm/v1/engine/core.py") == "vllm/v1/engine/core.py"
    assert fingerprint("RuntimeError", "boom", frames) == fingerprint(
        "RuntimeError", "boom", [(f.replace("/usr/local/lib/python3.10/dist-packages", "/opt/conda/lib/python3.11/site-packages"), fn)
                                 for f, fn in frames])


def test_mask_variables():
    assert mask("value tensor of shape [8, 4096] on TP3 at 0x7f3a2c1b5e50") == \
        mask("value tensor of shape [16, 128] on TP0 at 0x55d4c3a0b2c0")
    assert mask("rid=3767d16dc0963935810c3dc30bb47b39 port 30000") == mask("rid=a1b2c3d4e5f60718293a4b5c6d7e8f90 port 8000")
