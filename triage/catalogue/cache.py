"""The on-disk cache of a validated catalogue: JSON data, never code.

Where: `$XDG_CACHE_HOME/triage/catalogue-<key>.json` (default `~/.cache/triage/`), one file per
catalogue directory (the built-in one, each `--catalogue DIR`), keyed by triage's own location,
the directory and every entry file's path, size and modification time, so that any change to
an entry misses it. Who: only the command line (`triage analyze`, `watch`, ...) uses it; the
library call `triage.analyze()` writes nothing.
Off: `TRIAGE_NO_CACHE=1`. Pruned: the newest KEEP files are kept, older ones (and pickles of
earlier versions, which are never read) are removed whenever a new one is written.

The file holds the validated specs as plain JSON; reading it validates them again with the
same pydantic models, so a damaged or edited file is a miss (the YAML is read instead), never
a crash, and no content of it can run. It is read only when it and its directory belong to
this user and nobody else can write to them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triage.catalogue.load import Catalogue

CACHE_VERSION = "5-json"  # bumped when the cached data changes shape (4: no conflicts; 5: JSON instead of a pickle)
KEEP = 8


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "triage"


def cache_path(roots: list[Path]) -> Path | None:
    """Where the catalogue made of `roots` is cached; None when caching is off or a file vanished."""
    from triage.catalogue.load import entry_dirs, yaml_entries

    if os.environ.get("TRIAGE_NO_CACHE"):
        return None
    h = hashlib.sha256(CACHE_VERSION.encode())
    h.update(os.path.dirname(os.path.realpath(__file__)).encode())
    for root in roots:
        h.update(f"root {os.path.realpath(root)}\n".encode())
        # the files the loader reads (load.entry_dirs: only signatures/ and workarounds/ of the
        # built-in root, the repository's top level, whose tests/ hold 300 YAML labels), by
        # their directory entries' stat: a Path and a realpath per file were a tenth of a 10 KB
        # log's run; a symlinked file is followed, as the loader reads through it
        skip = len(str(root)) + 1
        try:
            for d, _kind in entry_dirs(root):
                for e in yaml_entries(str(d)):
                    st = e.stat()
                    h.update(f"{e.path[skip:]}|{st.st_size}|{st.st_mtime_ns}\n".encode())
        except OSError:  # a file vanished, or a dangling link: no cache, the loader says why
            return None
    return cache_dir() / f"catalogue-{h.hexdigest()[:24]}.json"


def _trusted(path: Path) -> bool:
    """Owned by this user, in a directory nobody else can write to: another user cannot plant
    a catalogue that changes what this user's reports say."""
    try:
        st, dst = path.lstat(), path.parent.stat()
    except OSError:
        return False
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    regular = (st.st_mode & 0o170000) == 0o100000
    return regular and st.st_uid == uid and dst.st_uid == uid and not (dst.st_mode & 0o022) and not (st.st_mode & 0o022)


def read_cache(path: Path) -> Catalogue | None:
    from triage.catalogue.expansion import check_expansion
    from triage.catalogue.load import Catalogue, Signature
    from triage.catalogue.models import SignatureSpec, WorkaroundSpec

    if not path.exists() or not _trusted(path):
        return None
    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read(64 * 1024 * 1024))
        if doc.get("version") != CACHE_VERSION:
            return None
        cat = Catalogue(dirs=[str(d) for d in doc["dirs"]])
        for s in doc["signatures"]:
            spec = SignatureSpec.model_validate(s["spec"])
            for p in spec.patterns:
                check_expansion(p, parse=False)  # the file may be edited; compiling checks again, in full
            cat.signatures[spec.id] = Signature(spec, str(s["path"]))
        for w in doc["workarounds"]:
            wspec = WorkaroundSpec.model_validate(w["spec"])
            cat.workarounds[wspec.id] = wspec
            cat.workaround_paths[wspec.id] = str(w["path"])
    except Exception:  # noqa: BLE001 - a damaged, edited or older cache is only a miss
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used: pruning keeps the recently used ones
    return cat


def write_cache(path: Path, cat: Catalogue) -> None:
    doc = {
        "version": CACHE_VERSION,
        "dirs": cat.dirs,
        "signatures": [{"path": s.path, "spec": s.spec.model_dump(mode="json")} for s in cat.signatures.values()],
        "workarounds": [{"path": cat.workaround_paths[wid], "spec": w.model_dump(mode="json")}
                        for wid, w in cat.workarounds.items()],
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(path.parent, 0o700)
        fd, tmp = tempfile.mkstemp(prefix=".catalogue-", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, ensure_ascii=True)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        prune(path.parent, keep=path)
    except OSError:
        pass  # a cache that cannot be written is only slower next time


def prune(directory: Path, keep: Path | None = None) -> None:
    """Remove pickles of earlier versions and all but the KEEP most recently used JSON files."""
    entries = []
    for f in directory.glob("catalogue-*"):
        if f.suffix == ".pickle":
            with contextlib.suppress(OSError):
                f.unlink()
        elif f.suffix == ".json":
            with contextlib.suppress(OSError):
                entries.append((f.stat().st_mtime, f))
    entries.sort(reverse=True)
    for _, f in entries[KEEP:]:
        if f != keep:
            with contextlib.suppress(OSError):
                f.unlink()
