"""The source atlas: every message the engines' released packages raise, assert or log at error
level, as a template, with where it is raised and in which releases (built by scripts/build_atlas.py).

The file (data/atlas.bin) is read lazily: a small header (the packages' release lists and the
offsets of the shards), then only the shards that hold a word of the message being located.
Each template is filed under its rarest literal word (rarest across the whole atlas), so a
message is compared only with the few templates whose key word it contains.

Layout: MAGIC, an 8-byte big-endian header length, the zlib-compressed JSON header, then the
zlib-compressed JSON shards one after the other. A shard maps a key word to its templates:
`[package, exception, template, [site, ...]]`, a site being
`[file, function, condition, names, flags, runs]` where `runs` is a flat list of
`first release index, last release index, line` triples into the package's release list.

A message the log cut off may stop before its template's key word. So a template whose key word
lies beyond the start of its first line is also pointed to from the rarest word of that start:
the shard of that word maps `HEAD_MARK + word` to the key words to read (the header's `heads`
lists those words).
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

MAGIC = b"TRIAGE-ATLAS\n"
FORMAT = 3  # bump when the layout above changes; tests check the shipped file against it
# many small shards: a message's lookup reads a handful of words' shards, and a shard of a
# 5 MB atlas in 2,048 parts parses in a fraction of a millisecond
SHARDS = 2048
HOLE = "\x1f"  # a hole in a template: HOLE + `s` (any text), `d` (an integer), `f` (a number)
DATA = Path(__file__).resolve().parent / "data" / "atlas.bin"

# how much of a template's first line (as stored, a hole taking two characters) a message cut off
# by the log is counted on to show: a word there points to the template's key word
HEAD = 36
HEAD_MARK = "^"  # a shard entry under "^word" lists key words, not templates
BARE_MARK = "="  # a shard entry under "=word" holds bare asserts filed under that word
# a bare `assert cond` (no message) is stored as BARE + the statement's first line, as a
# traceback's innermost frame shows it; it is found by that code line, never by a message
BARE = "\x1e"

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
_HOLES = re.compile(f"{HOLE}[sdf]")
_HOLE_RE = {"s": r".*?", "d": r"-?\d+", "f": r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?%?"}
# a located message needs this much literal text matched: a template of three words ("Invalid
# value: {x}") says too little of where a line came from
MIN_LITERAL = 16
# how much of a template's first line a message cut off by the log still has to show
MIN_PREFIX = 28


def segments(template: str) -> list[str]:
    """The template as alternating literal text and hole codes (`\\x1fs` ...)."""
    out: list[str] = []
    pos = 0
    for m in _HOLES.finditer(template):
        out.append(template[pos:m.start()])
        out.append(m.group(0))
        pos = m.end()
    out.append(template[pos:])
    return out


def literal(template: str) -> str:
    return _HOLES.sub("", template)


def filled(template: str, value: str = "{}") -> str:
    """The template with every hole replaced by `value` ("{}" to show it to people)."""
    return _HOLES.sub(lambda _: value, template)


def first_line(template: str) -> str:
    return template.split("\n", 1)[0].rstrip()


def words(text: str) -> set[str]:
    """The words a line is looked up by (lower case, four characters or more)."""
    return {w.lower() for w in _WORD.findall(text)}


def key_words(template: str, limit: int = 200) -> list[str]:
    """Literal words of a template's first line that its filled-in form shows as whole words:
    a word that touches a hole may run into the hole's value (`{n}tokens`), so it is left out."""
    segs = segments(first_line(template)[:limit])
    out: list[str] = []
    for i, seg in enumerate(segs):
        if seg.startswith(HOLE):
            continue
        before = i > 0 and segs[i - 1].startswith(HOLE)
        after = i + 1 < len(segs) and segs[i + 1].startswith(HOLE)
        for m in _WORD.finditer(seg):
            if (before and m.start() == 0) or (after and m.end() == len(seg)):
                continue
            w = m.group(0).lower()
            if w not in out:
                out.append(w)
    return out


def shard_of(word: str, shards: int = SHARDS) -> int:
    return zlib.crc32(word.encode()) % shards


def pattern_source(template: str, prefix_parts: int | None = None) -> str:
    """The source of `pattern` (for a caller that compiles it with more around it)."""
    segs = segments(first_line(template))
    if prefix_parts is not None:
        segs = segs[:prefix_parts]
    # "%s %s must be %s %s, got %s %s.": two text holes with only white space between match
    # what one does (`.*?\s*.*?` and `.*?` on a line), but a line that fails to match tries
    # every split between them, a power of its length in the number of holes (0.4 s per
    # message for that template in `catalogue check`); each such run is one hole
    out: list[str] = []
    any_at = -1  # where in `out` the last text hole is, while only white space has followed it
    for seg in segs:
        if seg.startswith(HOLE):
            if seg[1] == "s" and any_at >= 0:
                del out[any_at + 1:]
                continue
            out.append(_HOLE_RE[seg[1]])
            any_at = len(out) - 1 if seg[1] == "s" else -1
        else:
            out.append(_loose(seg))
            if seg.strip():
                any_at = -1
    return "".join(out)


def pattern(template: str, prefix_parts: int | None = None) -> re.Pattern[str]:
    """A regex of a template's first line (or of its first `prefix_parts` segments)."""
    return re.compile(pattern_source(template, prefix_parts))


def _loose(text: str) -> str:
    """A literal segment as a regex: runs of white space may be folded or re-wrapped by the log or
    a paste; the white space at either end is kept, as optional (between a number hole and `GiB`
    it is needed; before an empty hole at the end of a line, the log has often dropped it)."""
    if not text:
        return ""
    if not text.strip():
        return r"\s*"
    body = r"\s+".join(re.escape(part) for part in text.split())
    return (r"\s*" if text[0].isspace() else "") + body + (r"\s*" if text[-1].isspace() else "")


def span_text(versions: list[str], idx: set[int] | list[int]) -> str:
    """Release indices as ranges of release names: "0.8.0-0.11.2, 0.12.1"."""
    spans: list[list[int]] = []
    for i in sorted(set(idx)):
        if spans and spans[-1][1] == i - 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    return ", ".join(versions[a] if a == b else f"{versions[a]}-{versions[b]}" for a, b in spans)


@dataclass(frozen=True)
class Site:
    """Where one release line of a template is raised."""

    file: str
    function: str
    condition: str
    names: tuple[str, ...]
    flags: tuple[str, ...]
    runs: tuple[tuple[int, int, int], ...]  # (first release index, last release index, line)


    def releases(self) -> list[int]:
        """The release indices this site raises its message in."""
        return [i for a, b, _ in self.runs for i in range(a, b + 1)]


@dataclass(frozen=True)
class Template:
    package: str
    exception: str
    text: str
    sites: tuple[Site, ...]


def repo_path(prefix: str, paths: tuple[tuple[str, str], ...], wheel_path: str) -> str:
    """Where a wheel's file sits in its repository: under the first of `paths`' wheel prefixes
    that matches, else under `prefix` (scripts/atlas_releases.py links with it too)."""
    for wheel_prefix, repo_prefix in paths:
        if wheel_path.startswith(wheel_prefix):
            return repo_prefix + wheel_path[len(wheel_prefix):]
    return prefix + wheel_path


@dataclass
class PackageInfo:
    name: str
    versions: list[str]
    repo: str
    repo_prefix: str
    tag: str
    engine: bool  # an engine (its messages are located only in its own logs) or a library
    # (wheel path prefix, repository path prefix) for files the build copies into the wheel from
    # elsewhere in the repository (Triton's third_party/nvidia/backend/ -> triton/backends/nvidia/)
    paths: tuple[tuple[str, str], ...] = ()

    def repo_path(self, file: str) -> str:
        return repo_path(self.repo_prefix, self.paths, file)

    def link(self, version: str, file: str, line: int) -> str:
        return f"https://github.com/{self.repo}/blob/{self.tag.format(version=version)}/{self.repo_path(file)}#L{line}"


@dataclass
class Atlas:
    path: Path
    header: dict
    packages: dict[str, PackageInfo]
    keys: frozenset[str]
    _shards: dict[int, dict[str, list]] = field(default_factory=dict)
    _made: dict[str, list[Template]] = field(default_factory=dict)
    _by_package: dict[str, list[tuple[list, str]]] | None = None
    # per package: its lower-cased texts joined by NULs, and where each starts (stored_holding)
    _joined: dict[str, tuple[str, list[int]]] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path = DATA) -> Atlas:
        with path.open("rb") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                raise ValueError(f"{path}: not a triage source atlas")
            (size,) = struct.unpack(">Q", fh.read(8))
            header = json.loads(zlib.decompress(fh.read(size)))
        if header.get("format") != FORMAT:
            raise ValueError(f"{path}: atlas format {header.get('format')}, this triage reads {FORMAT}")
        header["data_start"] = len(MAGIC) + 8 + size
        pkgs = {n: PackageInfo(name=n, versions=p["versions"], repo=p["repo"], repo_prefix=p["repo_prefix"],
                               tag=p["tag"], engine=p["engine"], paths=tuple(map(tuple, p.get("paths", ()))))
                for n, p in header["packages"].items()}
        return cls(path=path, header=header, packages=pkgs, keys=frozenset(header["keys"].split()))

    def shard(self, no: int) -> dict[str, list]:
        """One shard as stored: key word -> raw templates (made into Templates per word, on use)."""
        got = self._shards.get(no)
        if got is None:
            start, length = self.header["shards"][no]
            with self.path.open("rb") as fh:
                fh.seek(self.header["data_start"] + start)
                got = self._shards[no] = json.loads(zlib.decompress(fh.read(length)))
        return got

    def filed_under(self, word: str) -> list[Template]:
        made = self._made.get(word)
        if made is None:
            made = self._made[word] = [make_template(t) for t in self._stored(word)]
        return made

    def candidates(self, text: str, cut: bool = False) -> Iterator[Template]:
        """Templates filed under a word of `text`, each once; with `cut` (the text may stop
        short of its template's key word), also those whose first words `text` shows."""
        mine = words(text)
        todo = mine & self.keys
        if cut:
            for w in sorted(mine):
                todo.update(self._stored(HEAD_MARK + w))
        for w in sorted(todo):
            yield from self.filed_under(w)  # a template is filed under one word only

    def bare_asserts(self, code: str) -> Iterator[Template]:
        """Bare asserts filed under a word of `code` (an `assert ...` line)."""
        for w in sorted(words(code)):
            yield from self.filed_under(BARE_MARK + w)

    def _stored(self, entry: str) -> list:
        return self.shard(shard_of(entry.lstrip(HEAD_MARK + BARE_MARK), len(self.header["shards"]))).get(entry, [])

    def stored_by_package(self, package: str) -> list[tuple[list, str]]:
        """Every template of a package as stored, with its lower-cased text, for a scan of the
        whole atlas (`catalogue check`): read once, a Template made only for those picked."""
        if self._by_package is None:
            self._by_package = {}
            for no in range(len(self.header["shards"])):
                for key, raws in self.shard(no).items():
                    if key.startswith((HEAD_MARK, BARE_MARK)):
                        continue  # pointers, and code lines no pattern is written for
                    for raw in raws:
                        self._by_package.setdefault(raw[0], []).append((raw, raw[2].lower()))
        return self._by_package.get(package, [])

    def stored_holding(self, package: str, words: Iterable[str]) -> list[list]:
        """The package's stored templates whose lower-cased text holds one of `words` (lower
        case), in stored order: what `any(w in low for w in words)` over stored_by_package
        picks, found by one search of the joined texts per word instead of a test of every
        template per signature (`catalogue check` asks this for each of hundreds)."""
        from bisect import bisect_right

        rows = self.stored_by_package(package)
        words = list(words)
        if not words or any(not w or "\0" in w for w in words):  # "" is in every text; a NUL could span two
            return [raw for raw, low in rows if any(w in low for w in words)]
        joined = self._joined.get(package)
        if joined is None:
            starts, at = [], 0
            for _, low in rows:
                starts.append(at)
                at += len(low) + 1
            joined = self._joined[package] = ("\0".join(low for _, low in rows), starts)
        text, starts = joined
        hit: set[int] = set()
        for w in words:
            i = text.find(w)
            while i != -1:
                n = bisect_right(starts, i) - 1
                hit.add(n)
                i = text.find(w, starts[n + 1]) if n + 1 < len(starts) else -1
        return [rows[n][0] for n in sorted(hit)]

    def templates(self) -> Iterator[Template]:
        """Every template (for `catalogue check`; reads the whole file)."""
        for no in range(len(self.header["shards"])):
            for w in self.shard(no):
                if not w.startswith(HEAD_MARK):
                    yield from self.filed_under(w)  # messages, and (under BARE_MARK) bare asserts


def make_template(raw: list) -> Template:
    pkg, exc, text, sites = raw
    return Template(package=pkg, exception=exc, text=text, sites=tuple(
        Site(file=s[0], function=s[1], condition=s[2], names=tuple(s[3]), flags=tuple(s[4]),
             runs=tuple((s[5][i], s[5][i + 1], s[5][i + 2]) for i in range(0, len(s[5]), 3)))
        for s in sites))


@cache
def shipped() -> Atlas | None:
    """The atlas that ships with triage, or None when the file is absent (a trimmed install)."""
    try:
        return Atlas.open(DATA)
    except (OSError, ValueError):
        return None


def write(path: Path, packages: dict[str, dict], shards: list[dict[str, list]], keys: Iterable[str],
          extra: dict | None = None) -> int:
    """Write an atlas file (scripts/build_atlas.py); returns its size in bytes."""
    blobs: list[bytes] = []
    offsets: list[tuple[int, int]] = []
    pos = 0
    for shard in shards:
        blob = zlib.compress(json.dumps(shard, separators=(",", ":"), ensure_ascii=False).encode(), 9)
        offsets.append((pos, len(blob)))
        blobs.append(blob)
        pos += len(blob)
    header = {"format": FORMAT, "packages": packages, "shards": offsets, "keys": " ".join(sorted(keys)),
              **(extra or {})}
    head = zlib.compress(json.dumps(header, separators=(",", ":")).encode(), 9)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        fh.write(MAGIC)
        fh.write(struct.pack(">Q", len(head)))
        fh.write(head)
        for b in blobs:
            fh.write(b)
    tmp.replace(path)
    return path.stat().st_size
