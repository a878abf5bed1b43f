"""The files of an archive: a directory tree, a glob, or an object-storage URL (fsspec).

The listing is a generator, so a million files are never held at once: the runners take
batches from it as workers become free (a directory is read one at a time; only an
object-store glob, which fsspec expands whole, is listed at once). Hidden files and directories (a leading dot) are
left out, as `triage analyze DIR` does.
"""

from __future__ import annotations

import contextlib
import glob
import os
import posixpath
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from triage.core.errors import TriageError

GLOB_CHARS = "*?["


@dataclass(frozen=True)
class LogFile:
    path: str  # a local path, or a URL for object storage
    mtime: float | None  # seconds since the epoch: when the log was last written
    size: int | None
    place: str  # the server when the log names none: its parent directory (or its name at the top)
    # why the entry cannot be read, known when it was listed (a FIFO, a directory that cannot be
    # listed): the worker reports it as failed without opening it
    error: str | None = None
    # the host records of the same incident beside it (a node's bundle directory: one server log
    # and only kernel / nvidia-smi / kubectl / Slurm records), read with it as `analyze --with`
    records: tuple[str, ...] = ()


def is_url(source: str) -> bool:
    return "://" in source


def list_source(source: str) -> Iterator[LogFile]:
    """Every file of SOURCE, in a stable order; a missing source or one without any file is a
    usage error (exit 2)."""
    files = _list_url(source) if is_url(source) else _list_local(source)
    first = next(files, None)
    if first is None:
        raise TriageError(f"{source}: no file to analyse")
    yield first
    yield from files


def holds(source: str, path: Path) -> bool:
    """Whether an existing file `path` is part of a local SOURCE (an output must not overwrite a log)."""
    if is_url(source) or not path.exists():
        return False
    target = path.resolve()
    mine = {target, *target.parents}
    if Path(source).exists():
        return Path(source).resolve() in mine
    return any(Path(m).resolve() in mine for m in glob.iglob(source, recursive=True))


def place_of(path: str, root: str) -> str:
    """The server a log belongs to when its text does not say: the directory that holds it
    (archive/<server>/..log), or for a log at the top of the archive its name up to the first
    dot (archive/<server>.log.gz)."""
    rel = posixpath.relpath(path.replace(os.sep, "/"), root.replace(os.sep, "/")) if root else path
    parent = posixpath.dirname(rel)
    if parent and parent not in (".", ""):
        return posixpath.basename(parent)
    return posixpath.basename(path).split(".", 1)[0] or posixpath.basename(path)


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _entry(path: str, root: str) -> LogFile | None:
    try:
        st = os.stat(path)
    except OSError:  # vanished or a dangling link: reported by the worker that tries to read it
        return LogFile(path, None, None, place_of(path, root))
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        # a FIFO, socket or device is reported, not opened (reading one blocks or never ends),
        # so that nothing in the archive goes uncounted
        return LogFile(path, None, None, place_of(path, root), "not a regular file (a FIFO, socket or device): not read")
    return LogFile(path, st.st_mtime, st.st_size, place_of(path, root))


def _unlisted(path: str, root: str, e: OSError) -> LogFile:
    return LogFile(path, None, None, place_of(path, root), f"cannot list this directory ({e.strerror or e})")


def _walk(top_dir: str, root: str) -> Iterator[LogFile]:
    # a directory that cannot be listed is reported as a failed entry, never skipped in silence
    unlisted: list[OSError] = []
    for top, dirs, names in os.walk(top_dir, onerror=unlisted.append):
        while unlisted:
            err = unlisted.pop()
            yield _unlisted(str(err.filename or top), root, err)
        dirs[:] = sorted(d for d in dirs if not _hidden(d))
        visible = [n for n in sorted(names) if not _hidden(n)]
        bundle = _bundle(top, visible)
        if bundle is not None:
            e = _entry(os.path.join(top, bundle[0]), root)
            if e is not None:
                yield LogFile(e.path, e.mtime, e.size, e.place, e.error, tuple(os.path.join(top, r) for r in bundle[1]))
            continue
        for name in visible:
            e = _entry(os.path.join(top, name), root)
            if e is not None:
                yield e
    for err in unlisted:  # the last directory's error comes after its walk
        yield _unlisted(str(err.filename or top_dir), root, err)


# a node's bundle is a handful of files; a directory of thousands of logs is not sniffed
BUNDLE_MAX_FILES = 16


def _bundle(top: str, names: list[str]) -> tuple[str, list[str]] | None:
    """One server log and host records beside it, by the rule `analyze DIR` applies."""
    if not 2 <= len(names) <= BUNDLE_MAX_FILES:
        return None
    from triage.pipeline.host.source import bundle

    found = bundle([os.path.join(top, n) for n in names])
    if found is None:
        return None
    return os.path.basename(found[0]), [os.path.basename(r) for r in found[1]]


def _list_local(source: str) -> Iterator[LogFile]:
    p = Path(source)
    if p.is_dir():
        yield from _walk(source, source)
    elif p.exists():
        e = _entry(source, str(p.parent))
        if e is None:
            raise TriageError(f"{source}: not a regular file")
        yield e
    elif any(c in source for c in GLOB_CHARS):
        root = _glob_root(source)
        # unsorted, so that a glob over a million files is not held in a list: the
        # leaderboard does not depend on the order (board.py merges in any order)
        for path in glob.iglob(source, recursive=True):
            if any(_hidden(part) for part in Path(path).parts[len(Path(root).parts):]):
                continue
            if os.path.isdir(path):  # archive/node0*: the servers' directories, walked
                yield from _walk(path, root)
            else:
                e = _entry(path, root)
                if e is not None:
                    yield e
    else:
        raise TriageError(f"{source}: no such file or directory")


def _glob_root(pattern: str) -> str:
    """The fixed directory part of a glob: what `place_of` counts from."""
    parts = pattern.replace(os.sep, "/").split("/")
    fixed = []
    for part in parts[:-1]:
        if any(c in part for c in GLOB_CHARS):
            break
        fixed.append(part)
    return "/".join(fixed)


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of a URL and the path inside it; a clear error without fsspec or
    without the package of that filesystem (s3fs, gcsfs ...)."""
    try:
        from fsspec.core import url_to_fs
    except ImportError:
        raise TriageError(f"{url}: reading object storage needs fsspec and the filesystem's package "
                          "(pip install fsspec s3fs, or gcsfs)") from None
    try:
        return url_to_fs(url)
    except (ImportError, ValueError) as e:
        raise TriageError(f"{url}: {e}") from None


def _mtime(info: dict[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "updated", "last_modified", "modified", "created"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, (int, float)):
            return float(v)
        if hasattr(v, "timestamp"):
            return float(v.timestamp())
        if isinstance(v, str):
            from datetime import datetime

            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def _list_url(url: str) -> Iterator[LogFile]:
    fs, path = filesystem(url)
    protocol = url.split("://", 1)[0]
    try:
        if any(c in path for c in GLOB_CHARS):
            root = _glob_root(path)
            found = fs.glob(path, detail=True)
        elif fs.isdir(path):
            yield from _walk_url(fs, protocol, url, path)
            return
        elif fs.exists(path):
            root = posixpath.dirname(path)
            found = {path: fs.info(path)}
        else:
            raise TriageError(f"{url}: no such file or directory")
    except OSError as e:
        raise TriageError(f"{url}: cannot list ({e})") from None
    for name in sorted(found):
        entry = _url_entry(fs, protocol, name, found[name], root)
        if entry is not None:
            yield entry


def _url_entry(fs: Any, protocol: str, name: str, info: dict[str, Any], root: str) -> LogFile | None:
    rel = posixpath.relpath(name, root) if root else name
    if info.get("type") == "directory" or any(_hidden(p) for p in rel.split("/")):
        return None
    full = fs.unstrip_protocol(name) if hasattr(fs, "unstrip_protocol") else f"{protocol}://{name}"
    return LogFile(full, _mtime(info), info.get("size"), place_of(name, root))


def _walk_url(fs: Any, protocol: str, url: str, root: str) -> Iterator[LogFile]:
    """A prefix listed one directory at a time (fs.ls), not as one list of every object (fs.find),
    so a bucket of a million logs is never held whole; hidden directories are not entered, and
    one that cannot be listed is reported. Not fs.walk: its on_error does not reach below the
    top directory, so an unlistable sub-directory would vanish in silence."""
    start = root.rstrip("/") or root
    stack = [start]
    while stack:
        top = stack.pop()
        try:
            listing = fs.ls(top, detail=True)
        except OSError as err:
            if top == start:
                raise TriageError(f"{url}: cannot list ({err})") from None
            yield _unlisted(fs.unstrip_protocol(top), root, err)
            continue
        finally:
            # the filesystem's listing cache would otherwise keep every object it was shown
            _forget(fs, top)
        subdirs = []
        for info in sorted(listing, key=lambda x: str(x.get("name", ""))):
            name = str(info.get("name", "")).rstrip("/")
            if not name or name == top or _hidden(posixpath.basename(name)):
                continue
            if info.get("type") == "directory":
                subdirs.append(name)
            else:
                entry = _url_entry(fs, protocol, name, info, root)
                if entry is not None:
                    yield entry
        stack.extend(reversed(subdirs))


def _forget(fs: Any, path: str) -> None:
    with contextlib.suppress(Exception):  # a cache that cannot be cleared costs memory, not results
        fs.invalidate_cache(path)
