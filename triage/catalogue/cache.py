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
a crash, and no content of it can run. A pattern gets the YAML's size check where it is
compiled, on first use; one an edit made too large sends its entry back to the YAML. It is
read only when it and its directory belong to this user and nobody else can write to them
(triage.core.diskcache).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from triage.core import diskcache

if TYPE_CHECKING:
    from triage.catalogue.load import Catalogue

CACHE_VERSION = "5-json"  # bumped when the cached data changes shape (4: no conflicts; 5: JSON instead of a pickle)
KEEP = 8


def cache_path(roots: list[Path]) -> Path | None:
    """Where the catalogue made of `roots` is cached; None when caching is off or a file vanished."""
    from triage.catalogue.load import entry_dirs, yaml_entries

    if diskcache.caching_off():
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
    return diskcache.cache_dir() / f"catalogue-{h.hexdigest()[:24]}.json"


def read_cache(path: Path) -> Catalogue | None:
    from triage.catalogue.load import Catalogue, Signature
    from triage.catalogue.models import SignatureSpec, WorkaroundSpec

    data = diskcache.read_trusted(path) if path.exists() else None
    if data is None:
        return None
    try:
        doc = json.loads(data)
        if doc.get("version") != CACHE_VERSION:
            return None
        cat = Catalogue(dirs=[str(d) for d in doc["dirs"]])
        for s in doc["signatures"]:
            # no pattern-size check here: a pattern is checked in full where it is compiled
            # (expansion.compile_checked), and one an edit made too large sends that entry
            # back to its YAML (load.Signature.patterns)
            spec = SignatureSpec.model_validate(s["spec"])
            cat.signatures[spec.id] = Signature(spec, str(s["path"]))
        for w in doc["workarounds"]:
            wspec = WorkaroundSpec.model_validate(w["spec"])
            cat.workarounds[wspec.id] = wspec
            cat.workaround_paths[wspec.id] = str(w["path"])
    except Exception:  # noqa: BLE001 - a damaged, edited or older cache is only a miss
        return None
    return cat


def write_cache(path: Path, cat: Catalogue) -> None:
    doc = {
        "version": CACHE_VERSION,
        "dirs": cat.dirs,
        "signatures": [{"path": s.path, "spec": s.spec.model_dump(mode="json")} for s in cat.signatures.values()],
        "workarounds": [{"path": cat.workaround_paths[wid], "spec": w.model_dump(mode="json")}
                        for wid, w in cat.workarounds.items()],
    }
    if diskcache.write_atomic(path, json.dumps(doc, ensure_ascii=True).encode()):  # a cache that cannot be written is only slower next time
        prune(path.parent, keep=path)


def prune(directory: Path, keep: Path | None = None) -> None:
    """Remove pickles of earlier versions and all but the KEEP most recently used JSON files."""
    for f in directory.glob("catalogue-*.pickle"):
        with contextlib.suppress(OSError):
            f.unlink()
    diskcache.prune(directory, "catalogue-*.json", KEEP, current=keep)
