"""The on-disk cache of a validated catalogue: JSON data, never code.

Where: `$XDG_CACHE_HOME/triage/catalogue-<key>.json` (default `~/.cache/triage/`), one file per
catalogue directory (the built-in one, each `--catalogue DIR`), keyed by triage's own location,
the directory and every entry file's path, size and modification time, so that any change to
an entry misses it. Who: only the command line (`triage analyze`, `watch`, ...) uses it; the
library call `triage.analyze()` writes nothing.
Off: `TRIAGE_NO_CACHE=1`. Pruned: the newest KEEP files are kept, older ones (and pickles of
earlier versions, which are never read) are removed whenever a new one is written.

The file holds the validated specs as plain JSON, and first the SHA-256 of the rest of it: a
damaged or edited file fails the digest and is a miss (the YAML is read instead), never a
crash, and no content of it can run. A file that passes is what this triage wrote from specs
it had validated, so they are rebuilt without validating them again (`model_construct`):
building the validators' schemas was a tenth of a 10 KB log's run. A pattern, checked in full
when its YAML was read, gets the source-only size check where it is compiled, on first use.
It is read only when it and its directory belong to this user and nobody else can write to
them (triage.core.diskcache).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args, get_origin

from triage.core import diskcache

if TYPE_CHECKING:
    from pydantic import BaseModel

    from triage.catalogue.load import Catalogue
    from triage.catalogue.models import WorkaroundSpec

# bumped when the cached data changes shape (4: no conflicts; 5: JSON instead of a pickle;
# 6: a digest, specs rebuilt without validation)
CACHE_VERSION = "6-json"
KEEP = 8
# the file starts `{"sha256": "<64 hex digits>", ` and the digest covers the JSON object that
# is left once that key is taken out: `{` and everything after the prefix
_HEAD = b'{"sha256": "'
_BODY = len(_HEAD) + 64 + 3


def cache_path(roots: list[Path]) -> Path | None:
    """Where the catalogue made of `roots` is cached; None when caching is off or a file vanished."""
    from triage.catalogue.load import entry_dirs, yaml_entries

    if diskcache.caching_off():
        return None
    from triage.core.version import __version__

    h = hashlib.sha256(f"{CACHE_VERSION} {__version__}".encode())
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
    from triage.catalogue.models import SignatureSpec
    from triage.core.lazymap import LazyMap

    data = diskcache.read_trusted(path)  # None when missing, too
    if data is None or not data.startswith(_HEAD):
        return None
    body = b"{" + data[_BODY:]
    if hashlib.sha256(body).hexdigest().encode() != data[len(_HEAD) : len(_HEAD) + 64]:
        return None  # damaged, cut short or edited: a miss
    try:
        doc = json.loads(body)
        if doc.get("version") != CACHE_VERSION:
            return None
        cat = Catalogue(dirs=[str(d) for d in doc["dirs"]], workarounds=LazyMap(_workaround))
        for s in doc["signatures"]:
            # the spec itself is built when first used (load.Signature): most never are
            sig = Signature(None, str(s["path"]), dump=s["spec"], build=functools.partial(_rebuilt, SignatureSpec))
            cat.signatures[sig.id] = sig
        for w in doc["workarounds"]:
            wid = str(w["spec"]["id"])  # built when first looked up
            cat.workarounds.later(wid, w["spec"])
            cat.workaround_paths[wid] = str(w["path"])
    except Exception:  # noqa: BLE001 - an older or odd cache is only a miss
        return None
    return cat


def _workaround(dump: dict[str, Any]) -> WorkaroundSpec:
    from triage.catalogue.models import WorkaroundSpec

    return _rebuilt(WorkaroundSpec, dump)


def _rebuilt(model: type[BaseModel], data: dict[str, Any]) -> Any:  # noqa: ANN401 - an instance of `model`
    """`model` from the dump of an instance that was validated, nested models included, without
    validating again; a field the dump lacks (a triage that added one) gets its default."""
    values: dict[str, Any] = {}
    for name, (sub, many) in _fields(model):
        if name not in data:
            continue
        v = data[name]
        if sub is not None and many and isinstance(v, list):
            v = [_rebuilt(sub, x) if isinstance(x, dict) else x for x in v]
        elif sub is not None and isinstance(v, dict):
            v = _rebuilt(sub, v)
        values[name] = v
    return model.model_construct(**values)


@functools.cache
def _fields(model: type[BaseModel]) -> tuple[tuple[str, tuple[type[BaseModel] | None, bool]], ...]:
    """Each field of `model` with the model it holds, if any (see _nested)."""
    return tuple((name, _nested(f.annotation)) for name, f in model.model_fields.items())


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, bool]:  # noqa: ANN401 - a type annotation
    """The model a field holds (`M`, `M | None`, `list[M]`), and whether it holds a list of them."""
    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    many = get_origin(annotation) is list
    for arg in get_args(annotation):
        sub, _ = _nested(arg)
        if sub is not None:
            return sub, many
    return None, False


def write_cache(path: Path, cat: Catalogue) -> None:
    doc = {
        "version": CACHE_VERSION,
        "dirs": cat.dirs,
        "signatures": [{"path": s.path, "spec": s.spec.model_dump(mode="json")} for s in cat.signatures.values()],
        "workarounds": [{"path": cat.workaround_paths[wid], "spec": w.model_dump(mode="json")}
                        for wid, w in cat.workarounds.items()],
    }
    body = json.dumps(doc, ensure_ascii=True).encode()
    data = _HEAD + hashlib.sha256(body).hexdigest().encode() + b'", ' + body[1:]
    if diskcache.write_atomic(path, data):  # a cache that cannot be written is only slower next time
        prune(path.parent, keep=path)


def prune(directory: Path, keep: Path | None = None) -> None:
    """Remove pickles of earlier versions and all but the KEEP most recently used JSON files."""
    for f in directory.glob("catalogue-*.pickle"):
        with contextlib.suppress(OSError):
            f.unlink()
    diskcache.prune(directory, "catalogue-*.json", KEEP, current=keep)
