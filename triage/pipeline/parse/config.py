"""The launch configuration a server printed, as a dict of settings.

SGLang: `server_args=ServerArgs(k=v, ...)` (<= 0.5.17) and `server_args={'k': v}` (0.5.19+).
vLLM: `args: Namespace(...)` (<= 0.8.5), `non-default args: {...}` (0.9+), and the engine
config line `Initializing ... engine (vX) with config: k=v, ...`. These lines can be
hard-wrapped by a terminal (even mid-word), so continuation lines are joined until the
brackets balance.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from triage.core.recache import re_compile
from triage.pipeline.parse.lines import LogLine

_STARTS = [
    ("sglang", "repr", re_compile(r"server_args=ServerArgs\(")),
    ("sglang", "dict", re_compile(r"server_args=\{")),
    ("vllm", "repr", re_compile(r"args: Namespace\(")),
    ("vllm", "dict", re_compile(r"non-default args: \{")),
    ("vllm", "kv", re_compile(r"Initializing (?:an|a V1) LLM engine(?: \(v(?P<ver>[^)]+)\))? with config: ")),
]
_CLOSE = {"(": ")", "{": "}", "[": "]"}
_ANY_VERSION = [
    ("vllm", re_compile(r"vLLM (?:API )?server version (?P<v>\d+\.\d+[\w.+-]*)")),
    ("vllm", re_compile(r"LLM engine \(v(?P<v>\d+\.\d+[\w.+-]*)\)")),
    ("vllm", re_compile(r"vllm[-=](?P<v>\d+\.\d+\.\d+[\w.+]*)")),
    ("vllm", re_compile(r"^\s*version (?P<v>\d+\.\d+\.\d+[\w.+]*)\s*$")),
    ("sglang", re_compile(r"sglang(?:==|-|_)(?P<v>\d+\.\d+\.\d+(?:\.post\d+|rc\d+|\.dev\d+)*)")),
    ("sglang", re_compile(r"[Ss][Gg][Ll]ang (?:version|v)\s?(?P<v>\d+\.\d+\.\d+(?:\.post\d+)*)")),
]


@dataclass
class Config:
    """The launch configuration a log printed, as settings."""

    engine: str | None = None
    line: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # everything printed, merged
    cli: dict[str, Any] = field(default_factory=dict)  # only what the launch arguments said
    version: str | None = None
    launch_command: str | None = None  # a shell command line the log shows (e.g. `Killed  python -m ...`)


def _balanced_end(text: str, open_at: int) -> int | None:
    """Index just past the bracket matching text[open_at], quote-aware; None if unbalanced."""
    stack: list[str] = []
    quote: str | None = None
    i = open_at
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")}]" and stack and stack[-1] == c:
            stack.pop()
            if not stack:
                return i + 1
        i += 1
    return None


def split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets or quotes."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    cur: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
            cur.append(c)
        elif c in "([{":
            depth += 1
            cur.append(c)
        elif c in ")]}":
            depth -= 1
            cur.append(c)
        elif c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
        i += 1
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


class _NotPlain(ValueError):
    pass


def _plain(v: Any) -> Any:
    """A literal as plain data (what a report can hold): a set becomes a list, bytes text; an
    Ellipsis (a truncated repr: `tokenizer=...`) or a complex number is not plain (the report's
    JSON could not be written: an internal error)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, (set, frozenset)):
        return sorted((_plain(x) for x in v), key=repr)
    if isinstance(v, dict):
        return {(k if isinstance(k, str) else str(_plain(k))): _plain(x) for k, x in v.items()}
    raise _NotPlain(type(v).__name__)


def _literal(raw: str) -> Any:
    return _plain(ast.literal_eval(raw))


def _value(raw: str) -> Any:
    raw = raw.strip()
    try:
        return _literal(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return raw


def _parse_kv(body: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in split_top(body):
        if "=" not in part:
            continue
        k, v = part.split("=", 1)
        k = k.strip()
        if re.fullmatch(r"[A-Za-z_]\w*", k):
            out[k] = _value(v)
    return out


def _parse_dict(body: str) -> dict[str, Any]:
    try:
        d = _literal("{" + body + "}")
        if isinstance(d, dict):
            return {str(k): v for k, v in d.items()}
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    out: dict[str, Any] = {}
    for part in split_top(body):
        if ":" not in part:
            continue
        k, v = part.split(":", 1)
        k = k.strip().strip("'\"")
        if re.fullmatch(r"[A-Za-z_][\w.-]*", k):
            out[k] = _value(v)
    return out


def _join_wrapped(lines: list[LogLine], i: int, start: int) -> tuple[str, int]:
    """Text from `start` in lines[i], with hard-wrapped continuation lines glued on."""
    text = lines[i].message[start:]
    opener = 0
    j = i
    while _balanced_end(text, opener) is None and j + 1 < len(lines) and j - i < 60:
        nxt = lines[j + 1]
        if nxt.no != lines[j].no + 1 or nxt.prefixed:
            break
        text += nxt.message  # a terminal wrap splits mid-word: no separator
        j += 1
    return text, j


_LAUNCH = re_compile(
    r"(?P<cmd>(?:python3?(?:\.\d+)? -m (?:sglang\.launch_server|vllm\.entrypoints\.openai\.api_server)|sglang serve|vllm serve)"
    r"(?: +[^\s|;&<>]+){1,400})\s*$"
)


def start_lines(lines: list[LogLine]) -> list[LogLine]:
    """The lines where the server printed its launch arguments: one per start (a restart in the
    same log prints them again). The engine's own config line is left out: it follows them."""
    return [ln for ln in lines if any(kind != "kv" and rx.search(ln.message) for _, kind, rx in _STARTS)]


def extract(lines: list[LogLine]) -> Config:
    cfg = Config()
    for i, ln in enumerate(lines):
        msg = ln.message
        if cfg.launch_command is None and ("launch_server" in msg or " serve " in msg or msg.startswith(("sglang serve", "vllm serve"))):
            lm = _LAUNCH.search(msg)
            if lm and " --" in lm["cmd"]:
                cfg.launch_command = lm["cmd"].strip()
        for engine, kind, rx in _STARTS:
            m = rx.search(msg)
            if not m:
                continue
            if kind == "kv":
                body = msg[m.end():]
                settings = _parse_kv(body)
                if m["ver"] and not cfg.version:
                    cfg.version = m["ver"]
                if cfg.engine is None:
                    cfg.engine = engine
                # the engine config line fills what the args did not say
                for k, v in settings.items():
                    cfg.settings.setdefault(k, v)
                if cfg.line is None:
                    cfg.line = ln.no
                break
            open_at = m.end() - 1
            text, _ = _join_wrapped(lines, i, open_at)
            end = _balanced_end(text, 0)
            body = text[1 : (end - 1) if end else len(text)]
            settings = _parse_kv(body) if kind == "repr" else _parse_dict(body)
            # the first complete launch line wins; a restart prints it again
            if settings and (cfg.line is None or not cfg.cli):
                cfg.engine, cfg.line = engine, ln.no
                cfg.cli = dict(settings)
                cfg.settings = {**settings, **{k: v for k, v in cfg.settings.items() if k not in settings}}
            break
        if cfg.version is None:
            for engine, rx in _ANY_VERSION:
                vm = rx.search(ln.text)
                if vm:
                    cfg.version = vm["v"].rstrip(".")
                    cfg.engine = cfg.engine or engine
                    break
    return cfg
