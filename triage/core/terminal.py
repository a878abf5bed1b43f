"""The one control-character filter for every string that reaches a terminal.

A log line, a file name or a catalogue's text must not move the cursor, retitle the window
(OSC 0), write the clipboard (OSC 52), send device control strings (DCS), use 8-bit C1
controls (CSI as one byte, 0x9b), reorder what the reader sees (bidi overrides and isolates)
or start a line where there was none (line and paragraph separators). Each becomes U+FFFD,
so that the reader sees that something was there. Tab and newline stay.
"""

from __future__ import annotations

from triage.core.recache import re_compile

# zero-width and invisible format characters too (U+200B, U+2060-2064, the BOM U+FEFF): they
# hide text inside what the reader sees (`rm\u200b -rf` looks like `rm -rf`)
CONTROL = re_compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e"
                     "\u2060-\u2064\u2066-\u2069\ufeff]")
REPLACEMENT = "\ufffd"


def printable(text: object) -> str:
    """`text` with every control character (tab and newline aside) replaced by U+FFFD."""
    return CONTROL.sub(REPLACEMENT, str(text))


def one_line(text: object) -> str:
    """`text` as a single printable line (a newline inside would forge the next status line)."""
    return printable(str(text).replace("\r\n", "\n").replace("\n", " \u21b5 "))
