"""The base of the report's types: plain dataclasses that dump themselves, with pydantic's
names for what library users call on them.

The report's fifteen types were pydantic models, and building their validators was 21 ms of
every run, a tenth of `triage analyze` on a small log, to validate values the pipeline had
just computed. They are dataclasses now; pydantic still states the contract: `triage schema`
and `model_validate` build a TypeAdapter of the type on first use (pydantic reads dataclasses,
`Annotated[..., Field(exclude=True)]` and `computed_field` on them), and the tests validate
every JSON report against it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypeVar

from pydantic import ConfigDict, Field

R = TypeVar("R", bound="Record")

# pydantic's mark (for the schema) of a field kept out of the JSON; `hidden()` is the same mark
# for the dump below: a field carries both, side by side
EXCLUDED = Field(exclude=True)


def hidden(factory: Any) -> Any:  # noqa: ANN401 - a dataclasses.field
    """A field with a default made by `factory`, left out of every dump (and of the JSON)."""
    return dataclasses.field(default_factory=factory, metadata={"exclude": True})


class Record:
    """Shared by the report's dataclasses (declared `@dataclass(kw_only=True, eq=False, repr=False)`)."""

    # pydantic gives a dataclass the configuration of the model it sits in (the JSON Document
    # allows extra keys): a report's own types keep their own
    __pydantic_config__ = ConfigDict(extra="ignore")

    # properties that are part of the dump (pydantic's computed fields), after the fields
    COMPUTED: tuple[str, ...] = ()

    # one __eq__ and __repr__ here for every type (declared eq=False, repr=False): the dataclass
    # decorator compiles its own for each class, a third of creating the report's types at import
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in dataclasses.fields(self))  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]  # compared by value: not hashable, as a dataclass with eq

    def __repr__(self) -> str:
        inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))  # type: ignore[arg-type]
        return f"{type(self).__name__}({inner})"

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """The fields as plain data (hidden ones left out, computed ones added), like pydantic's:
        mode="json" turns tuples into lists."""
        return _dump(self, mode == "json")

    def model_dump_json(self, indent: int | None = None) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=indent, ensure_ascii=False)

    def model_copy(self: R, update: dict[str, Any] | None = None) -> R:
        """A shallow copy, with `update`'s fields replaced."""
        return dataclasses.replace(self, **(update or {}))  # type: ignore[type-var]

    @classmethod
    def model_validate(cls: type[R], data: Any) -> R:  # noqa: ANN401
        """An instance from outside data, validated by pydantic (the adapter is built on first use)."""
        return _adapter(cls).validate_python(data)

    @classmethod
    def model_json_schema(cls, mode: str = "validation") -> dict[str, Any]:
        return _adapter(cls).json_schema(mode=mode)


_ADAPTERS: dict[type, Any] = {}
_SHOWN: dict[type, tuple[str, ...]] = {}


def _adapter(cls: type) -> Any:  # noqa: ANN401 - a pydantic TypeAdapter
    if cls not in _ADAPTERS:
        from pydantic import TypeAdapter

        _ADAPTERS[cls] = TypeAdapter(cls)
    return _ADAPTERS[cls]


def _shown(cls: type[Record]) -> tuple[str, ...]:
    """The names a dump holds, in order: the fields not hidden, then the computed ones."""
    names = _SHOWN.get(cls)
    if names is None:
        fields = dataclasses.fields(cls)  # type: ignore[arg-type]
        names = _SHOWN[cls] = tuple(f.name for f in fields if not f.metadata.get("exclude")) + cls.COMPUTED
    return names


def _dump(v: Any, as_json: bool) -> Any:  # noqa: ANN401
    if isinstance(v, Record):
        return {name: _dump(getattr(v, name), as_json) for name in _shown(type(v))}
    if isinstance(v, list):
        return [_dump(x, as_json) for x in v]
    if isinstance(v, dict):
        return {k: _dump(x, as_json) for k, x in v.items()}
    if isinstance(v, tuple):
        return [_dump(x, as_json) for x in v] if as_json else tuple(_dump(x, as_json) for x in v)
    return v


def rebuilt_like(original: Any, data: Any) -> Any:  # noqa: ANN401
    """`original`'s structure again with the plain values of `data`, a changed dump of it (the
    redaction's): records, lists and dicts where `original` has them, `data`'s leaves. A hidden
    field, absent from the dump, gets its default (as from pydantic's dump and validate)."""
    if isinstance(original, Record) and isinstance(data, dict):
        values = {}
        for f in dataclasses.fields(original):  # type: ignore[arg-type]
            if f.name in data:
                values[f.name] = rebuilt_like(getattr(original, f.name), data[f.name])
        return type(original)(**values)
    if isinstance(original, list) and isinstance(data, list) and len(original) == len(data):
        return [rebuilt_like(o, d) for o, d in zip(original, data, strict=True)]
    if isinstance(original, dict) and isinstance(data, dict):
        return {k: rebuilt_like(original[k], d) if k in original else d for k, d in data.items()}
    return data
