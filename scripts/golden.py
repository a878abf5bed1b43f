"""The golden check: `triage analyze --format json` on every bundled log, kept in tests/golden.

    python scripts/golden.py            # list the logs whose JSON changed (exit 1 if any)
    python scripts/golden.py --update   # rewrite tests/golden from the current code

A change to a golden file is a change in what users see: review its diff like code, and
say in the commit message why the output moved."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


sys.path.insert(0, str(ROOT / "tests"))
from golden_logs import current_json, golden_path  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="rewrite the golden files")
    ap.add_argument("--diff", action="store_true", help="print a unified diff for each changed log")
    args = ap.parse_args()
    changed = 0
    seen = set()
    for log, text in current_json():
        gold = golden_path(log)
        seen.add(gold)
        old = gold.read_text(encoding="utf-8") if gold.exists() else None
        if old == text:
            continue
        changed += 1
        if args.update:
            gold.parent.mkdir(parents=True, exist_ok=True)
            gold.write_text(text, encoding="utf-8")
        print(f"{'updated' if args.update else 'changed'}: {log}")
        if args.diff and old is not None:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(gold), log, n=2))
    for stale in sorted(set((ROOT / "tests" / "golden").rglob("*.json")) - seen):
        changed += 1
        print(f"{'removed' if args.update else 'stale'}: {stale.relative_to(ROOT)}")
        if args.update:
            stale.unlink()
    print(f"{len(seen)} logs, {changed} {'updated' if args.update else 'changed'}")
    return 0 if args.update or not changed else 1


if __name__ == "__main__":
    sys.exit(main())
