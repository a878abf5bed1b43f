#!/usr/bin/env python3
"""Build triage's source atlas (triage/catalogue/data/atlas.bin) from the released packages.

usage: python3 scripts/atlas_fetch.py            # stage one: download, keep the .py files
       python3 scripts/build_atlas.py [--cache DIR] [--jobs N] [--out FILE]

Stage two reads every release that stage one recorded, extracts each module's messages once
per distinct file content (scripts/atlas_extract.py; the result is kept in CACHE/extract so a
refresh parses only new files), and files every message template with the sites that raise
it and the releases each site exists in. Config fields a guard or a message reads are mapped
to the engine's flags through triage's flag histories (triage/catalogue/data/flags).

To refresh for a new release: run both commands again, then the suite (tests/test_atlas.py
checks the shipped file's format and a few known sites), and commit the new atlas.bin.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from packaging.version import Version

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from atlas_bare import bare_asserts  # noqa: E402
from atlas_extract import _CONFIG_CLASS, _names, bind, extract, says_enough  # noqa: E402
from atlas_releases import PACKAGES  # noqa: E402

from triage.catalogue import atlas  # noqa: E402
from triage.catalogue.flags import flag_index  # noqa: E402

EXTRACT_VERSION = 6  # bump when atlas_extract's output changes: the per-file cache is redone
DEFAULT_CACHE = Path(os.environ.get("TRIAGE_ATLAS_CACHE", Path.home() / ".cache" / "triage-atlas"))
ENGINES = {"sglang", "vllm", "lmdeploy"}
_FLAG_IN_TEXT = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*")
_ENV_NAME = re.compile(r"^(VLLM|SGLANG|SGL|NCCL|CUDA|TORCH|PYTORCH|HF|LMDEPLOY|FLASHINFER)_[A-Z0-9_]+$")


def _extract_blob(args: tuple[Path, Path]) -> None:
    blob, dest = args
    msgs = extract(blob.read_bytes(), deferred=True)
    rows = [[m.kind, m.exception, m.template, m.function, m.line, m.condition, m.names] + ([m.extra] if m.extra else [])
            for m in msgs]
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(rows, ensure_ascii=False))
    tmp.replace(dest)


def _flags_for(engine: str, names: list[str], text: str) -> tuple[list[str], list[str]]:
    """Flags and environment variables a site names, spelled as the engine spells them."""
    idx = flag_index(engine) if engine in ("sglang", "vllm") else None
    flags: list[str] = []
    env: list[str] = []
    for n in names:
        if _ENV_NAME.match(n):
            env.append(n)
        elif idx is not None and (info := idx.by_dest.get(n)) is not None and info.flag not in flags:
            flags.append(info.flag)
    if idx is not None:
        for m in _FLAG_IN_TEXT.findall(atlas.literal(text)):
            info = idx.get(m)
            if (info is not None and info.flag not in flags
                    and (info.flag == m or m in info.aliases or m.replace("_", "-") == info.flag)):
                flags.append(info.flag)
    return flags, env


def _add_site(sites: dict, site_info: dict, name: str, exc: str, text: str, path: str, func: str, vi: int,
              line: int, cond: str, nm: list[str]) -> None:
    sites[(name, exc, text)][(path, func)].setdefault(vi, line)
    # a name called in the guard is a method (quant_config.get_min_capability()), not a setting
    site_info[(name, exc, text, path, func)] = (cond, [n for n in nm if not n.startswith("__") and f"{n}(" not in cond])


def _joined_raises(files: list[tuple[str, list]]) -> list[tuple[str, str, str, int, str, list[str], str]]:
    """(exception, file, function, line, guard, names, message) of each `call` row of a release
    whose class one `class` definition of the release builds the message of (a class name
    defined differently in two files is left alone: which one the call means is not known)."""
    defs: dict[str, dict[str, list]] = defaultdict(dict)  # class -> its definitions, by content
    per_file: dict[tuple[str, str], list] = defaultdict(list)
    for path, rows in files:
        for row in rows:
            if row[0] == "class":
                per_file[(path, row[1])].append([row[2], row[7]])
    for (_, cls), templates in per_file.items():
        defs[cls][json.dumps(templates, sort_keys=True)] = templates
    out = []
    for path, rows in files:
        for row in rows:
            if row[0] != "call" or len(defs.get(row[1], {})) != 1:
                continue
            _, exc, _, func, line, cond, nm, call = row
            for template, info in next(iter(defs[exc].values())):
                text = bind(template, info["params"], info["positional"], info["defaults"], call["args"], call["kw"])
                if says_enough(text):
                    out.append((exc, path, func, line, cond, nm, text))
    return out


BARE_VERSION = 1  # bump when atlas_bare's output changes


def _bare_blob(args: tuple[Path, Path]) -> None:
    src, dst = args
    rows = [[b.function, b.line, b.code, b.condition] for b in
            bare_asserts(src.read_text(encoding="utf-8", errors="replace"))]
    tmp = dst.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows))
    tmp.replace(dst)


def _condition_names(cond: str, config_class: bool) -> list[str]:
    import ast

    try:
        return _names([ast.parse(cond, mode="eval").body], config_class)
    except (SyntaxError, ValueError, RecursionError):
        return []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--out", type=Path, default=atlas.DATA)
    ap.add_argument("packages", nargs="*", help="only these packages (default: every one fetched)")
    args = ap.parse_args(argv)
    t0 = time.time()
    rel_dir = args.cache / "releases"
    names = args.packages or [p for p in PACKAGES if (rel_dir / p).is_dir()]
    releases: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for name in names:
        recs = [json.loads(f.read_text()) for f in (rel_dir / name).glob("*.json")]
        recs.sort(key=lambda r: Version(r["version"]))
        releases[name] = [(r["version"], r["files"]) for r in recs]
    ext_dir = args.cache / f"extract-v{EXTRACT_VERSION}"
    ext_dir.mkdir(parents=True, exist_ok=True)
    todo = sorted({sha for rs in releases.values() for _, files in rs for sha in files.values()
                   if not (ext_dir / f"{sha}.json").exists()})
    print(f"{sum(len(r) for r in releases.values())} releases; {len(todo)} files to parse", flush=True)
    with ProcessPoolExecutor(args.jobs) as pool:
        list(pool.map(_extract_blob, [(args.cache / "blobs" / f"{s}.py", ext_dir / f"{s}.json") for s in todo],
                      chunksize=16))
    bare_dir = args.cache / f"bare-v{BARE_VERSION}"
    bare_dir.mkdir(parents=True, exist_ok=True)
    bare_todo = sorted({sha for rs in releases.values() for _, files in rs for sha in files.values()
                        if not (bare_dir / f"{sha}.json").exists()})
    with ProcessPoolExecutor(args.jobs) as pool:
        list(pool.map(_bare_blob, [(args.cache / "blobs" / f"{s}.py", bare_dir / f"{s}.json") for s in bare_todo],
                      chunksize=64))
    print(f"parsed in {time.time() - t0:.0f} s ({len(bare_todo)} files scanned for bare asserts)", flush=True)

    # template key -> site key -> {release index: line}; the newest release's guard and names win
    sites: dict[tuple[str, str, str], dict[tuple[str, str], dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    site_info: dict[tuple[str, str, str, str, str], tuple[str, list[str]]] = {}
    pkg_meta: dict[str, dict] = {}
    parsed: dict[str, list] = {}
    bare_rows: dict[str, list] = {}
    for name, rs in releases.items():
        pkg = PACKAGES[name]
        pkg_meta[name] = {"versions": [v for v, _ in rs], "repo": pkg.repo, "repo_prefix": pkg.repo_prefix,
                          "tag": pkg.tag, "engine": name in ENGINES}
        if pkg.paths:  # only where a package has them: the other packages' entries are unchanged
            pkg_meta[name]["paths"] = [list(x) for x in pkg.paths]
        for vi, (_, files) in enumerate(rs):
            for path, sha in files.items():
                if not pkg.keeps(path):
                    continue
                rows = parsed.get(sha)
                if rows is None:
                    rows = parsed[sha] = json.loads((ext_dir / f"{sha}.json").read_text())
                for kind, exc, text, func, line, cond, nm, *_ in rows:
                    if kind in ("class", "call"):
                        continue  # joined across the release's files below
                    _add_site(sites, site_info, name, exc, text, path, func, vi, line, cond, nm)
                bare = bare_rows.get(sha)
                if bare is None:
                    bare = bare_rows[sha] = json.loads((bare_dir / f"{sha}.json").read_text())
                for func, line, code, cond in bare:
                    text = atlas.BARE + code
                    sites[(name, "AssertionError", text)][(path, func)].setdefault(vi, line)
                    key = (name, "AssertionError", text, path, func)
                    if key not in site_info:
                        nm = _condition_names(cond, _CONFIG_CLASS.search(func.split(".")[0]) is not None)
                        site_info[key] = (cond, [n for n in nm if f"{n}(" not in cond])
            # `raise Cls(...)` of an exception class another file of the release defines, with
            # the call's arguments filled into the class's message (Triton's compiler.py raises
            # OutOfResources(n, limit, "shared memory") of runtime/errors.py)
            for exc, path, func, line, cond, nm, text in _joined_raises(
                    [(path, parsed[sha]) for path, sha in files.items() if pkg.keeps(path)]):
                _add_site(sites, site_info, name, exc, text, path, func, vi, line, cond, nm)
    print(f"{len(sites)} templates, {sum(len(s) for s in sites.values())} sites", flush=True)

    # each template is filed under its rarest key word across the whole atlas
    df: dict[str, int] = defaultdict(int)
    tkeys: dict[tuple[str, str, str], list[str]] = {}
    for tkey in sites:
        kw = atlas.key_words(tkey[2])
        lit = atlas.literal(atlas.first_line(tkey[2]))
        if not kw or len(lit.strip()) < atlas.MIN_LITERAL:
            continue
        tkeys[tkey] = kw
        for w in kw:
            df[w] += 1
    shards: list[dict[str, list]] = [defaultdict(list) for _ in range(atlas.SHARDS)]
    used: set[str] = set()
    pointers: dict[str, set[str]] = defaultdict(set)
    for tkey, kw in tkeys.items():
        key = min(kw, key=lambda w: (df[w], -len(w), w))
        name, exc, text = tkey
        bare = text.startswith(atlas.BARE)
        if not bare:
            used.add(key)
        out_sites = []
        for (path, func), lines in sorted(sites[tkey].items()):
            cond, nm = site_info[(name, exc, text, path, func)]
            flags, env = _flags_for(name, nm, text)
            runs: list[int] = []
            for vi in sorted(lines):
                if runs and runs[-2] == vi - 1 and runs[-1] == lines[vi]:
                    runs[-2] = vi
                else:
                    runs.extend((vi, vi, lines[vi]))
            out_sites.append([path, func, cond, [n for n in nm if n not in env][:8], flags + env, runs])
        # a bare assert is found by its code line only, never by a message: filed apart
        shards[atlas.shard_of(key)][(atlas.BARE_MARK + key) if bare else key].append([name, exc, text, out_sites])
        # a message cut off before its key word is still found through the words it starts with
        head = [w for w in atlas.key_words(text, limit=atlas.HEAD) if w in df]
        if not bare and head and key not in head:
            hw = min(head, key=lambda w: (df[w], -len(w), w))
            pointers[hw].add(key)
    for hw, keys in pointers.items():
        shards[atlas.shard_of(hw)][atlas.HEAD_MARK + hw] = sorted(keys)
    size = atlas.write(args.out, pkg_meta, [dict(s) for s in shards], used,
                       extra={"built_from": {n: [m["versions"][0], m["versions"][-1]] for n, m in pkg_meta.items()}})
    print(f"{len(tkeys)} templates filed under {len(used)} key words ({len(pointers)} head words point to "
          f"{sum(map(len, pointers.values()))}); {args.out}: {size / 1e6:.2f} MB; "
          f"{time.time() - t0:.0f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
