"""The compiled keyword database kept on disk (triage/pipeline/hsdb.py): read back only when it
is the same database, intact and this user's; everything else is a miss, compiled again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from triage.pipeline import hsdb
from triage.pipeline.scan import Prefilter

hyperscan = pytest.importorskip("hyperscan")

WORDS = ["CUDA error", "illegal memory access", "Traceback (most recent call last)", "NCCL"]
TEXT = b"x\nRuntimeError: CUDA error: an illegal memory access was encountered\nNCCL WARN\n"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    d = tmp_path / "xdg" / "triage"
    return d


def _compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the databases compiled from here on (a read-back one is not compiled)."""
    count: list[int] = []
    real = hyperscan.Database

    def counting(*a, **k):  # noqa: ANN002, ANN003, ANN202
        count.append(1)
        return real(*a, **k)

    monkeypatch.setattr(hyperscan, "Database", counting)
    return count


def test_a_kept_database_is_read_back_and_scans_the_same(cache, monkeypatch):
    fresh = Prefilter(WORDS, cache=None).hits(TEXT)
    compiled = _compiles(monkeypatch)
    first = Prefilter(WORDS, cache=cache)
    files = list(cache.glob("hs-*.db"))
    assert len(files) == 1 and len(compiled) == 1
    again = Prefilter(WORDS, cache=cache)
    assert len(compiled) == 1, "the second prefilter read the database instead of compiling it"
    assert first.hits(TEXT) == again.hits(TEXT) == fresh and fresh


def test_other_keywords_are_another_database(cache):
    Prefilter(WORDS, cache=cache)
    Prefilter([*WORDS, "out of memory"], cache=cache)
    assert len(list(cache.glob("hs-*.db"))) == 2


@pytest.mark.parametrize("damage", ["flip", "cut", "magic", "empty"])
def test_a_damaged_database_is_compiled_again(cache, monkeypatch, damage):
    Prefilter(WORDS, cache=cache)
    f = next(cache.glob("hs-*.db"))
    data = bytearray(f.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    elif damage == "cut":
        data = data[: len(data) - 7]
    elif damage == "magic":
        data[:4] = b"XXXX"
    else:
        data = bytearray()
    f.write_bytes(bytes(data))
    compiled = _compiles(monkeypatch)
    pf = Prefilter(WORDS, cache=cache)
    assert len(compiled) == 1
    assert pf.hits(TEXT) == Prefilter(WORDS).hits(TEXT)
    assert hsdb._read(hyperscan, f) is not None, "the miss wrote a good database back"


def test_a_database_others_can_write_is_not_read(cache, monkeypatch):
    Prefilter(WORDS, cache=cache)
    f = next(cache.glob("hs-*.db"))
    os.chmod(f, 0o666)
    compiled = _compiles(monkeypatch)
    Prefilter(WORDS, cache=cache)
    assert len(compiled) == 1


def test_a_big_logs_window_database_is_never_kept(cache):
    pf = Prefilter(WORDS, cache=cache, window=(100, 227))
    assert pf.window == (100, 227)
    assert not cache.exists() or not list(cache.glob("hs-*.db"))


def test_no_cache_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("TRIAGE_NO_CACHE", "1")
    Prefilter(WORDS, cache=cache)
    assert not cache.exists()


def test_kept_databases_are_pruned(cache):
    for i in range(hsdb.KEEP + 3):
        Prefilter([*WORDS, f"word number {i}"], cache=cache)
    assert len(list(cache.glob("hs-*.db"))) == hsdb.KEEP


def test_only_the_command_lines_catalogue_carries_a_cache(tmp_path, monkeypatch):
    from triage.catalogue.load import load_catalogue

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    assert load_catalogue().cache_dir is None
    assert load_catalogue(cache=True).cache_dir == tmp_path / "xdg" / "triage"
    monkeypatch.setenv("TRIAGE_NO_CACHE", "1")
    assert load_catalogue(cache=True).cache_dir is None
