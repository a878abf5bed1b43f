"""The on-disk cache of a validated catalogue: JSON data, never code.

Where: `$XDG_CACHE_HOME/triage/catalogue-<key>.jsonl` (default `~/.cache/triage/`), one file per
catalogue directory (the built-in one, each `--catalogue DIR`), keyed by triage's own location,
the directory and every entry file's path, size and modification time, so that any change to
an entry misses it. Who: only the command line (`triage analyze`, `watch`, ...) uses it; the
library call `triage.analyze()` writes nothing.
Off: `TRIAGE_NO_CACHE=1`. Pruned: the newest KEEP files are kept, older ones (and the files of
earlier versions, which are never read) are removed whenever a new one is written.

The file is JSON Lines: a header with the SHA-256 of everything after it, an index (each
entry's id, keywords, workaround ids, path, and where its spec is), then one validated spec per
line. A damaged or edited file fails the digest and is a miss (the YAML is read instead), never
a crash, and no content of it can run. A run parses the index and only the specs it uses (the
signatures whose keywords the log holds, their workarounds): parsing all 450 was 5-7 ms of a
10 KB log's run. A file that passes is what this triage wrote from specs it had validated, so
they are rebuilt without validating them again (`model_construct`): building the validators'
schemas was a tenth of such a run. A pattern, checked in full when its YAML was read, gets the
source-only size check where it is compiled, on first use. It is read only when it and its
directory belong to this user and nobody else can write to them (triage.core.diskcache).
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
    from triage.catalogue.models import SignatureSpec, WorkaroundSpec

# bumped when the cached data changes shape (4: no conflicts; 5: JSON instead of a pickle;
# 6: a digest, specs rebuilt without validation; 7: JSON Lines, specs parsed on first use;
# 8: workarounds carry phases, versions and points_at, which a cache of 7 would drop)
CACHE_VERSION = "8-jsonl"
KEEP = 8
SUFFIX = ".jsonl"


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
    return diskcache.cache_dir() / f"catalogue-{h.hexdigest()[:24]}{SUFFIX}"


def index(data: bytes) -> tuple[dict[str, Any], int] | None:
    """The index of a cache file's bytes and where its spec lines start; None when the file is
    not one this triage wrote (another version, damaged, cut short or edited)."""
    first = data.find(b"\n")
    if first < 0 or not data.startswith(b'{"sha256": "'):
        return None
    try:
        head = json.loads(data[:first])
        if head.get("version") != CACHE_VERSION or hashlib.sha256(data[first + 1 :]).hexdigest() != head.get("sha256"):
            return None
        second = data.index(b"\n", first + 1)
        return json.loads(data[first + 1 : second]), second + 1
    except (ValueError, AttributeError):
        return None


def read_cache(path: Path) -> Catalogue | None:
    from triage.catalogue.load import Catalogue, Signature
    from triage.core.lazymap import LazyMap

    data = diskcache.read_trusted(path)  # None when missing, too
    if data is None or (found := index(data)) is None:
        return None
    doc, base = found
    # a spec stays its line's bytes until first used (bytes, not a view: a catalogue pickles)
    try:
        cat = Catalogue(dirs=[str(d) for d in doc["dirs"]], workarounds=LazyMap(_workaround))
        for path_, sid, keywords, wids, a, b in doc["signatures"]:
            # the spec itself is built when first used (load.Signature): most never are
            sig = Signature(None, str(path_), head=(sid, keywords, wids), dump=(str(path_), data[base + a : base + b]),
                            build=_signature)
            cat.signatures[sig.id] = sig
        for path_, wid, a, b in doc["workarounds"]:
            cat.workarounds.later(str(wid), (str(path_), data[base + a : base + b]))  # built when first looked up
            cat.workaround_paths[str(wid)] = str(path_)
    except (TypeError, ValueError, KeyError):  # an index of another shape is only a miss
        return None
    return cat


class _Damaged(ValueError):
    """A spec line whose values are not of its fields' types: a file whose digest was recomputed
    after an edit. Its entry is read from its YAML instead (a miss), never used as it is."""


def _signature(entry: tuple[str, bytes]) -> SignatureSpec:
    from triage.catalogue.models import SignatureSpec

    path, line = entry
    try:
        return _rebuilt(SignatureSpec, json.loads(line))
    except ValueError:  # _Damaged, or not JSON
        from triage.catalogue.load import load_signature

        return load_signature(Path(path)).spec


# Workarounds made from their spec lines this process, by entry (path and line): each catalogue
# made from one cache read takes its workarounds unmade (LazyMap.take), so every command run in
# one process (a watch, a program embedding the CLI) made the ones it looked up again. Keyed by
# the line's bytes, and shared as the signatures of one cache read are; never changed.
_MADE: dict[tuple[str, bytes], WorkaroundSpec] = {}
MAX_MADE = 4096


def _workaround(entry: tuple[str, bytes]) -> WorkaroundSpec:
    from triage.catalogue.models import WorkaroundSpec

    made = _MADE.get(entry)
    if made is not None:
        return made
    path, line = entry
    try:
        spec = _rebuilt(WorkaroundSpec, json.loads(line))
    except ValueError:
        from triage.catalogue.load import load_workaround

        return load_workaround(Path(path))  # a damaged line: not kept, its YAML decides each time
    if len(_MADE) >= MAX_MADE:
        _MADE.clear()
    _MADE[entry] = spec
    return spec


def _fits(annotation: Any, v: Any) -> bool:  # noqa: ANN401 - a type annotation and a JSON value
    """Whether a JSON value has the shape of a field's type (the types the catalogue's models use)."""
    import types
    from typing import Literal, Union

    from pydantic import BaseModel

    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        return any(_fits(a, v) for a in args)
    if origin is Literal:
        return v in args
    if annotation is type(None):
        return v is None
    if origin in (list, tuple, set, frozenset):
        return isinstance(v, list) and (not args or origin is tuple or all(_fits(args[0], x) for x in v))
    if origin is dict:
        return isinstance(v, dict) and (not args or all(isinstance(k, str) and _fits(args[1], x) for k, x in v.items()))
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return isinstance(v, dict)
        if annotation is bool:
            return isinstance(v, bool)
        if annotation in (int, float):
            return isinstance(v, (int, float)) and not isinstance(v, bool) and (annotation is float or isinstance(v, int))
        if annotation is str:
            return isinstance(v, str)
    return True  # a type the models do not use here: as before, trusted


def _rebuilt(model: type[BaseModel], data: dict[str, Any]) -> Any:  # noqa: ANN401 - an instance of `model`
    """`model` from the dump of an instance that was validated, nested models included, without
    validating again; a field the dump lacks (a triage that added one) gets its default. The
    digest only says the file is whole: a value of the wrong type (`patterns: 5`) raises
    _Damaged here rather than a TypeError deep inside a run."""
    if not isinstance(data, dict):
        raise _Damaged(f"{model.__name__}: not an object")
    values: dict[str, Any] = {}
    for name, (sub, many) in _fields(model):
        if name not in data:
            continue
        v = data[name]
        if not _fits(model.model_fields[name].annotation, v):
            raise _Damaged(f"{model.__name__}.{name}: {type(v).__name__}")
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
    lines: list[bytes] = []
    at = 0

    def line(spec: BaseModel) -> tuple[int, int]:
        nonlocal at
        text = json.dumps(spec.model_dump(mode="json"), ensure_ascii=True).encode()  # no raw newline
        lines.append(text + b"\n")
        at += len(text) + 1
        return at - len(text) - 1, at - 1

    doc = {
        "dirs": cat.dirs,
        "signatures": [[s.path, s.id, s.keywords, s.workaround_ids, *line(s.spec)] for s in cat.signatures.values()],
        "workarounds": [[cat.workaround_paths[wid], wid, *line(w)] for wid, w in cat.workarounds.items()],
    }
    rest = json.dumps(doc, ensure_ascii=True).encode() + b"\n" + b"".join(lines)
    head = json.dumps({"sha256": hashlib.sha256(rest).hexdigest(), "version": CACHE_VERSION}).encode()
    if diskcache.write_atomic(path, head + b"\n" + rest):  # a cache that cannot be written is only slower next time
        prune(path.parent, keep=path)


def prune(directory: Path, keep: Path | None = None) -> None:
    """Remove the files of earlier versions (pickles, JSON documents) and all but the KEEP most
    recently used current ones."""
    for old in ("catalogue-*.pickle", "catalogue-*.json"):
        for f in directory.glob(old):
            with contextlib.suppress(OSError):
                f.unlink()
    diskcache.prune(directory, f"catalogue-*{SUFFIX}", KEEP, current=keep)
