"""A mapping whose values may be made the first time they are looked up.

The catalogue read from its cache holds 222 workarounds and an engine lists 700 flags; a run
looks up a handful of each, so making them all was start-up time spent on nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any, Generic, TypeVar

V = TypeVar("V")

_LATER = object()  # the value of a key whose value is not made yet (its argument is in _args)


class LazyMap(MutableMapping[str, V], Generic[V]):
    """Values by key, in the order they were added. One added with `later(key, arg)` is made by
    `make(arg)` on first lookup and kept; iterating or testing a key makes nothing. One maker
    per map, and no object per pending value: building the index of 700 flags stays as cheap
    as a dict of them."""

    def __init__(self, make: Callable[[Any], V] | None = None, items: Mapping[str, V] | None = None) -> None:
        self._make = make
        self._items: dict[str, Any] = dict(items or {})
        self._args: dict[str, Any] = {}

    def later(self, key: str, arg: Any) -> None:  # noqa: ANN401
        assert self._make is not None, "a LazyMap made without a maker takes values only"
        self._items[key] = _LATER
        self._args[key] = arg

    def take(self, other: Mapping[str, V], key: str) -> None:
        """`other`'s entry for `key`, left unmade when both maps make values the same way (a map
        without a maker of its own takes `other`'s)."""
        if isinstance(other, LazyMap) and other._items[key] is _LATER:
            if self._make is None:
                self._make = other._make
            if other._make is self._make:
                self.later(key, other._args[key])
                return
        self[key] = other[key]

    # pickled (a catalogue sent to another process) with its pending values still pending: the
    # marker of a pending value is this process's own object, so it is not pickled itself
    def __getstate__(self) -> dict[str, Any]:
        return {"make": self._make, "items": [(k, v is _LATER, self._args[k] if v is _LATER else v)
                                              for k, v in self._items.items()]}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._make, self._items, self._args = state["make"], {}, {}
        for key, pending, value in state["items"]:
            self._items[key] = _LATER if pending else value
            if pending:
                self._args[key] = value

    def __getitem__(self, key: str) -> V:
        v = self._items[key]
        if v is _LATER:
            assert self._make is not None
            v = self._items[key] = self._make(self._args.pop(key))
        return v

    def __setitem__(self, key: str, value: V) -> None:
        self._items[key] = value
        self._args.pop(key, None)

    def __delitem__(self, key: str) -> None:
        del self._items[key]
        self._args.pop(key, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items
