"""Timestamps parsed by the fast path (datetime.fromisoformat) read exactly as strptime reads
them with the formats the timeline knows, and the ones strptime refuses stay refused."""

from __future__ import annotations

from datetime import datetime

import pytest

from triage.pipeline.parse.timeline import _parse_time

FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


def _strptime(ts: str) -> datetime | None:
    for fmt in FORMATS:
        try:
            return datetime.strptime(ts, fmt)
        except ValueError:
            continue
    return None


@pytest.mark.parametrize("ts", [
    "2025-09-14 06:13:49", "2025-09-14 06:13:49.1", "2025-09-14 06:13:49.123", "2025-09-14 06:13:49.123456",
    "2025-09-14 06:13:49.1234567", "2025-09-14 06:13:49,123", "2025-09-14 06:13:49+00:00", "2025-09-14 06:13:49Z",
    "2025-09-14T06:13:49", "2025-02-30 06:13:49", "2025-09-14 24:13:49", "2025-09-14 06:13:49.", "2025-9-14 06:13:49",
    "2025-09-14 06:13:4x", "2024-02-29 23:59:59.999999",
])
def test_full_timestamps_read_as_strptime_reads_them(ts):
    assert _parse_time(ts) == _strptime(ts)


def test_vllm_timestamps_without_a_year_still_parse():
    assert _parse_time("09-14 06:13:49") == datetime(2000, 9, 14, 6, 13, 49)
    assert _parse_time("06:13:49.5") == datetime(1900, 1, 1, 6, 13, 49, 500000)
