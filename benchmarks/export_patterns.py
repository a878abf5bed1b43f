#!/usr/bin/env python3
"""Write benchmarks/patterns.txt: the catalogue's crash-signature regexes that ripgrep accepts.

This is the baseline a general-purpose tool would scan with: every `patterns:` entry of
signatures/*/*.yaml, one per line, in catalogue order, duplicates dropped. Each pattern is
tried with `rg -e PATTERN` on empty input; the ones ripgrep's regex syntax rejects
(look-around, backreferences, ...) are left out and listed on stderr.

Refresh after a catalogue change (needs ripgrep on PATH) and commit the result:

    python3 benchmarks/export_patterns.py            # writes benchmarks/patterns.txt
    python3 benchmarks/export_patterns.py --check    # exit 1 if the committed file is stale
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def catalogue_patterns(root: Path) -> list[tuple[str, str]]:
    """(signature file, pattern) for every pattern, in file order, first occurrence kept."""
    seen: set[str] = set()
    out: list[tuple[str, str]] = []
    for path in sorted((root / "signatures").glob("*/*.yaml")):
        # the C loader when PyYAML has it, as triage's own loader: the same data in a tenth of the time
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
        for p in data.get("patterns") or []:
            if not isinstance(p, str) or not p.strip() or p in seen:
                continue  # an empty line in an rg pattern file would match every line
            seen.add(p)
            out.append((str(path.relative_to(root)), p))
    return out


def rg_accepts(rg: str, pattern: str) -> tuple[bool, str]:
    """ripgrep exits 1 (no match) on empty input for a valid regex and 2 for a rejected one."""
    if "\n" in pattern or "\r" in pattern:
        return False, "contains a line break (one pattern per line in a pattern file)"
    p = subprocess.run([rg, "--no-config", "-e", pattern], input=b"", capture_output=True, timeout=30)
    if p.returncode in (0, 1):
        return True, ""
    err = p.stderr.decode("utf-8", "replace").splitlines()
    why = next((ln[len("error:"):].strip() for ln in err if ln.startswith("error:")), "")
    return False, why or (err[-1].strip() if err else f"exit {p.returncode}")


def render(rg: str, root: Path) -> tuple[str, int, list[tuple[str, str, str]]]:
    kept: list[str] = []
    dropped: list[tuple[str, str, str]] = []
    found = catalogue_patterns(root)
    for src, pat in found:
        ok, why = rg_accepts(rg, pat)
        if ok:
            kept.append(pat)
        else:
            dropped.append((src, pat, why))
    return "".join(p + "\n" for p in kept), len(found), dropped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=HERE / "patterns.txt")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository holding signatures/ (default: this one)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if --out differs")
    a = ap.parse_args()
    rg = shutil.which("rg")
    if rg is None:
        print("ripgrep (rg) is not on PATH; install it (apt-get install ripgrep)", file=sys.stderr)
        return 2
    text, total, dropped = render(rg, a.root)
    kept = text.count("\n")
    for src, pat, why in dropped:
        print(f"dropped {src}: {pat!r}: {why}", file=sys.stderr)
    if a.check:
        current = a.out.read_text(encoding="utf-8") if a.out.exists() else ""
        if current != text:
            print(f"{a.out} is stale: run python3 benchmarks/export_patterns.py", file=sys.stderr)
            return 1
        print(f"{a.out} is up to date ({kept} patterns)")
        return 0
    a.out.write_text(text, encoding="utf-8")
    print(f"kept {kept} of {total} catalogue patterns ({len(dropped)} rejected by rg) -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
