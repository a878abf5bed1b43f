"""Bare asserts (`assert cond` with no message) of a Python source file, for the source atlas.

A bare assert has no message to look up: a traceback shows only its code line, as the innermost
frame. scripts/build_atlas.py files each one under that line (triage/catalogue/atlas.py's BARE
mark), so that a failure whose last frame is `assert x.page_size == 1` is located in the
releases that have that assert in that function.

This is a line scan, not `ast`: reading every release's engine source with `ast` a second time
costs tens of minutes, and a single-line assert is plain to see. Only asserts that are whole on
one line count (brackets balanced, no `\\` continuation, no comma outside brackets: a comma
there starts a message); the enclosing `class` and `def` names are taken from indentation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINES = re.compile(r"^([ \t]*)(?:(?:async[ \t]+)?def[ \t]+(\w+).*|class[ \t]+(\w+).*|assert\b(.*))$", re.M)
_OPEN, _CLOSE = "([{", ")]}"


@dataclass(frozen=True)
class BareAssert:
    function: str  # qualified, as the ast extractor names it: Class.method, outer.inner
    line: int
    code: str  # the line as a traceback shows it (a comment too), white space folded
    condition: str


def _condition(rest: str) -> str | None:
    """The condition of `assert <rest>` when the statement is whole and has no message."""
    depth = 0
    quote = ""
    i = 0
    while i < len(rest):
        c = rest[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if rest.startswith(quote, i):
                i += len(quote)
                quote = ""
                continue
        elif c in "'\"":
            quote = rest[i:i + 3] if rest[i:i + 3] in ("'''", '"""') else c
            i += len(quote)
            continue
        elif c == "#":
            rest = rest[:i]
            break
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            return None  # `assert cond, msg`: the message path has it
        i += 1
    cond = rest.strip()
    if quote or depth != 0 or not cond or cond.endswith("\\"):
        return None  # the statement goes on below: its message may too
    return " ".join(cond.split())


def bare_asserts(text: str) -> list[BareAssert]:
    out: list[BareAssert] = []
    scope: list[tuple[int, str]] = []  # (indent, name) of the enclosing defs and classes
    if "assert" not in text:
        return out
    line, pos = 1, 0
    for m in _LINES.finditer(text):
        indent = len(m.group(1).expandtabs(4))
        while scope and scope[-1][0] >= indent:
            scope.pop()
        name = m.group(2) or m.group(3)
        if name:
            scope.append((indent, name))
            continue
        cond = _condition(m.group(4) or "")
        if not cond:
            continue
        line += text.count("\n", pos, m.start())
        pos = m.start()
        out.append(BareAssert(function=".".join(n for _, n in scope) or "<module>", line=line,
                              code=" ".join(("assert" + (m.group(4) or "")).split()), condition=cond))
    return out
