"""`triage new`: an unknown crash becomes a catalogue entry that recognises the next occurrence."""

from __future__ import annotations

import json

import crashlogs
import regex
import yaml
from conftest import run_cli

from triage.commands.catalogue.check import literal_of
from triage.commands.new import choose_keyword, generalise

# A real torch message of the same family (torch.broadcast_tensors) that a careless
# "shape mismatch" pattern would catch.
NEAR_MISS = ("RuntimeError: shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is between "
             "arg 0 with shape [8] and arg 1 with shape [6].\n")


def _logs(tmp_path):
    first, second = tmp_path / "first.log", tmp_path / "second.log"
    first.write_text(crashlogs.sglang_log(crashlogs.FIRST))
    second.write_text(crashlogs.sglang_log(crashlogs.SECOND))
    return first, second


def _fill(skeleton: str) -> str:
    """What the author does: explanation, workarounds, references, the proper fix, a real near miss."""
    data = yaml.safe_load(skeleton)
    data["explanation"] = (
        "The KV cache write of one attention layer received more new tokens than slots were allocated "
        "for the batch: the scheduler's token-to-slot mapping and the forward batch disagree. Seen with "
        "CUDA graphs replaying a batch whose size changed; running without CUDA graphs avoids it.\n")
    data["workarounds"] = ["sglang-disable-cuda-graph"]
    data["references"] = ["https://github.com/sgl-project/sglang/issues/1"]
    data["open_issue"] = "https://github.com/sgl-project/sglang/issues/1"
    data["examples"]["no_match"] = [NEAR_MISS]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)


def test_new_round_trip(tmp_path):
    first, second = _logs(tmp_path)
    p = run_cli("new", str(first))
    assert p.returncode == 0, p.stderr
    skeleton = p.stdout.decode()
    data = yaml.safe_load(skeleton)
    assert data["id"].startswith("sglang-runtime-error-")
    assert data["engine"] == "sglang" and data["severity"] == "crash"
    assert data["keywords"] == ["cannot be broadcast to indexing result of shape"]
    assert "memory_pool.py:set_kv_buffer" in data["frames"]
    assert "TODO" in data["explanation"] and "TODO" in data["examples"]["no_match"][0]

    # unfilled: rejected
    raw = tmp_path / "raw"
    (raw / "signatures").mkdir(parents=True)
    (raw / "signatures" / "x.yaml").write_text(skeleton)
    p = run_cli("catalogue", "check", str(raw), "-q")
    assert p.returncode == 1
    out = p.stdout.decode()
    assert "still says TODO" in out and "explanation" in out and "references" in out

    # filled: clean, and it recognises the crash in both logs
    cat = tmp_path / "cat"
    (cat / "signatures").mkdir(parents=True)
    (cat / "signatures" / "x.yaml").write_text(_fill(skeleton))
    p = run_cli("catalogue", "check", str(cat), "-q")
    assert p.returncode == 0, p.stdout.decode()
    for log in (first, second):
        p = run_cli("analyze", str(log), "--catalogue", str(cat), "--format", "json")
        assert p.returncode == 1, p.stderr
        d = json.loads(p.stdout)
        top = d["findings"][0]
        assert top["signature"] == data["id"], [f["signature"] for f in d["findings"]]
        assert top["failure"] == 0
        # the new signature explains the failure: `new` finds nothing left to describe
    p = run_cli("new", str(second), "--catalogue", str(cat))
    assert p.returncode == 2 and b"already has a specific signature" in p.stderr


def test_new_output_file_and_refusals(tmp_path):
    first, _ = _logs(tmp_path)
    out = tmp_path / "sig.yaml"
    p = run_cli("new", str(first), "-o", str(out), "--failure", "1")
    assert p.returncode == 0 and p.stdout == b"", p.stderr
    assert yaml.safe_load(out.read_text())["engine"] == "sglang"
    for args, needle in (
        (["-o", str(out)], b"exists; refusing"),
        (["-o", str(first)], b"is the input log"),
        (["--failure", "2"], b"has 1 failure(s)"),
        (["--failure", "0"], b"has 1 failure(s)"),
    ):
        p = run_cli("new", str(first), *args)
        assert p.returncode == 2, args
        assert p.stderr.count(b"\n") == 1 and needle in p.stderr, p.stderr
    clean = tmp_path / "clean.log"
    clean.write_text(crashlogs.sglang_log(crashlogs.FIRST, crash=False))
    p = run_cli("new", str(clean))
    assert p.returncode == 2 and b"no failure found" in p.stderr


def test_new_vllm_crash_with_ids_and_addresses(tmp_path):
    """A vLLM engine-core crash whose message holds a request id and a hex address: the
    pattern generalises both and still matches another occurrence."""
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(crashlogs.vllm_log(crashlogs.FIRST))
    b.write_text(crashlogs.vllm_log(crashlogs.SECOND))
    p = run_cli("new", str(a))
    assert p.returncode == 0, p.stderr
    data = yaml.safe_load(p.stdout)
    assert data["id"].startswith("vllm-assertion-error-")
    pattern = data["patterns"][0]
    assert "0x[0-9a-fA-F]+" in pattern and "[0-9a-f]+" in pattern
    rx = regex.compile(pattern)
    assert rx.search(b.read_text()) and rx.search(a.read_text())


def test_generalise_variables():
    msg = ("shape mismatch: value tensor of shape [8, 4096] cannot be broadcast on TP3 at 0x7f3a2c1b5e50, "
           "rid 3767d16dc0963935810c3dc30bb47b39 in '/tmp/x/y.bin' port 30000 took 1.5 s (8, 4)")
    rx = generalise(msg)
    for cls in (r"\[[\d, ]+\]", r"TP\d+", r"0x[0-9a-fA-F]+", "[0-9a-f]+", "'[^']*'", r"\d+", r"[\d.]+", r"\([\d, ]+\)"):
        assert cls in rx, cls
    other = ("shape mismatch: value tensor of shape [16, 1024] cannot be broadcast on TP0 at 0x55d4c3a0b2c0, "
             "rid a1b2c3d4e5f60718293a4b5c6d7e8f90 in '/opt/a/b.bin' port 8000 took 12.25 s (16, 2)")
    assert regex.compile(rx).fullmatch(other)
    # a quoted name is part of the message, not a variable
    assert generalise("'PrefillMetadata' object has no attribute 'page_table_1_flattened'") == \
        "'PrefillMetadata' object has no attribute 'page_table_1_flattened'"
    kw = choose_keyword(msg)
    assert kw == "cannot be broadcast on" or kw == "shape mismatch: value tensor of shape"
    assert kw in literal_of(rx)
    assert choose_keyword("got 12 but expected 13") is None  # nothing distinctive to prefilter on
