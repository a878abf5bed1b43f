"""Real points in time from the timestamps logs print, and the `--since` bound.

Dialects print different amounts of a date: SGLang and Python logging the full date, vLLM
`MM-DD` without a year, glog (Triton, c10d) the time of day only. The missing part is taken
from the file's modification time, which is when the log was last written: the year (or the
day) of the mtime, one earlier when that would put the line after the file was last written.
Times are compared as printed: no time-zone conversion (a trailing `Z` is dropped, the mtime
is taken in UTC).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from triage.core.errors import TriageError

_TS = re.compile(
    r"^(?:(?:(?P<y>\d{4})-)?(?P<mo>\d\d)-(?P<d>\d\d)[ T])?"
    r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?Z?$"
)
# a line may be stamped a little after the file's mtime as the file system reports it
_SLACK = timedelta(days=1)


def from_mtime(mtime: float | None) -> datetime | None:
    if mtime is None:
        return None
    return datetime.fromtimestamp(mtime, tz=timezone.utc).replace(tzinfo=None)  # noqa: UP017 - py3.10


def real_time(ts: str | None, mtime: float | None) -> datetime | None:
    """The datetime a printed timestamp means, the year or day inferred from `mtime` when the
    dialect prints none; None when it cannot be placed."""
    if not ts:
        return None
    m = _TS.match(ts.strip())
    if m is None:
        return None
    written = from_mtime(mtime)
    micro = int((m["f"] or "0")[:6].ljust(6, "0"))
    clock = (int(m["h"]), int(m["mi"]), int(m["s"]), micro)
    try:
        if m["y"]:
            return datetime(int(m["y"]), int(m["mo"]), int(m["d"]), *clock)
        if written is None:
            return None
        if m["mo"]:
            return _with_year(int(m["mo"]), int(m["d"]), clock, written)
        at = datetime(written.year, written.month, written.day, *clock)
        return at - timedelta(days=1) if at > written + timedelta(minutes=5) else at
    except ValueError:  # 25:00:00, 02-30
        return None


def _with_year(month: int, day: int, clock: tuple[int, int, int, int], written: datetime) -> datetime | None:
    for year in (written.year, written.year - 1, written.year - 2, written.year - 3, written.year - 4):
        try:
            at = datetime(year, month, day, *clock)
        except ValueError:  # 02-29 outside a leap year: the log is from an earlier one
            continue
        if at <= written + _SLACK:
            return at
    return None


_RELATIVE = re.compile(r"^(\d+)([dhm])$")


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """`--since`: an ISO date or date-time (`2026-11-24`, `2026-11-24T08:00`), or an age
    relative to now (`7d`, `12h`, `30m`, in UTC)."""
    raw = text.strip()
    rel = _RELATIVE.match(raw)
    if rel:
        unit = {"d": "days", "h": "hours", "m": "minutes"}[rel.group(2)]
        base = now or datetime.now(timezone.utc).replace(tzinfo=None)  # noqa: UP017
        return base - timedelta(**{unit: int(rel.group(1))})
    try:
        at = datetime.fromisoformat(raw.rstrip("Z"))
    except ValueError:
        raise TriageError(f"--since {text}: expected a date (2026-11-24), a date and time "
                          "(2026-11-24T08:00) or an age (7d, 12h, 30m)") from None
    return at.replace(tzinfo=None) if at.tzinfo is None else at.astimezone(timezone.utc).replace(tzinfo=None)  # noqa: UP017
