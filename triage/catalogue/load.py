"""Load catalogue YAML into models; errors name file, line and field.

YAML is read with PyYAML's safe loader (nothing in a file is executed), C-accelerated when
available. Aliases are refused outright: a catalogue entry never needs them, and refusing
them closes the door on exponential "billion laughs" expansion.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import regex
from pydantic import ValidationError

from triage.catalogue.expansion import PatternTooLarge, compile_checked
from triage.catalogue.models import SignatureSpec, WorkaroundSpec
from triage.core.errors import CatalogueError
from triage.core.lazymap import LazyMap

if TYPE_CHECKING:
    import yaml


def _loader_class() -> type:
    """PyYAML's safe loader, C-accelerated when available. yaml is imported here, not with the
    module: a run that reads the catalogue from its cache reads no YAML (8 ms saved)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


MAX_FILE = 512 * 1024


class Signature:
    """A catalogue entry: its spec, where it came from, and its patterns compiled on first use.

    From the cache, the spec itself is built on first use too (`build`, from its dump): a run
    reads the keywords, id and workaround ids of every signature, and the rest only of the few
    whose keywords the log holds."""

    def __init__(self, spec: SignatureSpec | None, path: str, compiled: list[regex.Pattern[str]] | None = None,
                 *, head: tuple[Any, Any, Any] | None = None, dump: Any = None,  # noqa: ANN401
                 build: Callable[[Any], SignatureSpec] | None = None) -> None:
        """From its spec; or, from the cache, from its `head` (id, keywords, workaround ids)
        and a `dump` that `build(dump)` turns into the spec when it is first used."""
        self.path = path
        self._spec, self._compiled = spec, compiled
        self._dump, self._build = dump, build
        if spec is not None:
            self.id, self.keywords, self.workaround_ids = spec.id, spec.keywords, spec.workarounds
        elif head is not None and dump is not None and build is not None:
            self.id, self.keywords, self.workaround_ids = str(head[0]), _strings(head[1]), _strings(head[2])
        else:
            raise TypeError("a Signature needs its spec, or its head, dump and how to build it")

    @property
    def spec(self) -> SignatureSpec:
        if self._spec is None:
            assert self._dump is not None and self._build is not None
            self._spec = self._build(self._dump)
            self._dump = None
        return self._spec

    @property
    def patterns(self) -> list[regex.Pattern[str]]:
        if self._compiled is None:
            # only a spec that passed the full check when its YAML was read gets here: one from
            # the cache (written from such specs, and its digest held) or pickled to a backtest
            # worker; compiling it does not parse it twice more (the full check parses it once
            # in Python: it was half of compiling a small log's matched signatures)
            try:
                self._compiled = [compile_checked(p, parse=False) for p in self.spec.patterns]
            except PatternTooLarge:
                # the source alone says it is too large: the entry's own file decides
                fresh = load_signature(Path(self.path))
                self._spec, self._compiled = fresh.spec, fresh.patterns
        return self._compiled

    def __getstate__(self) -> dict:
        # pickled to the worker processes of a backtest: specs only, patterns compile again there
        return {"spec": self.spec, "path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["spec"], state["path"])  # type: ignore[misc]


def _strings(v: Any) -> list[str]:  # noqa: ANN401 - a value of the cache's JSON
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError("expected a list of strings")
    return v


@dataclass
class Catalogue:
    """The signatures and workarounds of every catalogue directory, by id."""

    signatures: dict[str, Signature] = field(default_factory=dict)
    # built on first lookup when read from the cache (core/lazymap.py)
    workarounds: LazyMap[WorkaroundSpec] = field(default_factory=LazyMap)
    workaround_paths: dict[str, str] = field(default_factory=dict)
    dirs: list[str] = field(default_factory=list)
    # where what is derived from this catalogue (its compiled keyword database) may be kept
    # between runs: set only when the caller asked for the on-disk cache (the command line)
    cache_dir: Path | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.workarounds, LazyMap):  # given a plain dict
            self.workarounds = LazyMap(items=self.workarounds)

    def keywords(self) -> frozenset[str]:
        return self._keywords()[1]

    def keyword_index(self) -> dict[str, list[Signature]]:
        return self._keywords()[0]

    def _keywords(self) -> tuple[dict[str, list[Signature]], frozenset[str]]:
        """The signatures that carry each keyword, and the keywords (what the prefilter is keyed
        by), made once per state of `signatures`: a `catalogue check` analyses 1,300 examples
        with one catalogue, and making the index for each was a quarter of its time. Signatures
        are only ever added to a catalogue (loading, merging), so the dict and its length tell
        its state; the memo holds the dict, so its id cannot be reused while the memo is kept."""
        memo = self.__dict__.get("_keyword_memo")
        if memo is None or memo[0] is not self.signatures or memo[1] != len(self.signatures):
            index: dict[str, list[Signature]] = {}
            for s in self.signatures.values():
                for k in s.keywords:
                    index.setdefault(k, []).append(s)
            memo = self.__dict__["_keyword_memo"] = (self.signatures, len(self.signatures), index, frozenset(index))
        return memo[2], memo[3]

    def __getstate__(self) -> dict[str, Any]:
        # sent to a backtest's worker processes: the memo is rebuilt there, not pickled
        return {k: v for k, v in self.__dict__.items() if k != "_keyword_memo"}


def _is_checkout(d: Path) -> bool:
    """A checkout of triage: its catalogue trees beside a pyproject.toml naming the project."""
    if not ((d / "signatures").is_dir() and (d / "workarounds").is_dir()):
        return False
    try:
        head = (d / "pyproject.toml").read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return False
    return re.search(r'(?m)^name\s*=\s*"triage"\s*$', head) is not None


def checkout_around(start: Path | None = None) -> Path | None:
    """The checkout of triage the directory `start` (default: the current one) is in, if any."""
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:  # the current directory was removed
        return None
    return next((d for d in (here, *here.parents) if _is_checkout(d)), None)


def checkout_instead(package: Path | None = None, cwd: Path | None = None) -> Path | None:
    """The checkout whose catalogue an installed copy takes instead of its own (builtin_dirs)."""
    here = package or Path(__file__).resolve()
    if (here.parents[2] / "signatures").is_dir():
        return None
    return checkout_around(cwd)


def builtin_dirs(package: Path | None = None, cwd: Path | None = None) -> list[Path]:
    """The catalogue shipped with the code: the repository's top level when run from a
    checkout (an editable install). An installed copy (`pip install .`, which copies the
    catalogue into the package) run inside a checkout of triage takes that checkout's: there,
    the catalogue is what one edits, tests (`catalogue check`) and compares with a git revision
    (`catalogue backtest --against HEAD`), and the installed copy is a snapshot of it. Elsewhere,
    the copy inside the package."""
    here = package or Path(__file__).resolve()
    repo = here.parents[2]
    if (repo / "signatures").is_dir() and (repo / "workarounds").is_dir() and (repo / "pyproject.toml").exists():
        return [repo]
    around = checkout_around(cwd)
    if around is not None:
        return [around]
    packaged = here.parent / "builtin"
    if (packaged / "signatures").is_dir():
        return [packaged]
    raise CatalogueError("the built-in catalogue is missing from this installation (reinstall triage)")


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Line (1-based) of the YAML node at a pydantic error location."""
    import yaml

    cur = node
    best = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(cur, yaml.MappingNode):
            nxt = None
            for k, v in cur.value:
                if isinstance(k, yaml.ScalarNode) and k.value == part:
                    nxt = v
                    best = k.start_mark.line + 1
                    break
            cur = nxt
        elif isinstance(cur, yaml.SequenceNode) and isinstance(part, int) and part < len(cur.value):
            cur = cur.value[part]
            best = cur.start_mark.line + 1
        else:
            break
        if cur is None:
            break
    return best


def _reject_aliases(node: yaml.Node, path: str) -> None:
    """The composer turns `*alias` into a second reference to the same node: refuse those."""
    import yaml

    stack = [node]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            raise CatalogueError(f"{path}:{n.start_mark.line + 1}: YAML aliases (*name) are not allowed in the catalogue")
        seen.add(id(n))
        if len(seen) > 100_000:
            raise CatalogueError(f"{path}: too many YAML nodes")
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.extend((k, v))
        elif isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)


def read_capped(path: Path) -> bytes:
    """The bytes of a catalogue file, which must be a regular file of at most MAX_FILE bytes.

    Checked before anything is read, and again on the open descriptor (the name could be
    swapped in between): a symlink to /dev/zero or a FIFO named `x.yaml` is refused instead
    of read forever or waited on. The read itself is capped too."""
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise CatalogueError(f"{path}:1: not a regular file (a device, FIFO or socket cannot be a catalogue entry)")
        if st.st_size > MAX_FILE:
            raise CatalogueError(f"{path}:1: {st.st_size} bytes, larger than a catalogue entry may be ({MAX_FILE})")
        # O_NONBLOCK: should the name turn into a FIFO after the check, open() does not wait for a writer
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CatalogueError(f"{path}:1: not a regular file (a device, FIFO or socket cannot be a catalogue entry)")
            data = fh.read(MAX_FILE + 1)
    except OSError as e:
        raise CatalogueError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(data) > MAX_FILE:
        raise CatalogueError(f"{path}:1: larger than a catalogue entry may be ({MAX_FILE} bytes)")
    return data


def read_yaml(path: Path, raw: bytes | None = None) -> tuple[Any, yaml.Node | None]:
    """The file's YAML document and its node tree; `raw`: its bytes, already read with read_capped."""
    import yaml

    try:
        text = (read_capped(path) if raw is None else raw).decode("utf-8")
    except UnicodeDecodeError:
        raise CatalogueError(f"{path}: not UTF-8 text") from None
    try:
        loader = _loader_class()(text)  # a safe loader: plain data only, nothing constructed from tags
        try:
            node = loader.get_single_node()
            if node is None:
                raise CatalogueError(f"{path}:1: empty file")
            _reject_aliases(node, str(path))
            data = loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CatalogueError(f"{path}{where}: invalid YAML: {problem}") from None
    return data, node


def _format_validation(path: Path, node: yaml.Node | None, err: ValidationError) -> str:
    first = err.errors()[0]
    loc = tuple(first["loc"])
    line = _line_of(node, loc)
    fld = ".".join(str(x) for x in loc) or "(entry)"
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{path}:{line or 1}: field '{fld}': {first['msg']}{more}"


# Entries read this process, by path and by the file's bytes: a catalogue read again (the
# library's load_catalogue() on every call, `catalogue check`, a backtest's catalogue per case)
# parses, validates and compiles only the files that changed, which was 90% of reading one.
# Keyed by the content, not the size and mtime, so no edit can be missed; an entry that fails
# is not kept (its error is raised again). Entries are shared, never changed (as _READ's are).
_ENTRIES: dict[tuple[str, bytes], Signature | WorkaroundSpec] = {}
MAX_ENTRIES = 4096  # the built-in catalogue is ~710 files; a few user catalogues beside it


def _remember(key: tuple[str, bytes], entry: Signature | WorkaroundSpec) -> None:
    if len(_ENTRIES) >= MAX_ENTRIES:
        _ENTRIES.clear()
    _ENTRIES[key] = entry


def load_signature(path: Path) -> Signature:
    raw = read_capped(path)
    key = ("signature " + str(path), raw)
    hit = _ENTRIES.get(key)
    if isinstance(hit, Signature):
        return hit
    sig = _read_signature(path, raw)
    _remember(key, sig)
    return sig


def _read_signature(path: Path, raw: bytes) -> Signature:
    data, node = read_yaml(path, raw)
    if not isinstance(data, dict):
        raise CatalogueError(f"{path}:1: a signature must be a mapping of fields")
    try:
        spec = SignatureSpec.model_validate(data)
    except ValidationError as e:
        raise CatalogueError(_format_validation(path, node, e)) from None
    compiled = []
    for i, p in enumerate(spec.patterns):
        try:
            compiled.append(compile_checked(p))
        except regex.error as e:
            line = _line_of(node, ("patterns", i))
            raise CatalogueError(f"{path}:{line}: field 'patterns.{i}': invalid regex: {e}") from None
        except PatternTooLarge as e:
            line = _line_of(node, ("patterns", i))
            raise CatalogueError(f"{path}:{line}: field 'patterns.{i}': {e}") from None
    return Signature(spec, str(path), compiled)


def load_workaround(path: Path) -> WorkaroundSpec:
    raw = read_capped(path)
    key = ("workaround " + str(path), raw)
    hit = _ENTRIES.get(key)
    if isinstance(hit, WorkaroundSpec):
        return hit
    data, node = read_yaml(path, raw)
    if not isinstance(data, dict):
        raise CatalogueError(f"{path}:1: a workaround must be a mapping of fields")
    try:
        spec = WorkaroundSpec.model_validate(data)
    except ValidationError as e:
        raise CatalogueError(_format_validation(path, node, e)) from None
    _remember(key, spec)
    return spec


def yaml_entries(directory: str) -> Iterator[os.DirEntry[str]]:
    """Every .yaml/.yml file below `directory`, the order the loader reads them in: a
    directory's files by name, then its sub-directories by name; directories whose name starts
    with a dot, symlinked directories and directories that cannot be listed are not entered.
    DirEntry, not Path: the cache key takes each file's stat from it (cache.py)."""
    try:
        with os.scandir(directory) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    dirs = []
    for e in entries:
        if e.is_dir():
            if not e.name.startswith(".") and not e.is_symlink():
                dirs.append(e.path)
        elif e.name.endswith((".yaml", ".yml")):
            yield e
    for d in dirs:
        yield from yaml_entries(d)


def entry_dirs(root: Path) -> list[tuple[Path, bool | None]]:
    """(directory, are its files signatures) that hold the entries of `root`: workarounds/ then
    signatures/ when the root has either, else the root itself (None: told apart by fields)."""
    sig_root, wk_root = root / "signatures", root / "workarounds"
    if sig_root.is_dir() or wk_root.is_dir():
        return [(wk_root, False), (sig_root, True)]
    return [(root, None)]


# Directories read this process, by cache key (which names every entry file's size and mtime)
# and the identity of the cache file read: a hit is the catalogue as it is on disk, and a
# cache file replaced or edited since is read again. For a program that runs many commands in
# one process (each read validates 440 specs: ~15 ms); entries are shared, never changed.
_READ: dict[Path, tuple[tuple[int, int, int] | None, Catalogue]] = {}


def _file_id(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def load_catalogue(extra: list[str] | None = None, builtin: bool = True, strict_refs: bool = True,
                   cache: bool = False) -> Catalogue:
    """The catalogue: the built-in one plus `extra` directories, validated.

    With `cache` (the command line's choice; the library's default is off, so that it writes
    nothing the caller did not ask for) each directory's validated entries are kept on disk as
    JSON Lines (triage/catalogue/cache.py), one file per directory: an on-call run does not re-parse
    400 YAML files, and editing one's own `--catalogue DIR` re-reads only that directory."""
    roots: list[Path] = list(builtin_dirs()) if builtin else []
    for d in extra or []:
        if not Path(d).is_dir():
            raise CatalogueError(f"{d}: catalogue directory not found")
        roots.append(Path(d))
    if not (cache and strict_refs):
        cat = load_roots(roots)
    else:
        from triage.core import diskcache

        cat = Catalogue(dirs=[str(r) for r in roots], cache_dir=None if diskcache.caching_off() else diskcache.cache_dir())
        for root in roots:
            _merge(cat, _cached_directory(root))  # the same duplicate checks, in the same order, as load_roots
    if strict_refs:
        _check_references(cat)
    return cat


def _cached_directory(root: Path) -> Catalogue:
    """One directory's entries: from this process's memo, the on-disk cache, or its YAML."""
    from triage.catalogue import cache as disk

    path = disk.cache_path([root])
    if path is None:  # caching off, or a file vanished while the key was taken
        return load_roots([root])
    seen = _READ.get(path)
    if seen is not None and seen[0] == _file_id(path):
        return seen[1]
    part = disk.read_cache(path)
    if part is None:
        part = load_roots([root])
        disk.write_cache(path, part)
    _READ[path] = (_file_id(path), part)
    while len(_READ) > 8:
        _READ.pop(next(iter(_READ)))
    return part


def _merge(cat: Catalogue, part: Catalogue) -> None:
    for wid in part.workarounds:  # not built: a cached entry stays a dump until looked up
        _check_new_wk(cat, wid, Path(part.workaround_paths[wid]))
        cat.workarounds.take(part.workarounds, wid)
        cat.workaround_paths[wid] = part.workaround_paths[wid]
    for sig in part.signatures.values():
        _add_sig(cat, sig)


def _check_references(cat: Catalogue) -> None:
    for s in cat.signatures.values():
        for w in s.workaround_ids:
            if w not in cat.workarounds:
                raise CatalogueError(f"{s.path}:{line_with(s.path, w)}: field 'workarounds': unknown workaround id {w!r}")


def _entries(root: Path) -> list[tuple[Path, bool | None]]:
    """(file, is it a signature) for every entry under `root`, workarounds first; None for a
    bare directory of entries, whose files are told apart by their fields when loaded."""
    return [(Path(e.path), kind) for d, kind in entry_dirs(root) for e in yaml_entries(str(d))]


def _add_file(cat: Catalogue, path: Path, signature: bool | None) -> None:
    if signature is None:
        data, _ = read_yaml(path)
        signature = isinstance(data, dict) and "patterns" in data
    if signature:
        _add_sig(cat, load_signature(path))
    else:
        _add_wk(cat, load_workaround(path), path)


def load_roots(roots: list[Path], problems: list[tuple[str, str]] | None = None) -> Catalogue:
    """Every entry under `roots` in one Catalogue (workaround references not checked). The
    first bad entry raises, or, given `problems`, is listed there as (path, message) and
    skipped, so that `catalogue check` reports every problem in one run."""
    cat = Catalogue(dirs=[str(r) for r in roots])
    for root in roots:
        if problems is not None and not root.is_dir():
            problems.append((str(root), "catalogue directory not found"))
            continue
        for path, signature in _entries(root):
            try:
                _add_file(cat, path, signature)
            except CatalogueError as e:
                if problems is None:
                    raise
                problems.append((str(path), str(e)))
    return cat


def line_with(path: str | Path, needle: str, key: str | None = None) -> int:
    """1-based line of the first line holding `needle` (after `key:` when given), else 1."""
    try:
        for i, line in enumerate(read_capped(Path(path)).decode("utf-8", "replace").splitlines(), 1):
            if needle in line and (key is None or line.lstrip().startswith(f"{key}:") or line.lstrip().startswith("-")):
                return i
    except CatalogueError:
        pass
    return 1


def _add_sig(cat: Catalogue, s: Signature) -> None:
    if s.id in cat.signatures:
        raise CatalogueError(f"{s.path}:{line_with(s.path, s.id, 'id')}: duplicate signature id {s.id!r} "
                             f"(also in {cat.signatures[s.id].path})")
    cat.signatures[s.id] = s


def _check_new_wk(cat: Catalogue, wid: str, path: Path) -> None:
    if wid in cat.workarounds:
        raise CatalogueError(f"{path}:{line_with(path, wid, 'id')}: duplicate workaround id {wid!r} "
                             f"(also in {cat.workaround_paths[wid]})")


def _add_wk(cat: Catalogue, w: WorkaroundSpec, path: Path) -> None:
    _check_new_wk(cat, w.id, path)
    cat.workarounds[w.id] = w
    cat.workaround_paths[w.id] = str(path)
