"""How large a catalogue pattern becomes once compiled, estimated from its source alone.

The `regex` engine unrolls counted repeats when it compiles: `x{1000000}` costs about 280 MB,
and nesting multiplies (`((((a{100}){100}){100}){100})` asked for 23 GB before the OOM killer).
The estimate below multiplies the counts of nested repeats over the size of what they repeat,
so such a pattern is refused before `regex.compile` ever sees it. It is deliberately rough
(every literal, class or escape is one unit; alternatives add up) and errs on the large side.

A reading of the source alone can disagree with `regex` about where a class, a comment or a
quantifier ends (`[[]` is a one-character class in V0 syntax; `(?#\\)` does not end at the
escaped parenthesis; in verbose mode `(a{100}) {100}` repeats the group), and every such
disagreement hid a pattern of any size. So the estimate is the larger of that reading and a walk
over the tree `regex`'s own parser builds (parsing is linear in the source; only compiling
unrolls): the tree is what will be compiled, however the source spells it.
"""

from __future__ import annotations

import functools
import importlib
import re
from typing import Any

# Compiled patterns of the built-in catalogue stay below a few hundred units; 100,000 units
# compile in about 40 MB and 0.1 s, so the limit costs nobody a real pattern.
MAX_UNITS = 100_000

_COUNTED = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_BRACED_ESCAPES = frozenset("pPNxgkuUo")


class PatternTooLarge(ValueError):
    """A pattern whose compiled form would be too large to build."""


def _class_end(p: str, i: int) -> int:
    """Index just past the character class opening at p[i] == '['."""
    j = i + 1
    if j < len(p) and p[j] == "^":
        j += 1
    if j < len(p) and p[j] == "]":
        j += 1  # a leading ']' is a literal
    while j < len(p):
        c = p[j]
        if c == "\\":
            j += 2
            continue
        if c == "[" and p.startswith(("[:", "[=", "[."), j):
            close = p.find(p[j + 1] + "]", j + 2)
            j = close + 2 if close >= 0 else j + 1
            continue
        if c == "[":  # a nested set (regex's V1 syntax): its own end
            j = _class_end(p, j)
            continue
        if c == "]":
            return j + 1
        j += 1
    return len(p)


def _escape_end(p: str, i: int) -> int:
    """Index just past the escape starting at p[i] == '\\'."""
    j = i + 2
    if i + 1 < len(p) and p[i + 1] in _BRACED_ESCAPES and j < len(p) and p[j] in "{<":
        close = p.find("}" if p[j] == "{" else ">", j)
        return close + 1 if close >= 0 else len(p)
    return j


def expanded_units(p: str, cap: int = MAX_UNITS) -> int:
    """Estimated compiled size of pattern `p`; stops counting once it passes `cap`."""
    # each frame: [units of finished alternatives, units of the current one, units of its last atom]
    stack: list[list[int]] = [[0, 0, 0]]
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        top = stack[-1]
        if c == "\\":
            i = _escape_end(p, i)
            top[1] += 1
            top[2] = 1
            continue
        if c == "[":
            i = _class_end(p, i)
            top[1] += 1
            top[2] = 1
            continue
        if c == "(":
            if p.startswith("(?#", i):
                close = p.find(")", i)
                i = close + 1 if close >= 0 else n
                continue
            stack.append([0, 0, 0])
            i += 1
            continue
        if c == ")" and len(stack) > 1:
            done = stack.pop()
            size = max(1, done[0] + done[1])
            top = stack[-1]
            top[1] += size
            top[2] = size
            i += 1
            continue
        if c == "|":
            top[0] += top[1]
            top[1] = top[2] = 0
            i += 1
            continue
        if c == "{":
            m = _COUNTED.match(p, i)
            if m and (m.group(1) or m.group(3)):
                low = int(m.group(1) or 0)
                high = int(m.group(3)) if m.group(3) else (low if not m.group(2) else 0)
                times = max(low, high, 1)
                grown = top[2] * times
                top[1] += grown - top[2]
                top[2] = grown
                i = m.end()
                if i < n and p[i] in "?+":
                    i += 1  # lazy or possessive
                if sum(f[0] + f[1] for f in stack) > cap:
                    return sum(f[0] + f[1] for f in stack)
                continue
        if c in "*+?":
            i += 1
            if i < n and p[i] in "?+":
                i += 1
            continue
        top[1] += 1
        top[2] = 1
        i += 1
    return sum(f[0] + f[1] for f in stack)


def _parse_tree(p: str) -> Any | None:
    """The tree `regex.compile(p, regex.V0)` would compile, from `regex`'s own parser; None when
    the parser refuses the pattern (compiling then raises the same error) or is not available."""
    try:  # the parser regex.compile itself runs (private, hence untyped: Any)
        core: Any = importlib.import_module("regex._regex_core")
    except ImportError:  # pragma: no cover - another regex build
        return None
    flags = core.VERSION0
    for _ in range(4):  # an inline global flag, e.g. (?x) anywhere, restarts the parse with it
        source = core.Source(p)
        info = core.Info(flags, source.char_type, {})
        source.ignore_space = bool(info.flags & core.VERBOSE)
        try:
            return core._parse_pattern(source, info)
        except core._UnscopedFlagSet:
            flags = info.global_flags
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - an invalid pattern: regex.compile reports it
            return None
    return None


_SINGLE = ("subpattern", "yes_item", "no_item")
_MANY = ("items", "branches")
# per node class of regex's parser: (its child attributes, its list attributes, a repeat?, has
# characters?), read once per class: asking every node for seven attributes was 40% of loading
# the catalogue from its YAML
_SHAPES: dict[type, tuple[tuple[str, ...], tuple[str, ...], bool, bool]] = {}


def _shape(node: Any) -> tuple[tuple[str, ...], tuple[str, ...], bool, bool]:
    cls = type(node)
    shape = _SHAPES.get(cls)
    if shape is None:
        shape = _SHAPES[cls] = (tuple(a for a in _SINGLE if hasattr(node, a)), tuple(a for a in _MANY if hasattr(node, a)),
                                hasattr(node, "min_count"), hasattr(node, "characters"))
    return shape


def _tree_units(tree: Any, cap: int) -> int:
    """Units of a parsed pattern: a counted repeat multiplies what it repeats (iteratively: the
    tree is as deep as the pattern's nesting)."""
    sizes: dict[int, int] = {}
    todo: list[tuple[Any, list[Any] | None]] = [(tree, None)]
    while todo:
        node, kids = todo.pop()
        if kids is None:
            single, many, _, _ = _shape(node)
            kids = [k for k in (getattr(node, a) for a in single) if k is not None]
            for a in many:
                kids.extend(k for k in (getattr(node, a) or ()) if hasattr(k, "__dict__"))
            todo.append((node, kids))
            todo.extend((k, None) for k in kids)
            continue
        inner = sum(sizes.get(id(k), 1) for k in kids)
        _, _, repeat, chars = _shape(node)
        if repeat:  # GreedyRepeat, LazyRepeat, PossessiveRepeat
            size = max(1, inner) * max(node.min_count or 0, node.max_count or 0, 1)
        else:
            size = max(1, inner, len(node.characters) if chars else 0)
        sizes[id(node)] = min(size, cap + 1)
    return sizes.get(id(tree), 1)


@functools.lru_cache(maxsize=4096)
def _units(p: str, limit: int, parse: bool) -> int:
    """The size estimate of check_expansion, kept per pattern: a pure function of the source,
    and most of the cost of loading a catalogue from its YAML (a process that loads it again,
    `catalogue check`, `fleet`, `backtest --against`, sizes each pattern once). A pattern that
    nests too deeply raises, and a raise is not kept."""
    units = expanded_units(p, limit)
    if units <= limit and parse:
        try:
            tree = _parse_tree(p)
        except RecursionError:
            raise PatternTooLarge("pattern nests groups too deeply to compile") from None
        if tree is not None:
            units = max(units, _tree_units(tree, limit))
    return units


def check_expansion(p: str, limit: int = MAX_UNITS, parse: bool = True) -> None:
    """Raise PatternTooLarge when `p` would compile to more than `limit` units. With
    parse=False only the source is read (40x cheaper): for a pattern that had the full check
    when its YAML was read (a spec from the cache, or pickled to a backtest worker)."""
    units = _units(p, limit, parse)
    if units > limit:
        raise PatternTooLarge(f"pattern expands to more than {limit:,} units when compiled "
                              "(nested or very large counted repeats such as (a{100}){100}); write it without them")


def compile_checked(p: str, parse: bool = True) -> Any:  # noqa: ANN401 - a regex.Pattern (regex is imported lazily here)
    """`regex.compile(p, V0)` for a catalogue's regex: sized first, and a pattern that nests
    groups past the parser's recursion is PatternTooLarge too (regex recurses once per group).
    parse=False: the source-only size check (see check_expansion), for a pattern that already
    passed the full one."""
    import regex

    check_expansion(p, parse=parse)  # before regex sees it: compiling unrolls counted repeats
    try:
        return regex.compile(p, regex.V0)
    except RecursionError:
        raise PatternTooLarge("pattern nests groups too deeply to compile") from None
