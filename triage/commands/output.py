"""The one door every output of triage goes through.

Reports (Markdown and JSON), `triage new` skeletons, watch/run events, the "failure at ..."
status line, stderr notes and error lines: each is made from data that passed `Output` (the
report with `report`, an event with `data`, last lines with `lines`) and is written with
`write` (stdout or the -o file) or `note`/`error` (stderr). Redaction happens here and only
here (unless --no-redact), and so does the terminal's control-character filter: a command
cannot forget one of them for one of its outputs.

The command line sets the current Output once per command (`use`); library callers get the
default (redacting) one.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from triage.core.errors import TriageError
from triage.core.terminal import one_line, printable

if TYPE_CHECKING:
    from triage.core.models import Report


@dataclass
class Output:
    """The one door everything triage writes goes through: whether secrets (and IP addresses) are masked."""

    redact: bool = True
    ips: bool = False

    # -- what goes out: data first -------------------------------------------------------------

    def report(self, report: Report) -> Report:
        """The report every renderer sees (Markdown, JSON, the `new` skeleton, events)."""
        if not self.redact:
            return report
        from triage.pipeline.redact import redact_report

        return redact_report(report, ips=self.ips)

    def data(self, value: Any, keep: frozenset[str] = frozenset()) -> Any:
        """Plain data written as JSON (events, summaries, plans); `keep`: names of triage's own
        values (catalogue ids, fingerprints) that are never log text, left unmasked."""
        if not self.redact:
            return value
        from triage.pipeline.redact import redact_data

        return redact_data(value, ips=self.ips, keep=keep)

    def text(self, value: str) -> str:
        if not self.redact:
            return value
        from triage.pipeline.redact import redact_text

        return redact_text(value, ips=self.ips)

    def lines(self, lines: list[str]) -> list[str]:
        """Consecutive log lines (a token wrapped onto the next line is found too)."""
        if not self.redact:
            return list(lines)
        from triage.pipeline.redact import redact_lines

        return redact_lines(list(lines), ips=self.ips)

    def argv(self, argv: list[str]) -> list[str]:
        if not self.redact:
            return list(argv)
        from triage.pipeline.redact import redact_argv

        return redact_argv(argv, ips=self.ips)

    def command(self, command: str) -> str:
        """A shell command line (masked word by word, quotes and all)."""
        if not self.redact:
            return command
        from triage.pipeline.redact import redact_command

        return redact_command(command, ips=self.ips)

    def env(self, env: dict[str, str]) -> dict[str, str]:
        if not self.redact:
            return dict(env)
        from triage.pipeline.redact import redact_env

        return redact_env(env, ips=self.ips)

    # -- and where it goes -----------------------------------------------------------------

    def write(self, document: str, stream: IO[str] | None = None, markdown: bool = False) -> None:
        """A document (report, skeleton, event line) for stdout: built from data that passed
        here, so only the control filter is left (Markdown and JSON have none; a last guard).
        Markdown is rendered when the stream is a terminal (render/terminal.py)."""
        out = stream or sys.stdout
        if markdown:
            from triage.render.terminal import write_markdown

            write_markdown(printable(document), out)
        else:
            out.write(printable(document))
        out.flush()

    def note(self, text: str) -> None:
        """One human status line on stderr (stdout is for the report and the JSON events); none with -q."""
        from triage.core.verbosity import quiet

        if quiet():
            return
        with STDERR.lock:
            sys.stderr.write(f"{STDERR.line_break()}triage: {one_line(self.text(text))}\n")
            sys.stderr.flush()

    def error(self, text: str, prefix: str = "triage: error: ") -> None:
        """The one-line error (file names typed or found are log-controlled text too)."""
        with STDERR.lock:
            sys.stderr.write(f"{STDERR.line_break()}{prefix}{one_line(self.text(text))}\n")
            sys.stderr.flush()


class _Stderr:
    """Where the terminal's line stands while `run` copies a server's output there (a thread):
    a status line written after a chunk that ended mid-line starts on a line of its own,
    instead of landing in the middle of the server's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.mid_line = False

    def copied(self, chunk: bytes) -> None:
        """Called (under the lock) after a chunk of server output went to stderr."""
        if chunk:
            self.mid_line = not chunk.endswith(b"\n")

    def line_break(self) -> str:
        brk, self.mid_line = ("\n" if self.mid_line else ""), False
        return brk


STDERR = _Stderr()


_current = Output()


def use(redact: bool = True, ips: bool = False) -> Output:
    """Set the Output for this command (its --no-redact and --redact-ips) and return it."""
    global _current
    _current = Output(redact=redact, ips=ips)
    return _current


def current() -> Output:
    return _current


def note(text: str) -> None:
    _current.note(text)


FORMATS = ("markdown", "json")


def normalise_format(fmt: str, allowed: tuple[str, ...] = FORMATS) -> str:
    """`md` is accepted for `markdown`, as most tools do; `issue` only where a command offers it."""
    f = fmt.lower()
    f = "markdown" if f == "md" else f
    if f not in allowed:
        names = ", ".join(a if a != "markdown" else "markdown (or md)" for a in allowed)
        raise TriageError(f"--format {fmt}: expected {names}")
    return f


def write_output(text: str, output: Path | None, inputs: list[str] | None = None, markdown: bool = False) -> None:
    """A document to stdout (rendered for a terminal when it is Markdown) or to the -o file,
    written whole or not at all; the control filter applies to both."""
    if output is None:
        _current.write(text, markdown=markdown)
        return
    # never onto an input, never through a planted symlink, /dev/null kept a device (core/output.py)
    from triage.core.output import write_output as write_file

    write_file(printable(text), output, list(inputs or []))
