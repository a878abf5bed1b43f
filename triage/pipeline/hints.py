"""The engine's own advice printed with a failure ("Possible solutions: 1. set --x ...").

Such a line names flags, but they are the engine's suggestions, not the flags the server
ran with: they never reach the parsed configuration. Each hint becomes a recommendation
with its source (the log line, and the engine file that prints it when the text is known),
its flags checked against this engine version, and a direction read from its wording.

A log is written by whoever runs the server (and, through error messages, by its users), so
only a line that matches a hint message an engine is known to print counts as the engine's
advice: the exact text, or the same wording with other flag names (another version's
spelling), or the start of a known message cut off by the log. Any other advice-shaped line
is kept as quoted log text (source "log-text"): no flags read from it, never ranked with the
catalogue's workarounds, never applied by `triage run --retry`.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from pathlib import Path
from typing import NamedTuple

from triage.catalogue.flags import FlagIndex, flag_index
from triage.core.lazyre import lazy
from triage.core.models import Failure, Workaround
from triage.core.recache import re_compile

FLAG = lazy(r"(?<![\w-])--[a-z][a-z0-9-]+(?:=[^\s,;)`'\"]+)?")
SUGGESTS = lazy(
    r"(?i)\b(?:set|use|using|disable|enable|increase|decrease|lower|raise|reduce|try|add|pass|specify|"
    r"consider|please|setting|remove|by)\b")
LIST_ITEM = lazy(r"^\s*\d+\.\s+")
REMOVE = lazy(r"(?i)(?:not using|remove|without|drop)\s+`?(--[a-z][a-z0-9-]+)")
SET_VALUE = lazy(r"(?i)set\s+`?(--[a-z][a-z0-9-]+)`?\s+to\s+a\s+(?:smaller|larger|lower|higher)\s+value\s*\(e\.g\.,?\s*([\d.]+)")
DATA = Path(__file__).resolve().parents[1] / "catalogue" / "data" / "hints.json"
# Engines without a hint dump in DATA: (engine, text, source), kept by hand, each checked in the
# engine's source.
HAND_KNOWN = [
    ("tgi", "Not enough memory to handle {num_tokens} prefill tokens. You need to decrease `--max-batch-prefill-tokens`",
     "server/text_generation_server/models/flash_causal_lm.py (warmup)"),
]
_FLAG_SLOT = re_compile(r"--[a-z][a-z0-9-]*")
_TEMPLATE_SLOT = r"\\\{[^}]*\\\}|%[sdfr]|%\\\.\d+f"
_SLOT = re_compile(r"\{[^}]*\}|%[sdfr]|%\.\d+f")  # the same slots in the text before re.escape
_EXCEPTION_NAME = re_compile(r"^(?:[A-Za-z_][\w.]{0,100}(?:Error|Exception|Warning)): ")
MIN_PREFIX = 24  # characters of a known message a cut-off line must keep to be recognised
# What fills a template's slot ({tp_size}, %s): a value, never a flag or a shell construct. A slot
# that took any text let "Got tp_size=8 --trust-remote-code --model-path evil/m; please use
# --tp-size 1." pass for the engine's own message, with --trust-remote-code read from it.
_SLOT_VALUE = r"(?:(?!--)[^`$|;&<>\n\\]){0,60}?"


def _norm(text: str) -> str:
    t = LIST_ITEM.sub("", text)
    return " ".join(t.split()).strip(" .").lower()


def _items() -> list[tuple[str, str, str]]:
    """(engine, text, source) of every hint item the engines are known to print."""
    import json

    try:
        items = json.loads(DATA.read_text(encoding="utf-8"))["items"]
        out = [(it["engine"], it["text"], it["source"]) for it in items]
    except (OSError, KeyError, TypeError, ValueError):
        out = []
    return out + HAND_KNOWN


@cache
def _matcher(text: str) -> re.Pattern[str]:
    return re.compile(_SLOT_VALUE.join(re.split(_TEMPLATE_SLOT, re.escape(text))))


def _head(text: str) -> str:
    """The literal start of a known text, up to its first slot: a line the text's matcher
    fullmatches starts with it."""
    return _SLOT.split(text, maxsplit=1)[0]


class _Known(NamedTuple):
    """A hint an engine is known to print. Its two matchers are compiled on first use, only for
    a line that starts with the text's literal head: compiling all 1,700 of them cost a process
    half a second the first time a line named a flag."""

    norm: str  # the text, normalised
    shape: str  # the same with every flag name as --flag
    flags: list[str]
    engine: str
    source: str
    head: str
    shape_head: str

    def exact(self, line: str) -> bool:
        return line.startswith(self.head) and _matcher(self.norm).fullmatch(line) is not None

    def same_shape(self, shape: str) -> bool:
        return shape.startswith(self.shape_head) and _matcher(self.shape).fullmatch(shape) is not None


def _related(flag: str, known: str) -> bool:
    """`flag` can be another version's spelling of `known` (--cuda-graph-max-bs for
    --cuda-graph-max-bs-decode, a flag cut off by the log): the same name, one a prefix of the
    other, or most of their words shared. An unrelated flag in a known wording is forged advice."""
    if flag == known or known.startswith(flag) or flag.startswith(known):
        return True
    a, b = set(flag[2:].split("-")), set(known[2:].split("-"))
    return len(a & b) >= max(2, (min(len(a), len(b)) + 1) // 2)


def _same_flags(line: list[str], known: list[str]) -> bool:
    return len(line) <= len(known) and all(_related(f, k) for f, k in zip(line, known, strict=False))


@lru_cache(maxsize=1)
def _known() -> list[_Known]:
    out = []
    for eng, text, source in _items():
        norm = _norm(text)
        shape = _FLAG_SLOT.sub("--flag", norm)
        out.append(_Known(norm, shape, _FLAG_SLOT.findall(norm), eng, source, _head(norm), _head(shape)))
    return out


def cite(text: str, engine: str | None, frames: list[str] | None = None) -> str | None:
    """The engine source file that prints exactly this hint, if known. Several files print the
    same words (a CPU and a CUDA graph runner): the one in the failure's frames, else all of them,
    never the first one listed as if it were the one."""
    norm = _norm(text)
    found: list[str] = []
    for k in _known():
        if (engine is None or k.engine == engine) and k.source not in found and k.exact(norm):
            found.append(k.source)
    if len(found) <= 1:
        return found[0] if found else None
    files = [fr.replace("\\", "/") for fr in frames or []]
    mine = [src for src in found if any(f.endswith(src.split(":", 1)[0].split("/", 1)[-1]) for f in files)]
    if len(mine) == 1:
        return mine[0]
    return "one of " + ", ".join(found)


def recognised(text: str, engine: str | None) -> bool:
    """The line is a hint the engine is known to print: exactly, with other flag names, or cut
    off after at least MIN_PREFIX characters (never with text added: that is how advice is forged).
    An exception's name in front (`RuntimeError: <hint>`) is how Python prints a raised hint."""
    norm = _norm(_EXCEPTION_NAME.sub("", text.strip(), count=1))
    shape = _FLAG_SLOT.sub("--flag", norm)
    flags = _FLAG_SLOT.findall(norm)
    for k in _known():
        if engine is not None and k.engine != engine:
            continue
        if k.exact(norm):
            return True
        # another spelling of the message's flags, or the message cut off: its flags must be
        # spellings of the message's own, not any flag put into a known wording
        if (k.same_shape(shape) or (len(shape) >= MIN_PREFIX and "{" not in k.shape[: len(shape)]
                                    and k.shape.startswith(shape))) and _same_flags(flags, k.flags):
            return True
    return False


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
        where = f"printed at line {no}" if no else "printed in the exception message"
        if not recognised(text, engine):
            out.append(Workaround(
                id=f"log-advice-{len(out) + 1}", title="Advice in the log, not a known engine message", action=text,
                cost="Not assessed: quoted as log text.", note=where, source="log-text"))
            if len(out) >= 6:
                break
            continue
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
        source = cite(text, engine, [fr.file for fr in failure.frames])
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
