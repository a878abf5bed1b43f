"""Events of a kernel log (dmesg, dmesg -T, journalctl -k, syslog): NVIDIA's Xid reports, a GPU
lost from the bus, PCIe AER errors, and the OOM killer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from triage.pipeline.host.clock import uptime, wall_time

BUS = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?"
XID = re.compile(rf"NVRM: Xid \((?:PCI:)?(?P<bus>{BUS})\): (?P<xid>\d+)\b")
LOST = re.compile(rf"NVRM: GPU (?:at )?(?:PCI:)?(?P<bus>{BUS}):? .{{0,40}}?GPU has fallen off the bus")
AER = re.compile(rf"(?P<dev>{BUS})[^:]{{0,40}}: AER: (?P<what>(?:Multiple )?(?:Uncorrected|Corrected)[^\n]{{0,80}}?)"
                 rf"(?:received: (?P<src>{BUS}))?\s*$")
OOM_KILL = re.compile(r"(?P<cgroup>Memory cgroup )?[Oo]ut of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]{1,64})\)")


def norm_bus(bus: str) -> str:
    """`00000000:3B:00.0`, `0000:3b:00`, `3b:00.0` as one spelling: `0000:3b:00.0`."""
    b = bus.lower()
    if b.count(":") == 1:
        b = "0000:" + b
    dom, rest = b.split(":", 1)
    dom = dom[-4:].rjust(4, "0")
    if "." not in rest:
        rest += ".0"
    return f"{dom}:{rest}"


def nccl_bus(busid: str) -> str:
    """NCCL's `busId 3b000` (bus, device, function packed in hex) as `0000:3b:00.0`."""
    v = int(busid, 16)
    dom, bus, dev, fn = v >> 20 & 0xFFFF, v >> 12 & 0xFF, v >> 4 & 0xFF, v & 0xF
    return f"{dom:04x}:{bus:02x}:{dev:02x}.{fn:x}"


@dataclass
class KernelEvent:
    line: int
    text: str
    kind: str  # xid | gpu-lost | pcie-aer | oom-kill
    wall: datetime | None
    uptime: float | None
    xid: int | None = None
    bus_id: str | None = None
    pid: int | None = None
    process: str | None = None
    fatal: bool = True  # a corrected AER error is logged but harmless


def read_kernel(lines: list[str], year: int | None = None) -> list[KernelEvent]:
    out: list[KernelEvent] = []
    seen_oom: set[int] = set()
    for no, text in enumerate(lines, 1):
        if "NVRM" not in text and "AER" not in text and "ut of memory" not in text:
            continue
        ev: KernelEvent | None = None
        m = XID.search(text)
        if m:
            ev = KernelEvent(no, text, "xid", None, None, xid=int(m.group("xid")), bus_id=norm_bus(m.group("bus")))
        elif (m := LOST.search(text)) is not None:
            ev = KernelEvent(no, text, "gpu-lost", None, None, bus_id=norm_bus(m.group("bus")))
        elif (m := AER.search(text)) is not None:
            dev = m.group("src") or m.group("dev")
            ev = KernelEvent(no, text, "pcie-aer", None, None, bus_id=norm_bus(dev),
                             fatal=not m.group("what").lstrip().startswith("Corrected"))
        elif (m := OOM_KILL.search(text)) is not None:
            pid = int(m.group("pid"))
            if pid in seen_oom:
                continue
            seen_oom.add(pid)
            ev = KernelEvent(no, text, "oom-kill", None, None, pid=pid, process=m.group("comm"))
        if ev is None:
            continue
        ev.wall = wall_time(text, year)
        ev.uptime = uptime(text)
        out.append(ev)
    return out


def boot_time(lines: list[str], year: int | None = None) -> datetime | None:
    """When the host booted, from a line that prints a wall time and the uptime stamp both
    (syslog's `Dec  3 14:02:11 node kernel: [ 1234.56] ...`)."""
    from datetime import timedelta

    for text in lines[:20000]:
        up = uptime(text)
        if up is None or text.lstrip().startswith("["):
            continue
        wall = wall_time(text, year)
        if wall is not None:
            return wall - timedelta(seconds=up)
    return None
