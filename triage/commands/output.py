"""Where a command's text goes: stdout (rendered for a terminal when it is Markdown) or the
`-o/--output` file, written whole or not at all."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from triage.core.errors import TriageError

FORMATS = ("markdown", "json")


def normalise_format(fmt: str) -> str:
    """`md` is accepted for `markdown`, as most tools do."""
    f = fmt.lower()
    f = "markdown" if f == "md" else f
    if f not in FORMATS:
        raise TriageError(f"--format {fmt}: expected markdown (or md) or json")
    return f


def write_output(text: str, output: Path | None, inputs: list[str] | None = None, markdown: bool = False) -> None:
    if output is None:
        if markdown:
            from triage.render.terminal import write_markdown

            write_markdown(text)
        else:
            sys.stdout.write(text)
        return
    out = output.resolve()
    for i in inputs or []:
        if i != "-" and Path(i).exists() and Path(i).resolve() == out:
            raise TriageError(f"--output {output} is one of the inputs; refusing to overwrite it")
    if out.is_dir():
        raise TriageError(f"--output {output}: is a directory")
    tmp = out.with_name(f".{out.name}.triage-tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise TriageError(f"{output}: cannot write ({e.strerror or e})") from None
