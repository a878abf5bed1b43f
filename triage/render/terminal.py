"""Markdown for a person at a terminal: rendered with rich when stdout is a terminal, the
Markdown text itself when piped or written to a file (where it is meant for GitHub or a wiki).

rich honours NO_COLOR (no colours, still bold and tables) and TERM=dumb; TRIAGE_PLAIN=1 keeps
the raw Markdown even on a terminal.
"""

from __future__ import annotations

import os
import sys
from typing import IO


def wants_rendering(stream: IO[str]) -> bool:
    if os.environ.get("TRIAGE_PLAIN") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def write_markdown(text: str, stream: IO[str] | None = None) -> None:
    out = stream or sys.stdout
    if not wants_rendering(out):
        out.write(text)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    # markup and emoji off: log text such as "[rank0]" or ":warning:" is shown as written
    console = Console(file=out, markup=False, emoji=False, highlight=False, soft_wrap=False)
    console.print(Markdown(text, code_theme="ansi_dark", hyperlinks=True))
