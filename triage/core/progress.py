"""A progress line on stderr for big logs, only when a person is watching a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

MIN_BYTES = 100 * 1024 * 1024


class Progress:
    def __init__(self, total: int | None, label: str) -> None:
        self.total = total
        self.label = label
        self.enabled = bool(total and total >= MIN_BYTES and sys.stderr.isatty())
        self._last = 0.0
        self.done = 0

    def update(self, done: int) -> None:
        self.done = done
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.2:
            return
        self._last = now
        assert self.total
        pct = min(100.0, 100.0 * done / self.total)
        sys.stderr.write(f"\rtriage: {self.label} {pct:5.1f}% ({done / 2**20:,.0f} of {self.total / 2**20:,.0f} MiB)")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def wrap(self, spans: Iterator[tuple[bytearray, int]]) -> Iterator[tuple[bytearray, int]]:
        done = 0
        try:
            for span in spans:
                done += span[1]
                self.update(done)
                yield span
        finally:
            self.close()
