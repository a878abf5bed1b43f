"""Compiled `re` patterns kept on disk (triage/core/recache.py): read back only when intact, this
user's and made by this very Python, and always the pattern `re.compile` would have made."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from triage.core import diskcache, recache

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = [(r"(?P<n>\d+) reqs", 0), (r"token usage: (\d+\.\d+)", re.I), (rb"#running-req: (\d{1,18})(?!\d)", 0),
            (r"^\s*File \"(?P<file>[^\"]+)\", line (?P<line>\d+)", re.M), (r"[\x00-\x08\u200e\u2066-\u2069]", 0)]
TEXT = 'x 12 reqs TOKEN USAGE: 0.50\n  File "a.py", line 3\u200e'


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A process's first sight of the module: nothing loaded, nothing kept, disk at `tmp_path`."""
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    monkeypatch.setattr(recache, "_table", {})
    monkeypatch.setattr(recache, "_used", set())
    monkeypatch.setattr(recache, "_state", {"path": None, "loaded": False, "dirty": False, "ok": None})
    recache.use_disk(tmp_path)
    return tmp_path


def _restart(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    monkeypatch.setattr(recache, "_table", {})
    monkeypatch.setattr(recache, "_used", set())
    recache._state.update(loaded=False, dirty=False)
    recache.use_disk(directory)


def _same(a: re.Pattern, b: re.Pattern) -> bool:
    # a compiled pattern compares its source, flags and opcodes
    return a == b and a.groupindex == b.groupindex and a.groups == b.groups


def test_kept_patterns_are_read_back_and_equal_what_re_compiles(fresh, monkeypatch):
    first = [recache.re_compile(p, f) for p, f in PATTERNS]
    recache.save()
    files = list(fresh.glob("re-*.bin"))
    assert len(files) == 1
    _restart(monkeypatch, fresh)
    built: list[object] = []
    monkeypatch.setattr(recache, "_build", lambda *a: built.append(a) or pytest.fail("compiled again"))
    again = [recache.re_compile(p, f) for p, f in PATTERNS]
    assert not built
    for (p, f), a, b in zip(PATTERNS, first, again, strict=True):
        ref = re.compile(p, f)
        assert _same(a, ref) and _same(b, ref)
        text = TEXT.encode() if isinstance(p, bytes) else TEXT
        assert [m.span() for m in b.finditer(text)] == [m.span() for m in ref.finditer(text)]


def test_a_damaged_or_foreign_file_is_a_miss(fresh, monkeypatch):
    recache.re_compile(*PATTERNS[0])
    recache.save()
    path = next(fresh.glob("re-*.bin"))
    good = path.read_bytes()
    at = good.index(b'"patterns"') + 20
    for bad in (good[:at] + bytes([good[at] ^ 1]) + good[at + 1 :], good[: len(good) // 2], b"not ours"):
        path.write_bytes(bad)
        _restart(monkeypatch, fresh)
        assert _same(recache.re_compile(*PATTERNS[0]), re.compile(*PATTERNS[0]))
        assert recache._state["dirty"], "the file was not used"
    # intact, but written by another Python build
    doc = json.loads(diskcache.unseal(good, recache.MAGIC))
    doc["python"] = "2.7.18 cpython-27"
    path.write_bytes(diskcache.seal(recache.MAGIC, json.dumps(doc).encode()))
    _restart(monkeypatch, fresh)
    recache.re_compile(*PATTERNS[0])
    assert recache._state["dirty"]


def test_a_file_others_can_write_is_not_read(fresh, monkeypatch):
    recache.re_compile(*PATTERNS[0])
    recache.save()
    path = next(fresh.glob("re-*.bin"))
    os.chmod(path, 0o666)
    _restart(monkeypatch, fresh)
    recache.re_compile(*PATTERNS[0])
    assert recache._state["dirty"] and not recache._table.keys() - {(False, PATTERNS[0][0], 0)}


def test_the_library_and_triage_no_cache_keep_nothing(fresh, monkeypatch, tmp_path):
    recache.use_disk(None)
    recache.re_compile(r"library (\d+)")
    recache.save()
    monkeypatch.setenv("TRIAGE_NO_CACHE", "1")
    recache.use_disk(tmp_path)
    recache.re_compile(r"no cache (\d+)")
    recache.save()
    assert not list(tmp_path.glob("re-*"))


def test_a_python_whose_compiler_api_differs_gets_plain_re(fresh, monkeypatch):
    def changed(*_a):  # noqa: ANN202
        raise AttributeError("module 're._compiler' has no attribute '_code'")

    monkeypatch.setattr(recache, "_build", changed)
    assert _same(recache.re_compile(*PATTERNS[0]), re.compile(*PATTERNS[0]))
    recache.save()
    assert recache._state["ok"] is False and not list(fresh.glob("re-*"))


def test_a_bad_pattern_raises_what_re_raises(fresh):
    with pytest.raises(re.error):
        recache.re_compile(r"(unclosed")


@pytest.mark.slow  # three fresh interpreters, every pattern compiled both ways (tests/conftest.py: --slow, TRIAGE_SLOW=1)
def test_every_pattern_a_run_keeps_is_the_one_re_compiles(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("TRIAGE_NO_CACHE", None)
    outs = []
    for log in ("examples/sglang-nsa-crash.log", "examples/vllm-kv-cache-too-small.log", "examples/sglang-nsa-crash.log"):
        p = subprocess.run([sys.executable, "-m", "triage", "analyze", "--format", "json", log],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        assert p.returncode in (0, 1), p.stderr
        outs.append(p.stdout)
    assert outs[0] == outs[2]  # the second run of the same log, from kept patterns, says the same
    path = next((tmp_path / "triage").glob("re-*.bin"))
    rows = json.loads(diskcache.unseal(path.read_bytes(), recache.MAGIC))["patterns"]
    assert len(rows) > 50
    from array import array

    for is_bytes, text, given, flags, code, groups, gi, ig in rows:
        pattern = text.encode("latin-1") if is_bytes else text
        kept = recache._engine(pattern, (flags, array("I", bytes.fromhex(code)).tolist(), groups, gi, tuple(ig)))
        assert _same(kept, re.compile(pattern, given)), text


def test_a_kept_entry_the_engine_refuses_is_compiled_the_usual_way(fresh, monkeypatch):
    # intact file, wrong opcodes (a bug, or an engine that changed without changing MAGIC):
    # _sre validates what it is given and refuses it; the pattern is then compiled by re
    p, f = PATTERNS[0]
    recache.re_compile(p, f)
    key = (False, p, f)
    flags, code, groups, gi, ig = recache._table[key]
    recache._table[key] = (flags, [0xFFFF] * len(code), groups, gi, ig)
    recache.save()
    _restart(monkeypatch, fresh)
    assert _same(recache.re_compile(p, f), re.compile(p, f))
    assert key not in recache._table  # not kept in memory, so not written back
