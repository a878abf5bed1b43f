"""Which released versions of a package hold a text, and where: grep over the release cache that
scripts/atlas_fetch.py keeps (~/.cache/triage-atlas, or $TRIAGE_ATLAS_CACHE).

The atlas holds only what is raised, asserted or logged at error level; a warning, a print or a
message built across helper functions is missing from it. This reads every Python file of every
cached release instead, each distinct file once, so a signature's wording can be checked in each
release its `affects` names, and the release where a fix first appears can be found:

    python scripts/release_grep.py sglang 'pool memory leak detected'
    python scripts/release_grep.py vllm 'No available (shared memory broadcast )?block found' --files
    python scripts/release_grep.py sglang 'trust_env=False' --path multimodal_gen/

Prints the releases (as ranges of consecutive cached releases) that hold a match, then with
--files the file and first matching line per distinct version of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from packaging.version import Version

CACHE = Path(os.environ.get("TRIAGE_ATLAS_CACHE", Path.home() / ".cache" / "triage-atlas"))


def releases(package: str) -> list[tuple[str, dict[str, str]]]:
    d = CACHE / "releases" / package
    if not d.is_dir():
        raise SystemExit(f"error: no cached releases of {package} in {d} (run scripts/atlas_fetch.py)")
    out = []
    for f in d.glob("*.json"):
        data = json.loads(f.read_text())
        out.append((data["version"], data["files"]))
    return sorted(out, key=lambda r: Version(r[0]))


def spans(versions: list[str], hit: list[bool]) -> str:
    parts, start = [], None
    for i, h in enumerate([*hit, False]):
        if h and start is None:
            start = i
        elif not h and start is not None:
            a, b = versions[start], versions[i - 1]
            parts.append(a if a == b else f"{a}-{b}")
            start = None
    return ", ".join(parts) or "none"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("package", help="sglang, vllm, lmdeploy, flashinfer, xgrammar, transformers, huggingface_hub")
    ap.add_argument("regex", help="Python regular expression, searched in each line")
    ap.add_argument("--path", default="", help="only files whose path holds this text")
    ap.add_argument("--files", action="store_true", help="show where it matched")
    ap.add_argument("-i", action="store_true", help="ignore case")
    a = ap.parse_args(argv)
    rx = re.compile(a.regex, re.I if a.i else 0)
    rels = releases(a.package)
    seen: dict[str, tuple[int, str] | None] = {}
    hit: list[bool] = []
    where: dict[tuple[str, str], list[str]] = {}
    for version, files in rels:
        found = False
        for path, blob in files.items():
            if a.path not in path or not path.endswith(".py"):
                continue
            if blob not in seen:
                try:
                    text = (CACHE / "blobs" / f"{blob}.py").read_text(errors="replace")
                except OSError:
                    seen[blob] = None
                    continue
                m = rx.search(text)
                seen[blob] = (text.count("\n", 0, m.start()) + 1, text[m.start():].split("\n", 1)[0]) if m else None
            if seen[blob] is not None:
                found = True
                no, line = seen[blob]  # type: ignore[misc]
                # one row per file and wording, however the line number moved between releases
                where.setdefault((path, line.strip()[:160]), []).append(f"{version}:{no}")
        hit.append(found)
    versions = [v for v, _ in rels]
    print(f"{a.package}: {sum(hit)} of {len(rels)} cached releases ({versions[0]}-{versions[-1]}) match: "
          f"{spans(versions, hit)}")
    if a.files:
        for (path, line), vs in where.items():
            at = dict(v.rsplit(":", 1) for v in vs)
            last = list(at)[-1]
            print(f"  {path}:{at[last]} (in {last}): {line}\n      in {spans(versions, [v in at for v in versions])}")
    return 0 if any(hit) else 1


if __name__ == "__main__":
    sys.exit(main())
