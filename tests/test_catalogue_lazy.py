"""A catalogue read from its cache builds a signature's or workaround's spec the first time it
is used (load.Signature, core/lazymap.LazyMap), and what it builds is the spec the YAML gives."""

from __future__ import annotations

import pytest

from triage.catalogue import load
from triage.core.lazymap import _LATER, LazyMap


@pytest.fixture
def cached(tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    load.load_catalogue(cache=True)  # writes the cache
    load._READ.clear()  # this process read nothing yet: the next load reads the file
    return load.load_catalogue(cache=True)


def test_nothing_is_built_until_it_is_looked_up(cached):
    fresh = load.load_catalogue()
    wk = cached.workarounds
    assert isinstance(wk, LazyMap)
    assert all(v is _LATER for v in wk._items.values())
    assert all(s._spec is None for s in cached.signatures.values())
    assert cached.keywords() == fresh.keywords()  # read without building a spec
    wid = "sglang-disable-radix-cache"
    assert wk[wid] == fresh.workarounds[wid] and wk._items[wid] is not _LATER
    assert sum(v is not _LATER for v in wk._items.values()) == 1
    sid = "sglang-nsa-page-table-1-flattened"
    assert cached.signatures[sid].spec == fresh.signatures[sid].spec
    assert sum(s._spec is not None for s in cached.signatures.values()) == 1


def test_merging_another_directory_keeps_entries_unbuilt(cached, tmp_path):
    extra = tmp_path / "mine"
    (extra / "workarounds").mkdir(parents=True)
    (extra / "signatures").mkdir()
    both = load.load_catalogue([str(extra)], cache=True)
    assert len(both.workarounds) == len(cached.workarounds)
    assert all(v is _LATER for v in both.workarounds._items.values())
    assert list(both.workarounds) == list(cached.workarounds)  # the order entries were added in
