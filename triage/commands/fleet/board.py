"""Per-group aggregates: what a worker hands back for its batch and the driver merges.

Every field merges without regard to order (counts add, sets unite, first/last seen take the
min/max, the example is the latest log with a stable tie-break), so the leaderboard is the
same whichever worker analysed which file, on a process pool or on Ray. Nothing here grows
with the number of logs: only with the number of distinct failures, servers, versions and
GPU models.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# errors listed by name (the rest only counted), so that an archive of unreadable files
# cannot grow the driver either; the ones kept are the first by path, whatever the order
MAX_ERRORS = 100
# names of files that do not look like logs kept per kind (the rest counted), for the error line
MAX_NAMES = 5


@dataclass
class Group:
    key: str  # the signature id, or "fingerprint:<hash>" for a failure the catalogue does not know
    signature: str | None
    fingerprint: str | None
    severity: str | None
    logs: int = 0
    failures: int = 0  # occurrences, a request error printed 40 times counting 40
    fatal_logs: int = 0  # logs in which it ended the process
    servers: set[str] = field(default_factory=set)
    first_seen: datetime | None = None
    last_seen: datetime | None = None
    engines: Counter[str] = field(default_factory=Counter)  # "vllm 0.10.1": logs
    gpus: Counter[str] = field(default_factory=Counter)
    workarounds: Counter[str] = field(default_factory=Counter)  # the first workaround offered: logs
    workaround_info: dict[str, dict[str, Any]] = field(default_factory=dict)
    fix: dict[str, Any] | None = None
    example: tuple[datetime, str] | None = None  # the log it was last seen in
    title: str = ""  # as the example log words it

    def merge(self, other: Group) -> None:
        self.logs += other.logs
        self.failures += other.failures
        self.fatal_logs += other.fatal_logs
        self.servers |= other.servers
        self.first_seen = _min(self.first_seen, other.first_seen)
        self.last_seen = _max(self.last_seen, other.last_seen)
        self.engines.update(other.engines)
        self.gpus.update(other.gpus)
        self.workarounds.update(other.workarounds)
        for info in other.workaround_info.values():
            self.offer_workaround(info, 0)
        if other.fix is not None:
            self.offer_fix(other.fix)
        if other.example is not None and (self.example is None or _later(other.example, self.example)):
            self.example, self.title = other.example, other.title
        self.severity = self.severity or other.severity  # the signature's: the same in every log

    def offer_workaround(self, info: dict[str, Any], logs: int = 1) -> None:
        """A workaround offered in `logs` more logs; its wording the same whichever log came first."""
        wid = info["id"]
        self.workarounds[wid] += logs
        known = self.workaround_info.get(wid)
        if known is None or _stable(info) < _stable(known):
            self.workaround_info[wid] = info

    def offer_fix(self, fix: dict[str, Any]) -> None:
        if self.fix is None or _stable(fix) < _stable(self.fix):
            self.fix = fix

    def offer_example(self, when: datetime | None, path: str, title: str) -> None:
        candidate = (when or datetime.min, path)
        if self.example is None or _later(candidate, self.example):
            self.example, self.title = candidate, title


def _later(a: tuple[datetime, str], b: tuple[datetime, str]) -> bool:
    """The later example; between two seen at the same time, the first path."""
    return a[0] > b[0] or (a[0] == b[0] and a[1] < b[1])


def _stable(d: dict[str, Any]) -> str:
    import json

    return json.dumps(d, sort_keys=True, default=str)


def _min(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: datetime | None, b: datetime | None) -> datetime | None:
    return b if a is None else a if b is None else max(a, b)


@dataclass
class Tally:
    """A batch's result, and the driver's running total."""

    read: int = 0
    failed: int = 0
    skipped: int = 0
    skipped_old: int = 0  # of `skipped`: last written before --since
    with_failure: int = 0  # logs with at least one failure counted (after --since)
    # read, but nothing in them looks like a server log (a README, a binary): how many of each
    # kind ("binary", "no log lines"), and the first few names of each (by path)
    not_logs: Counter[str] = field(default_factory=Counter)
    not_log_names: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # path -> why, at most MAX_ERRORS

    def fail(self, path: str, why: str) -> None:
        self.failed += 1
        self.errors[path] = why
        self._cap_errors()

    def not_a_log(self, path: str, kind: str) -> None:
        self.not_logs[kind] += 1
        self.not_log_names[kind] = sorted({*self.not_log_names.get(kind, ()), path})[:MAX_NAMES]

    def merge(self, other: Tally) -> None:
        self.read += other.read
        self.failed += other.failed
        self.skipped += other.skipped
        self.skipped_old += other.skipped_old
        self.with_failure += other.with_failure
        self.not_logs.update(other.not_logs)
        for kind, names in other.not_log_names.items():
            self.not_log_names[kind] = sorted({*self.not_log_names.get(kind, ()), *names})[:MAX_NAMES]
        for key, g in other.groups.items():
            mine = self.groups.get(key)
            if mine is None:
                self.groups[key] = g
            else:
                mine.merge(g)
        self.errors.update(other.errors)
        self._cap_errors()

    def _cap_errors(self) -> None:
        if len(self.errors) > MAX_ERRORS:
            keep = sorted(self.errors)[:MAX_ERRORS]
            self.errors = {k: self.errors[k] for k in keep}

    def ranked(self) -> list[Group]:
        """Most servers first (what hits the fleet widest is fixed first), then most logs."""
        return sorted(self.groups.values(), key=lambda g: (-len(g.servers), -g.logs, -g.failures, g.key))
