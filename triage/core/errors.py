"""Errors that end a run with exit code 2 and one clear line on stderr."""

from __future__ import annotations

EXIT_OK = 0  # the log shows no failure
EXIT_FAILURE = 1  # a failure was found
EXIT_USAGE = 2  # usage or input error
EXIT_TIMEOUT = 3  # `watch`: the server neither became ready nor failed in time


class TriageError(Exception):
    """A user-facing error: the message is printed as is, the exit code is 2."""

    exit_code = EXIT_USAGE


class CatalogueError(TriageError):
    """A catalogue entry is malformed; the message names file, line and field."""
