#!/usr/bin/env python3
"""Regenerate triage/catalogue/data/hints.yaml from the engines' hint-message dump.

usage: python3 scripts/import_hints.py ../shared/engines

Keeps the messages that suggest an action with a flag (`suggests: true`), split into the
items a log prints on separate lines ("1. set --mem-fraction-static ..."), each with the
engine source file and line that emits it, so a report can cite where a hint came from.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ITEM_SPLIT = re.compile(r"\s(?=\d\.\s)|(?<=[.!?])\s+(?=[A-Z(])")


def main() -> int:
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/engines") / "hint-messages.yaml"
    data = yaml.load(src.read_text(), Loader=yaml.CSafeLoader)
    out = []
    for engine in ("sglang", "vllm"):
        for m in data[engine]["messages"]:
            if not m.get("suggests") or not m.get("flags"):
                continue
            for item in ITEM_SPLIT.split(m["message"]):
                item = item.strip()
                if "--" not in item and "`" not in item:
                    continue
                out.append({"engine": engine, "text": item, "source": f"{m['file']}:{m['line']}",
                            "version": str(data[engine]["version"])})
    dest = Path(__file__).resolve().parents[1] / "triage" / "catalogue" / "data" / "hints.json"
    note = "Generated from hint-messages.yaml by scripts/import_hints.py; facts, do not edit by hand."
    dest.write_text(json.dumps({"_comment": note, "items": out}, indent=1) + "\n")
    print(f"{len(out)} hint items")
    return 0


if __name__ == "__main__":
    sys.exit(main())
