"""Splitting a launch command as a shell would, for commands copied out of logs.

A log line is often cut mid-command (`--model-path "deepseek --tp 8` with its closing quote
lost), so an unbalanced quote is normal input here, not an error.
"""

from __future__ import annotations

import shlex


def split_command(text: str) -> list[str]:
    """shlex.split, tolerant of a quote the log cut off: the quote is closed at the end."""
    try:
        return shlex.split(text)
    except ValueError:
        pass
    for closing in ('"', "'", "\"'", "'\""):
        try:
            return shlex.split(text + closing)
        except ValueError:
            continue
    return text.split()
