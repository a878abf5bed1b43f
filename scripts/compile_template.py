#!/usr/bin/env python3
"""Precompile the Markdown report template into triage/render/report_template.py.

usage: python scripts/compile_template.py [--check]

Compiling the Jinja template is about 35 ms of every Markdown run; the compiled module is
imported instead (Python caches its bytecode), and is used only while it was made from the
template as it is now and by the jinja2 version installed (otherwise the template is compiled
as before). Run this after editing templates/report.md.j2; --check exits 1 when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from triage.render.markdown import TEMPLATE, _env, precompiled_source  # noqa: E402

OUT = ROOT / "triage" / "render" / "report_template.py"


def main(argv: list[str]) -> int:
    text = precompiled_source(_env(), TEMPLATE.read_text(encoding="utf-8"))
    if "--check" in argv:
        fresh = OUT.exists() and OUT.read_text(encoding="utf-8") == text
        print(f"{OUT.relative_to(ROOT)}: {'up to date' if fresh else 'STALE: run scripts/compile_template.py'}")
        return 0 if fresh else 1
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
