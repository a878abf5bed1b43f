"""`re` patterns whose compiled form is kept between command-line runs.

Python compiles a regular expression in Python code (`re._parser`, `re._compiler`) into a list
of opcodes, which it hands to the C engine (`_sre.compile`). triage compiles about a hundred
patterns on a small log's path (the line and timeline parsers, the fingerprint masks, the
redaction rules a report's text calls for), which was 25-30 ms of a 10 KB log's run. The
opcodes depend only on the pattern, its flags and the Python build, so the command line keeps
them in its cache directory (triage.core.diskcache) and later runs hand them to the engine.

This leans on CPython's private compiler API, so it is guarded: the file is keyed by the exact
Python build and the engine's MAGIC and CODESIZE, carries the SHA-256 of its content (damaged or
edited: a miss) and is read only when trusted; before the first use in a process one pattern is
compiled both ways and the two must compare equal (a compiled pattern compares its opcodes), and
any error or difference sends this process back to plain `re.compile` for good. Only the
command line turns the file on (`use_disk`); the library reads and writes nothing.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import sys
from array import array
from pathlib import Path
from typing import Any, AnyStr

from triage.core import diskcache

MAGIC = b"triage-re-opcodes 1\n"
KEEP = 4  # files: one per Python build in use
MAX_ENTRIES = 4096  # past this a file keeps only the patterns its last run used

# (is bytes, pattern, flags given) -> (flags, opcodes, groups, groupindex, indexgroup)
Entry = tuple[int, list[int], int, dict[str, int], tuple[str | None, ...]]
_sre: Any = importlib.import_module("_sre")  # the C engine, private: no stubs
_table: dict[tuple[bool, str, int], Entry] = {}
_used: set[tuple[bool, str, int]] = set()
_state: dict[str, Any] = {"path": None, "loaded": False, "dirty": False, "ok": None}


def re_compile(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    """`re.compile(pattern, flags)`, from the kept opcodes when the command line keeps them."""
    if _state["path"] is None or not _works():
        return re.compile(pattern, flags)
    if not _state["loaded"]:
        _load()
    flags = int(flags)
    key = (isinstance(pattern, bytes), _text(pattern), flags)
    entry = _table.get(key)
    try:
        if entry is None:
            entry = _build(pattern, flags)
            _table[key] = entry
            _state["dirty"] = True
        _used.add(key)
        return _engine(pattern, entry)
    except Exception:  # noqa: BLE001 - a kept entry the engine refuses: compile it the usual way
        _table.pop(key, None)
        return re.compile(pattern, flags)


def use_disk(directory: Path | None) -> None:
    """Keep the opcodes in `directory` (None: in memory only, the library's default)."""
    _state.update(path=None if directory is None or diskcache.caching_off() else directory / _name(),
                  loaded=False)


def save() -> None:
    """Write the kept opcodes if this run compiled any the file lacked."""
    path = _state["path"]
    if path is None or not _state["dirty"]:
        return
    keys = list(_table) if len(_table) <= MAX_ENTRIES else [k for k in _table if k in _used]
    rows = [[k[0], k[1], k[2], e[0], array("I", e[1]).tobytes().hex(), e[2], e[3], list(e[4])]
            for k in keys for e in (_table[k],)]
    body = json.dumps({"python": _build_id(), "patterns": rows}, separators=(",", ":")).encode()
    if diskcache.write_sealed(path, MAGIC, body):
        diskcache.prune(path.parent, "re-*.bin", KEEP, current=path)
    _state["dirty"] = False


def _load() -> None:
    _state["loaded"] = True
    body = diskcache.read_sealed(_state["path"], MAGIC)
    if body is None:
        return  # missing, untrusted, damaged, cut short or edited: a miss
    try:
        doc = json.loads(body)
        if doc.get("python") != _build_id():
            return
        for b, text, given, f, code, groups, gi, ig in doc["patterns"]:
            _table.setdefault((bool(b), str(text), int(given)),
                              (int(f), array("I", bytes.fromhex(code)).tolist(), int(groups), dict(gi), tuple(ig)))
    except Exception:  # noqa: BLE001 - an odd file is only a miss
        return


def _text(pattern: str | bytes) -> str:
    return pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern


def _build_id() -> str:
    return f"{sys.version} {sys.implementation.cache_tag} {sys.byteorder} {_sre.MAGIC} {_sre.CODESIZE}"


def _name() -> str:
    return f"re-{hashlib.sha256(_build_id().encode()).hexdigest()[:16]}.bin"


def _build(pattern: str | bytes, flags: int) -> Entry:
    """What `re._compiler.compile` hands the engine, kept instead of handed."""
    from re import _compiler, _parser  # type: ignore[attr-defined]

    p = _parser.parse(pattern, flags)
    code = _compiler._code(p, flags)
    groupindex = dict(p.state.groupdict)
    indexgroup: list[str | None] = [None] * p.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    return (flags | p.state.flags, list(code), p.state.groups - 1, groupindex, tuple(indexgroup))


def _engine(pattern: str | bytes, entry: Entry) -> re.Pattern[Any]:
    f, code, groups, groupindex, indexgroup = entry
    return _sre.compile(pattern, f, code, groups, groupindex, indexgroup)


_PROBE = (r"(?P<word>\w+)=(\d+(?:\.\d+)?)|(?i:x[a-f]{2,})$", rb"^\s*(?P<n>[0-9]+)\b")


def _works() -> bool:
    """Whether this Python's private compiler API still does what this module assumes: the
    probes compiled through it equal re.compile's (once per process)."""
    if _state["ok"] is None:
        try:
            _state["ok"] = array("I").itemsize == _sre.CODESIZE and all(
                _engine(p, _build(p, 0)) == re.compile(p) for p in _PROBE)
        except Exception:  # noqa: BLE001 - anything else: this Python's API is not the one assumed
            _state["ok"] = False
    return bool(_state["ok"])
