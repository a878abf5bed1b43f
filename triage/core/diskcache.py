"""Files the command line keeps between runs (the validated catalogue, its compiled keyword
database): where they live, which ones may be read back, how they are written and pruned.

Where: `$XDG_CACHE_HOME/triage/` (default `~/.cache/triage/`). Off: `TRIAGE_NO_CACHE=1`.
A file is read back only when it and its directory belong to this user and nobody else can
write to them; it is written to a temporary name and renamed, so a reader never sees half of
one. Every failure to read or write is only a miss: the caller rebuilds what it wanted.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "triage"


def caching_off() -> bool:
    return bool(os.environ.get("TRIAGE_NO_CACHE"))


def trusted(path: Path) -> bool:
    """Owned by this user, in a directory nobody else can write to: another user cannot plant
    a file that changes what this user's reports say."""
    try:
        st, dst = path.lstat(), path.parent.stat()
    except OSError:
        return False
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    regular = (st.st_mode & 0o170000) == 0o100000
    return regular and st.st_uid == uid and dst.st_uid == uid and not (dst.st_mode & 0o022) and not (st.st_mode & 0o022)


def read_trusted(path: Path, limit: int = 64 * 1024 * 1024) -> bytes | None:
    """The file's bytes (at most `limit`), or None when it is missing or not trusted."""
    if not trusted(path):
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit)
    except OSError:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used: pruning keeps the recently used ones
    return data


def write_atomic(path: Path, data: bytes) -> bool:
    """Write `data` to `path` through a temporary file in the same directory (mode 0700);
    False when that could not be done (a read-only home, a full disk)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path.parent, 0o700)
        fd, tmp = tempfile.mkstemp(prefix=".triage-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return False
    return True


def seal(magic: bytes, payload: bytes) -> bytes:
    """`payload` behind `magic` and its SHA-256: what write_sealed writes."""
    return magic + hashlib.sha256(payload).digest() + payload


def unseal(data: bytes, magic: bytes) -> bytes | None:
    """The payload of sealed bytes, or None when they are not `magic`'s or fail the digest
    (damaged, cut short, edited)."""
    if not data.startswith(magic):
        return None
    digest, payload = data[len(magic) : len(magic) + 32], data[len(magic) + 32 :]
    return payload if hashlib.sha256(payload).digest() == digest else None


def read_sealed(path: Path, magic: bytes) -> bytes | None:
    """The payload of a trusted file that write_sealed wrote with `magic`; None for anything else."""
    data = read_trusted(path)
    return None if data is None else unseal(data, magic)


def write_sealed(path: Path, magic: bytes, payload: bytes) -> bool:
    return write_atomic(path, seal(magic, payload))


def prune(directory: Path, pattern: str, keep: int, current: Path | None = None) -> None:
    """Remove all but the `keep` most recently used files named `pattern` (never `current`)."""
    entries = []
    for f in directory.glob(pattern):
        with contextlib.suppress(OSError):
            entries.append((f.stat().st_mtime, f))
    entries.sort(reverse=True)
    for _, f in entries[keep:]:
        if f != current:
            with contextlib.suppress(OSError):
                f.unlink()
