"""Regular expressions compiled on first use instead of at import.

The parsers, markers and redaction rules define some 150 patterns at module level; a run of
`triage analyze` on a small log uses a fraction of them (a marker's pattern runs only on a
line that holds its literal), yet compiling all of them at import was about a third of the
command's own start-up. `lazy()` keeps the definitions where they are and readable.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast

# everything callers use of a compiled pattern; bound to the instance once compiled, so that a
# call after the first costs what it costs on the compiled pattern itself
_BOUND = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
          "groups", "groupindex", "scanner")


class LazyPattern:
    """Stands in for a compiled pattern; compiles it the first time any method is used."""

    def __init__(self, pattern: str | bytes, flags: int, engine: str) -> None:
        self.pattern = pattern  # readable without compiling: other patterns are built from it
        self._flags = flags
        self._engine = engine  # "re" or "regex"

    def compiled(self) -> Any:
        if self._engine == "re":
            from triage.core.recache import re_compile

            c: Any = re_compile(self.pattern, self._flags)
        else:
            import importlib

            c = importlib.import_module(self._engine).compile(self.pattern, self._flags)
        for name in _BOUND:
            if hasattr(c, name):
                setattr(self, name, getattr(c, name))
        self.flags = c.flags
        return c

    def __getattr__(self, name: str) -> Any:
        # only reached for what is not bound yet; dunders (copy, pickle probes) are not ours
        if name.startswith("__") or name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    # immutable, like a compiled pattern: copies are the object itself, pickles the source
    def __copy__(self) -> LazyPattern:
        return self

    def __deepcopy__(self, _memo: dict) -> LazyPattern:
        return self

    def __reduce__(self) -> tuple:
        return (LazyPattern, (self.pattern, self._flags, self._engine))

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile`, deferred to the pattern's first use."""
    return cast("re.Pattern[AnyStr]", LazyPattern(pattern, flags, "re"))


def lazy_regex(pattern: str | bytes, flags: int = 0) -> Any:
    """`regex.compile`, deferred to the pattern's first use."""
    return LazyPattern(pattern, flags, "regex")
