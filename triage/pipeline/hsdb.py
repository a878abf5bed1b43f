"""The Hyperscan database of the scan's keywords, compiled once and kept on disk.

Compiling ~500 literals takes 13-19 ms, a twentieth of a 10 KB log's whole run; reading the
serialized database back takes 0.1 ms. Only the command line asks for the disk copy (the
catalogue it loaded carries a cache directory); the library compiles and writes nothing.

The file is the database as `hyperscan.dumpb` writes it, behind a magic line and the SHA-256
of those bytes: a file damaged or cut short is a miss, never a database that scans wrongly.
Hyperscan itself refuses a database from another library version or CPU platform; that is a
miss too. Its name is a digest of the expressions, their flags and the Hyperscan extension
module's identity, so a changed catalogue or an upgraded Hyperscan compiles anew.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from triage.core import diskcache

MAGIC = b"triage-hyperscan-db 1\n"
KEEP = 8


def database(hyperscan: Any, exprs: list[bytes], flags: list[int], cache: Path | None) -> Any:  # noqa: ANN401
    """A block-mode database of `exprs` (ids 0..n-1) with its scratch space, read from
    `cache` when it holds the same one, else compiled (and written there)."""
    path = _path(hyperscan, exprs, flags, cache) if cache is not None else None
    if path is not None:
        db = _read(hyperscan, path)
        if db is not None:
            return db
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=exprs, ids=list(range(len(exprs))), elements=len(exprs), flags=flags)
    if path is not None:
        _write(hyperscan, db, path)
    return db


def _path(hyperscan: Any, exprs: list[bytes], flags: list[int], cache: Path) -> Path | None:  # noqa: ANN401
    if diskcache.caching_off():
        return None
    h = hashlib.sha256(MAGIC)
    ext = str(getattr(getattr(hyperscan, "_hs_ext", None), "__file__", None) or getattr(hyperscan, "__file__", ""))
    try:
        st = os.stat(ext)
        h.update(f"{ext}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    except OSError:
        return None  # no identity for the library: no way to tell its databases apart
    for e, f in zip(exprs, flags, strict=True):
        h.update(b"%d %d " % (f, len(e)) + e)
    return cache / f"hs-{h.hexdigest()[:24]}.db"


def _read(hyperscan: Any, path: Path) -> Any:  # noqa: ANN401
    payload = diskcache.read_sealed(path, MAGIC)  # None when missing, untrusted or damaged, too
    if payload is None:
        return None
    try:
        db = hyperscan.loadb(payload, hyperscan.HS_MODE_BLOCK)
        db.scratch = hyperscan.Scratch(db)  # a compiled database gets one; a loaded one does not
    except Exception:  # noqa: BLE001 - another Hyperscan version or platform: compile instead
        return None
    return db


def _write(hyperscan: Any, db: Any, path: Path) -> None:  # noqa: ANN401
    try:
        payload = bytes(hyperscan.dumpb(db))
    except Exception:  # noqa: BLE001 - a binding without serialization: only slower next time
        return
    if diskcache.write_sealed(path, MAGIC, payload):
        diskcache.prune(path.parent, "hs-*.db", KEEP, current=path)
