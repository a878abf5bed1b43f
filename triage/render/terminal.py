"""Markdown for a person at a terminal: rendered with rich when stdout is a terminal, the
Markdown text itself when piped or written to a file (where it is meant for GitHub or a wiki).

rich honours NO_COLOR (no colours, still bold and tables) and TERM=dumb; TRIAGE_PLAIN=1 keeps
the raw Markdown even on a terminal.

Fenced blocks (the patched launch command, log lines) are printed as written, not through
rich: rich wraps a code block at the terminal's width with padding, so a copied command came
out cut into lines (`--tp` on one, `2` on the next). Printed whole, the terminal folds a long
line only on screen and copying it gives one line.
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


def split_fences(text: str) -> list[tuple[str, str]]:
    """The document as ("markdown", text) and ("code", body) pieces, in order: each top-level
    fenced or indented code block is a piece of its own (as a CommonMark parser finds them)."""
    from markdown_it import MarkdownIt

    lines = text.splitlines(keepends=True)
    pieces: list[tuple[str, str]] = []
    at = 0
    for tok in MarkdownIt("commonmark").enable("table").parse(text):
        if tok.type not in ("fence", "code_block") or tok.level != 0 or tok.map is None:
            continue
        start, end = tok.map
        if start > at:
            pieces.append(("markdown", "".join(lines[at:start])))
        pieces.append(("code", tok.content))
        at = end
    if at < len(lines):
        pieces.append(("markdown", "".join(lines[at:])))
    return pieces


def write_markdown(text: str, stream: IO[str] | None = None) -> None:
    out = stream or sys.stdout
    if not wants_rendering(out):
        out.write(text)
        return
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.text import Text

    # markup and emoji off: log text such as "[rank0]" or ":warning:" is shown as written
    console = Console(file=out, markup=False, emoji=False, highlight=False, soft_wrap=False)
    for kind, piece in split_fences(text):
        if kind == "code":
            # soft_wrap: neither wrapped nor cropped by rich; the terminal folds it on screen only
            console.print(Text(piece.rstrip("\n"), style="markdown.code_block"), soft_wrap=True)
            console.print()
        elif piece.strip():
            console.print(Markdown(piece, code_theme="ansi_dark", hyperlinks=True))
