"""Timestamps of the host records, put on the server log's clock.

Every record keeps time its own way: dmesg counts seconds since boot (`[ 1234.567]`), `dmesg
-T` and the journal print the host's local time without a zone, `kubectl` prints UTC with its
zone, Slurm the controller's local time. triage compares them with the server log's own times,
which carry no zone either. The rules, said in each source's `clock` field:

- a time without a zone is on the same clock as the server log, unless `--host-offset` says by
  how much the host's clock is ahead of the log's (`+02:00`: host in UTC+2, log in UTC);
- a time with a zone is converted to UTC, and the server log is taken to be UTC (containers
  usually run in UTC);
- seconds since boot need the boot time: a journal or syslog line that prints both a wall
  time and the `[uptime]` stamp gives it; without one the events are listed, not placed.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct",
                                       "Nov", "Dec"), 1)}

UPTIME = re.compile(r"\[\s*(\d+\.\d+)\]")  # `[ +0.000316]` (dmesg --reltime) is relative: not matched
_DMESG_T = re.compile(r"^\[(?:\w{3}) (\w{3}) +(\d+) (\d\d):(\d\d):(\d\d) (\d{4})\]")
_SYSLOG = re.compile(r"^(\w{3}) +(\d+) (\d\d):(\d\d):(\d\d) ")
_ISO = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?(Z|[+-]\d\d:?\d\d)?")
_RFC = re.compile(r"\w{3}, (\d\d) (\w{3}) (\d{4}) (\d\d):(\d\d):(\d\d) ([+-]\d{4})")
_CTIME = re.compile(r"\w{3} (\w{3}) +(\d+) (\d\d):(\d\d):(\d\d) (\d{4})")


def parse_offset(text: str) -> timedelta:
    """`+02:00`, `-0530`, `2`, `-1.5` (hours) as a timedelta; ValueError when it is none."""
    m = re.fullmatch(r"([+-])?(\d{1,2}):?(\d\d)", text.strip())
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
    hours = float(text)
    if not -24 < hours < 24:
        raise ValueError(text)
    return timedelta(hours=hours)


def _zone(text: str | None) -> timezone | None:
    if not text:
        return None
    if text == "Z":
        return timezone.utc
    t = text.replace(":", "")
    sign = -1 if t[0] == "-" else 1
    return timezone(sign * timedelta(hours=int(t[1:3]), minutes=int(t[3:5])))


def wall_time(line: str, year: int | None = None) -> datetime | None:
    """The wall-clock time a host record's line starts with (or, for kubectl's fields, holds),
    aware when the line says its zone. `year` fills the journal's and syslog's yearless dates."""
    m = _DMESG_T.match(line)
    if m and m.group(1) in _MONTHS:
        return datetime(int(m.group(6)), _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
                        int(m.group(5)))
    m = _ISO.match(line.strip())
    if m:
        frac = (m.group(7) or "0")[:6].ljust(6, "0")
        return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5)),
                        int(m.group(6)), int(frac), tzinfo=_zone(m.group(8)))
    m = _SYSLOG.match(line)
    if m and m.group(1) in _MONTHS:
        return datetime(year or datetime.now().year, _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)),
                        int(m.group(4)), int(m.group(5)))
    m = _RFC.search(line)
    if m and m.group(2) in _MONTHS:
        return datetime(int(m.group(3)), _MONTHS[m.group(2)], int(m.group(1)), int(m.group(4)), int(m.group(5)),
                        int(m.group(6)), tzinfo=_zone(m.group(7)))
    m = _CTIME.search(line)
    if m and m.group(1) in _MONTHS:
        return datetime(int(m.group(6)), _MONTHS[m.group(1)], int(m.group(2)), int(m.group(3)), int(m.group(4)),
                        int(m.group(5)))
    return None


def uptime(line: str) -> float | None:
    """The seconds-since-boot stamp of a kernel line (`[ 1234.567890]`), where it has one."""
    m = UPTIME.search(line[:80])
    return float(m.group(1)) if m else None


def to_server(t: datetime, offset: timedelta) -> datetime:
    """A host record's time on the server log's clock (naive, as the log prints it)."""
    if t.tzinfo is not None:
        return t.astimezone(timezone.utc).replace(tzinfo=None)
    return t - offset


def server_time(text: str | None, year: int | None = None) -> datetime | None:
    """A server log's timestamp (`2025-09-14 06:13:49`, vLLM's `05-12 10:11:12`) as a datetime;
    a yearless one takes `year` (the host records', which print it)."""
    if not text:
        return None
    m = _ISO.match(text)
    if m:
        t = wall_time(text)
        return t.astimezone(timezone.utc).replace(tzinfo=None) if t and t.tzinfo else t
    m = re.match(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)", text)
    if m:
        return datetime(year or datetime.now().year, int(m.group(1)), int(m.group(2)), int(m.group(3)),
                        int(m.group(4)), int(m.group(5)))
    return None
