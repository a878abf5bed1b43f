#!/usr/bin/env python3
"""Fetch the engines' released packages and keep their Python source, deduplicated, in a cache.

usage: python3 scripts/atlas_fetch.py [--cache DIR] [--jobs N] [PACKAGE ...]

Stage one of the source atlas (scripts/build_atlas.py is stage two). For every release the
atlas covers (scripts/atlas_releases.py), `pip download NAME==VERSION --no-deps` brings the
wheel into a temporary folder; its .py files under the package's own prefix are stored once
per content (CACHE/blobs/SHA256.py) and the release is recorded as path -> digest
(CACHE/releases/PACKAGE/VERSION.json). The wheel is deleted at once: a vLLM wheel is 300 MB
and only ~15 MB of it is Python. A release already recorded is not fetched again, so a
refresh for a new release downloads that release only.

A release published as a source archive only (FlashInfer 0.2.0-0.4.1 on PyPI) is read from that
archive: its link is taken from PyPI's simple index and the archive opened as it is, never built
(building it needs CUDA); its files sit one folder down (`NAME-VERSION/flashinfer/...`).

The cache lives outside the repository (default ~/.cache/triage-atlas); nothing of it is
committed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import urllib.request
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from atlas_releases import PACKAGES, Package, releases  # noqa: E402

DEFAULT_CACHE = Path(os.environ.get("TRIAGE_ATLAS_CACHE", Path.home() / ".cache" / "triage-atlas"))


def _store(pkg: Package, cache: Path, members: Iterator[tuple[str, bytes]]) -> dict[str, str]:
    """Keep a release's .py files under the package's prefix, once per content."""
    files: dict[str, str] = {}
    for name, data in members:
        if not name.endswith(".py") or not pkg.keeps(name):
            continue
        digest = hashlib.sha256(data).hexdigest()
        blob = cache / "blobs" / f"{digest}.py"
        if not blob.exists():
            tmp_blob = blob.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp_blob.write_bytes(data)
            tmp_blob.replace(blob)
        files[name] = digest
    return files


def _wheel_members(path: Path) -> Iterator[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.endswith(".py"):
                yield name, zf.read(name)


def _sdist_members(path: Path) -> Iterator[tuple[str, bytes]]:
    with tarfile.open(path) as tf:
        for m in tf:
            if m.isfile() and m.name.endswith(".py") and "/" in m.name:
                fh = tf.extractfile(m)
                if fh is not None:
                    yield m.name.split("/", 1)[1], fh.read()  # NAME-VERSION/flashinfer/x.py -> flashinfer/x.py


@cache
def _sdists(norm: str) -> dict[str, str]:
    """Version -> source archive URL of a project on PyPI's simple index (read once per run:
    a package's archive-only releases are fetched one after another)."""
    with urllib.request.urlopen(f"https://pypi.org/simple/{norm}/", timeout=60) as resp:
        page = resp.read().decode("utf-8", "replace")
    out: dict[str, str] = {}
    for m in re.finditer(r'href="([^"#]+\.tar\.gz)(?:#[^"]*)?"', page):
        proj, _, ver = m.group(1).rsplit("/", 1)[-1][: -len(".tar.gz")].rpartition("-")
        if re.sub(r"[-_.]+", "-", proj).lower() == norm:
            out.setdefault(ver, m.group(1))
    return out


def _sdist_url(dist: str, version: str) -> str | None:
    """The source archive of `dist==version` on PyPI's simple index, if it has one."""
    return _sdists(re.sub(r"[-_.]+", "-", dist).lower()).get(version)


def fetch_release(pkg: Package, version: str, cache: Path) -> str:
    dest = cache / "releases" / pkg.name / f"{version}.json"
    if dest.exists():
        return f"{pkg.name} {version}: cached"
    with tempfile.TemporaryDirectory(prefix="atlas-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", f"{pkg.dist}=={version}", "--no-deps",
               "--only-binary", ":all:", "--no-cache-dir", "-d", tmp, "-q", "--disable-pip-version-check"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if wheels:
            source, files = wheels[0].name, _store(pkg, cache, _wheel_members(wheels[0]))
        else:
            try:
                url = _sdist_url(pkg.dist, version)
            except OSError as e:
                url, proc.stderr = None, f"{proc.stderr}\nsimple index: {e}"
            if url is None:
                err = (proc.stderr.strip().splitlines() or ["no wheel"])[-1]
                return f"{pkg.name} {version}: FAILED {err[:200]}"
            archive = Path(tmp) / url.rsplit("/", 1)[-1]
            urllib.request.urlretrieve(url, archive)
            source, files = archive.name, _store(pkg, cache, _sdist_members(archive))
    if not files:
        return f"{pkg.name} {version}: FAILED no source of {pkg.name} in {source}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps({"package": pkg.name, "version": version, "wheel": source,
                                "files": files}, sort_keys=True))
    return f"{pkg.name} {version}: {len(files)} files" + (" (source archive)" if source.endswith(".tar.gz") else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("packages", nargs="*", help="package names (default: all)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--jobs", type=int, default=3, help="downloads at once")
    args = ap.parse_args(argv)
    names = args.packages or list(PACKAGES)
    unknown = [n for n in names if n not in PACKAGES]
    if unknown:
        print(f"unknown package(s): {', '.join(unknown)}; known: {', '.join(PACKAGES)}", file=sys.stderr)
        return 2
    (args.cache / "blobs").mkdir(parents=True, exist_ok=True)
    work = [(PACKAGES[n], v) for n in names for v in releases(PACKAGES[n])]
    failed = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for line in pool.map(lambda pv: fetch_release(pv[0], pv[1], args.cache), work):
            failed += "FAILED" in line
            print(line, flush=True)
    print(f"{len(work)} releases, {failed} failed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
