"""Write the generated reference pages: docs/cli.md (from the commands themselves) and
docs/schemas/*.json (from the pydantic models). Tests fail when either is stale.

    python scripts/gen_docs.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = """# Command-line reference

Generated from the commands by `python scripts/gen_docs.py`; do not edit by hand (a test
checks that this page is current). Conventions (exit codes, configuration, formats) are in
the README.

## Exit codes

| code | meaning |
|---|---|
| `0` | no process-level failure in the log(s) (`--exit-zero`: also when there is one) |
| `1` | a process-level failure was found |
| `2` | usage or input error, one `triage: error:` line: a missing or unreadable file, and `analyze DIR` or `fleet DIR` where no file looks like a server log (binaries, text with no log line; the line says how many files were skipped and why). `--exit-zero` does not change it |
| `3` | `watch`/`run` timed out (a hang) |

`run` exits with the server's own status (128+N when it died of signal N).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _command_markdown(cmd, ctx, path: list[str]) -> list[str]:  # noqa: ANN001 - click objects
    name = " ".join(["triage", *path])
    out = [f"## `{name}`" if path else f"## `{name}` (global options)", ""]
    if cmd.help:
        out += [" ".join(cmd.help.split()), ""]
    pieces = " ".join(cmd.collect_usage_pieces(ctx))
    out += ["```text", f"{name} {pieces}".rstrip(), "```", ""]
    rows = []
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "argument":
            names = f"`{p.metavar or p.name.upper()}`"
        else:
            # short spellings first, whatever order click kept them in
            names = ", ".join(f"`{o}`" for o in sorted(p.opts, key=lambda o: (o.startswith("--"), o)))
            names += "".join(f", `{o}`" for o in p.secondary_opts)
            metavar = p.metavar if p.metavar and not p.is_flag else ""
            names += f" `{metavar}`" if metavar else ""
        default = ""
        if p.param_type_name == "option" and not p.is_flag and p.default not in (None, (), [], False) and p.show_default is not False:
            default = str(getattr(p.default, "value", p.default))
        rows.append(f"| {_cell(names)} | {_cell(getattr(p, 'help', None) or '')} | {_cell(default)} |")
    if rows:
        out += ["| option | meaning | default |", "|---|---|---|", *rows, ""]
    return out


def cli_markdown() -> str:
    from typer.main import get_command

    try:  # newer typer vendors click
        from typer import _click as click
    except ImportError:  # pragma: no cover
        import click

    from triage.cli import app

    root = get_command(app)
    lines = [HEADER]

    def walk(cmd, parent, path: list[str]) -> None:  # noqa: ANN001
        ctx = click.Context(cmd, info_name=path[-1] if path else "triage", parent=parent, **cmd.context_settings)
        subs = getattr(cmd, "commands", None)
        if subs:
            if not path:
                lines.extend(_command_markdown(cmd, ctx, path))
            for name in cmd.list_commands(ctx):
                walk(subs[name], ctx, [*path, name])
        else:
            lines.extend(_command_markdown(cmd, ctx, path))

    walk(root, None, [])
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from triage.commands.schema import NAMES, schema_text

    (ROOT / "docs" / "cli.md").write_text(cli_markdown(), encoding="utf-8")
    schemas = ROOT / "docs" / "schemas"
    schemas.mkdir(exist_ok=True)
    for name in NAMES:
        (schemas / f"{name}.json").write_text(schema_text(name), encoding="utf-8")
    print(f"wrote docs/cli.md and docs/schemas/{{{','.join(NAMES)}}}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
