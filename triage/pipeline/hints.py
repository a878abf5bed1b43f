"""The engine's own advice printed with a failure ("Possible solutions: 1. set --x ...").

Such a line names flags, but they are the engine's suggestions, not the flags the server
ran with: they never reach the parsed configuration. Each hint becomes a recommendation
with its source (the log line, and the engine file that prints it when the text is known),
its flags checked against this engine version, and a direction read from its wording.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from triage.catalogue.flags import FlagIndex, flag_index
from triage.core.lazyre import lazy
from triage.core.models import Failure, Workaround

FLAG = lazy(r"(?<![\w-])--[a-z][a-z0-9-]+(?:=[^\s,;)`'\"]+)?")
SUGGESTS = lazy(
    r"(?i)\b(?:set|use|using|disable|enable|increase|decrease|lower|raise|reduce|try|add|pass|specify|"
    r"consider|please|setting|remove|by)\b")
LIST_ITEM = lazy(r"^\s*\d+\.\s+")
REMOVE = lazy(r"(?i)(?:not using|remove|without|drop)\s+`?(--[a-z][a-z0-9-]+)")
SET_VALUE = lazy(r"(?i)set\s+`?(--[a-z][a-z0-9-]+)`?\s+to\s+a\s+(?:smaller|larger|lower|higher)\s+value\s*\(e\.g\.,?\s*([\d.]+)")
DATA = Path(__file__).resolve().parents[1] / "catalogue" / "data" / "hints.json"


def _norm(text: str) -> str:
    t = LIST_ITEM.sub("", text)
    return " ".join(t.split()).strip(" .").lower()


@lru_cache(maxsize=1)
def _known() -> list[tuple[re.Pattern[str], str, str]]:
    """(matcher, engine, source) for every hint item the engines are known to print."""
    import json

    try:
        items = json.loads(DATA.read_text(encoding="utf-8"))["items"]
    except (OSError, KeyError, TypeError, ValueError):
        return []
    out = []
    for it in items:
        text = _norm(it["text"])
        parts = re.split(r"\\\{[^}]*\\\}|%[sdfr]|%\\\.\d+f", re.escape(text))
        out.append((re.compile(".*?".join(parts)), it["engine"], it["source"]))
    return out


def cite(text: str, engine: str | None) -> str | None:
    norm = _norm(text)
    for rx, eng, source in _known():
        if (engine is None or eng == engine) and rx.fullmatch(norm):
            return source
    return None


def _is_hint(line: str, after_solutions: bool) -> bool:
    if not FLAG.search(line):
        return False
    return after_solutions or bool(LIST_ITEM.match(line)) or bool(SUGGESTS.search(line))


def _direction(text: str, idx: FlagIndex | None) -> tuple[list[str], list[str], list[str]]:
    """(flags to add, flags to remove, flags only named)."""
    add: list[str] = []
    remove = [m for m in REMOVE.findall(text)]
    for flag, value in SET_VALUE.findall(text):
        add.append(f"{flag} {value.rstrip('.')}")
    named = []
    for m in FLAG.finditer(text):
        tok = m.group(0).rstrip(".")
        name = tok.split("=", 1)[0]
        if name in remove or any(a.split()[0] == name for a in add):
            continue
        info = idx.get(name) if idx is not None else None
        if "=" in tok or (info is not None and info.takes_value is False):
            add.append(tok)
        else:
            named.append(name)
    return add, remove, named


def hints_for(failure: Failure, engine: str | None, version: str | None,
              messages: dict[int, str]) -> list[Workaround]:
    """The engine's own suggestions printed with a failure. `messages` are the parsed lines'
    messages by line number (prefixes already peeled by the parse stage)."""
    idx = flag_index(engine) if engine else None
    lines: list[tuple[int | None, str]] = [(failure.exception_line, failure.message)]
    lines += [(e.line, messages.get(e.line, e.text)) for e in failure.raw]
    out: list[Workaround] = []
    seen: set[str] = set()
    after = False
    for no, raw in lines:
        text = raw.strip() if raw else ""
        if "Possible solutions" in text:
            after = True
            text = text.split("Possible solutions", 1)[1].lstrip(": ")
        if not text or not _is_hint(text, after):
            continue
        key = _norm(text)
        if key in seen:
            continue
        seen.add(key)
        add, remove, named = _direction(text, idx)
        notes = []
        for f in [*(a.split()[0].split("=")[0] for a in add), *remove, *named]:
            if idx is None:
                continue
            status, detail = idx.status(f, version)
            if status == "unknown":
                notes.append(f"{f} is not a flag of {engine}")
            elif status in ("removed", "not-yet"):
                notes.append(detail or f)
        source = cite(text, engine)
        where = f"printed at line {no}" if no else "printed in the exception message"
        if source:
            where += f" by {source}"
        out.append(Workaround(
            id=f"engine-hint-{len(out) + 1}", title="The engine's own suggestion", flags=add, remove_flags=remove,
            action=text, cost="Not assessed by the catalogue: this is the engine's generic advice for the error.",
            note="; ".join([where, *notes]), source="engine-hint",
        ))
        if len(out) >= 6:
            break
    return out
