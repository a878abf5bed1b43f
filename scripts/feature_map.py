#!/usr/bin/env python3
"""Check the feature map (triage/catalogue/data/features/*.yaml) against the engines' released
source, as the atlas cache holds it (~/.cache/triage-atlas: releases/<package>/<version>.json maps
each wheel path to a SHA-256, blobs/<sha>.py is the file).

usage: python3 scripts/feature_map.py [--cache DIR] [--engine sglang] [-v]

For every feature of an engine whose package is in the cache:
- each frame's path fragment is a file (or a directory) of some release, and each function it
  names is defined in that file in some release; printed with the first and last release;
- each `state` setting is a field of the engine's config in some release (SGLang: ServerArgs in
  sglang/srt/server_args.py; vLLM: any vllm/config*.py or vllm/engine/arg_utils.py), or an
  environment variable;
- each switch's environment variable is read by the engine's source (environ.py / envs.py, or any
  file) in the first and the last release of the switch's range.

Flags are checked by `triage catalogue check` against the shipped flag histories; this script
checks what only the source can tell. Frames of other packages (torch/, flashinfer/, deep_gemm/)
are not in the cache and are listed as "not checked". Nothing in the cache is committed.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from packaging.specifiers import SpecifierSet  # noqa: E402
from packaging.version import InvalidVersion, Version  # noqa: E402

from triage.catalogue.features import feature_map  # noqa: E402

PACKAGE = {"sglang": "sglang", "vllm": "vllm", "lmdeploy": "lmdeploy"}
ENV_FILES = {"sglang": ("sglang/srt/environ.py", "sglang/srt/utils.py", "sglang/srt/server_args.py"),
             "vllm": ("vllm/envs.py",), "lmdeploy": ()}


class Cache:
    def __init__(self, root: Path, package: str) -> None:
        self.root, self.package = root, package
        vs = []
        for f in (root / "releases" / package).glob("*.json"):
            try:
                vs.append((Version(f.stem), f.stem))
            except InvalidVersion:
                continue
        self.versions = [v for _, v in sorted(vs)]

    @cache  # noqa: B019 - one Cache per package for the run
    def files(self, version: str) -> dict[str, str]:
        return json.loads((self.root / "releases" / self.package / f"{version}.json").read_text())["files"]

    def text(self, version: str, path: str) -> str | None:
        sha = self.files(version).get(path)
        if sha is None:
            return None
        p = self.root / "blobs" / f"{sha}.py"
        return p.read_text(encoding="utf-8", errors="replace") if p.exists() else None

    @cache  # noqa: B019
    def functions(self, version: str, path: str) -> frozenset[str]:
        src = self.text(version, path)
        if src is None:
            return frozenset()
        try:
            tree = ast.parse(src)
        except SyntaxError:
            return frozenset()
        return frozenset(n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))


def _span(vs: list[str]) -> str:
    return f"{vs[0]}-{vs[-1]} ({len(vs)} releases)" if vs else "in no release"


def check_frame(c: Cache, frame: str) -> tuple[bool, str]:
    path, _, funcs = frame.partition(":")
    names = [f for f in funcs.split("|") if f]
    if not path.startswith(c.package + "/"):
        return True, "not checked (another package)"
    seen: list[str] = []
    found: set[str] = set()
    for v in c.versions:
        paths = [p for p in c.files(v) if p == path or (path.endswith("/") and p.startswith(path))]
        if not paths:
            continue
        seen.append(v)
        for p in paths:
            found |= c.functions(v, p) & set(names)
    if not seen:
        return False, "no release has this path"
    missing = [n for n in names if n not in found]
    if missing:
        return False, f"{_span(seen)}; functions never defined there: {', '.join(missing)}"
    return True, _span(seen)


def _in_range(c: Cache, rng: str | None) -> list[str]:
    if not rng:
        return c.versions
    spec = SpecifierSet(rng)
    return [v for v in c.versions if spec.contains(Version(v), prereleases=True)]


def check_env(c: Cache, engine: str, name: str, rng: str | None) -> tuple[bool, str]:
    vs = _in_range(c, rng)
    if not vs:
        return True, f"no cached release in {rng}"
    bad = []
    for v in (vs[0], vs[-1]):
        # the engine's env module first; older releases read their variables where they use them
        files = [p for p in ENV_FILES.get(engine, ()) if p in c.files(v)]
        if not any(name in (c.text(v, p) or "") for p in files) and \
                not any(name in (c.text(v, p) or "") for p in c.files(v) if p.endswith(".py")):
            bad.append(v)
    return (not bad), (f"read in {vs[0]} and {vs[-1]}" if not bad else f"not read in {', '.join(bad)}")


def check_setting(c: Cache, engine: str, setting: str) -> tuple[bool, str]:
    if setting.isupper():  # an environment variable: read by some release
        seen = [v for v in c.versions[:: max(1, len(c.versions) // 25)] + c.versions[-1:]
                if any(setting in (c.text(v, p) or "") for p in ENV_FILES.get(engine, ()))]
        return bool(seen), (f"read in sampled releases {_span(seen)}" if seen else "read in no sampled release")
    seen = []
    for v in c.versions[:: max(1, len(c.versions) // 25)] + c.versions[-1:]:
        files = [p for p in c.files(v) if (engine == "sglang" and p == "sglang/srt/server_args.py")
                 or (engine == "vllm" and (p.startswith("vllm/config") or p == "vllm/engine/arg_utils.py"))
                 or (engine == "lmdeploy" and p.startswith("lmdeploy/messages.py"))]
        if any(f"{setting}:" in (c.text(v, p) or "") or f"{setting} =" in (c.text(v, p) or "") for p in files):
            seen.append(v)
    return bool(seen), (f"a config field in sampled releases {_span(seen)}" if seen else "no config field of that name")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/triage-atlas"))
    ap.add_argument("--engine")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    problems = 0
    for engine, feats in sorted(feature_map().items()):
        if a.engine and engine != a.engine:
            continue
        pkg = PACKAGE.get(engine)
        c = Cache(Path(a.cache), pkg) if pkg else None
        if c is None or not c.versions:
            print(f"{engine}: {len(feats)} features; no released source in the cache, not checked")
            continue
        print(f"{engine}: {len(feats)} features against {len(c.versions)} releases {c.versions[0]}-{c.versions[-1]}")
        for feat in feats:
            lines = []
            for fr in feat.spec.frames + feat.spec.loop_frames:
                ok, why = check_frame(c, fr)
                problems += not ok
                lines.append((ok, f"frame {fr}: {why}"))
            for s in feat.spec.state:
                ok, why = check_setting(c, engine, s.setting)
                problems += not ok
                lines.append((ok, f"setting {s.setting}: {why}"))
            for sw in feat.spec.switch:
                for k in sw.env:
                    ok, why = check_env(c, engine, k, sw.versions)
                    problems += not ok
                    lines.append((ok, f"env {k} ({sw.versions}): {why}"))
            bad = [t for ok, t in lines if not ok]
            if bad or a.verbose:
                print(f"  {feat.id}")
                for ok, t in lines:
                    if a.verbose or not ok:
                        print(f"    {'ok ' if ok else 'BAD'} {t}")
    print(f"{problems} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
