"""core/lazymap.LazyMap: values made on first lookup, once; moving an entry between maps keeps
it unmade only where the maps make values the same way."""

from __future__ import annotations

from triage.core.lazymap import _LATER, LazyMap


def test_a_value_is_made_once_on_first_lookup_and_order_is_kept():
    made: list[int] = []

    def make(arg: int) -> str:
        made.append(arg)
        return f"v{arg}"

    m: LazyMap[str] = LazyMap(make)
    m.later("b", 2)
    m["a"] = "given"
    m.later("c", 3)
    assert list(m) == ["b", "a", "c"] and "c" in m and len(m) == 3 and made == []
    assert m["c"] == "v3" and m["c"] == "v3" and made == [3]
    m["b"] = "set"  # a value set over a pending one replaces it: never made
    assert m["b"] == "set" and made == [3]
    assert dict(m) == {"b": "set", "a": "given", "c": "v3"}


def test_take_keeps_an_entry_unmade_only_for_the_same_maker():
    def make(arg: int) -> int:
        return arg * 10

    src: LazyMap[int] = LazyMap(make)
    src.later("x", 1)
    plain: LazyMap[int] = LazyMap()  # no maker of its own: takes the source's
    plain.take(src, "x")
    assert plain._items["x"] is _LATER and plain["x"] == 10
    other: LazyMap[int] = LazyMap(lambda a: -a)
    other.take(src, "x")  # another maker: the value is made now, by the source's
    assert other._items["x"] == 10 and src._items["x"] == 10  # made once, kept by both
    other.take({"y": 5}, "y")
    assert other["y"] == 5


def test_a_pickled_map_keeps_pending_values_pending_and_makes_them_after():
    import pickle

    m: LazyMap[str] = LazyMap(str.upper)
    m.later("a", "made later")
    m["b"] = "given"
    m.later("c", "also later")
    assert m["c"] == "ALSO LATER"
    back = pickle.loads(pickle.dumps(m))
    assert back._items["a"] is _LATER and list(back) == ["a", "b", "c"]
    assert dict(back) == {"a": "MADE LATER", "b": "given", "c": "ALSO LATER"}


def test_a_cached_catalogue_pickles_with_its_entries_unbuilt(tmp_path, monkeypatch):
    import pickle

    from triage.catalogue import load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    fresh = load.load_catalogue()
    load.load_catalogue(cache=True)
    load._READ.clear()
    cached = load.load_catalogue(cache=True)
    assert all(v is _LATER for v in cached.workarounds._items.values())
    back = pickle.loads(pickle.dumps(cached))
    wid, sid = "sglang-disable-radix-cache", "sglang-nsa-page-table-1-flattened"
    assert back.workarounds[wid] == fresh.workarounds[wid]
    assert back.signatures[sid].spec == fresh.signatures[sid].spec
