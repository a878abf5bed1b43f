"""How much triage says on stderr besides its errors: `-q` (nothing but errors), default
(status and progress lines), `-v` (also what was loaded and how long it took).

All of it goes through the `triage` logger. Library users who configure nothing see none of
the status lines' debug detail; the CLI sets the level from -q/-v."""

from __future__ import annotations

import logging
import sys

from triage.core.terminal import one_line

LOG = logging.getLogger("triage")


class _Stderr(logging.Handler):
    """Writes to whatever sys.stderr is at the time (tests and wrappers replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            # triage's own words (what was loaded, timings), through the same control filter
            sys.stderr.write(f"triage: {one_line(record.getMessage())}\n")
            sys.stderr.flush()
        except (BrokenPipeError, ValueError):
            pass


def configure(quiet: bool = False, verbose: bool = False) -> None:
    LOG.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    if not any(isinstance(h, _Stderr) for h in LOG.handlers):
        LOG.addHandler(_Stderr())
    LOG.propagate = False


def quiet() -> bool:
    """True once -q was asked for: status notes and progress lines are left out."""
    return LOG.level > logging.INFO
