"""nvidia-smi's three outputs: `-q`, `--query-gpu=... --format=csv` and the default table. Each
gives the GPUs (index, PCI bus id, name), which is how an Xid's bus id becomes a GPU index; `-q`
and the table also show states worth listing (rows pending remap, uncorrectable ECC counts)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from datetime import datetime

from triage.core.models import GpuInfo
from triage.pipeline.host.clock import wall_time
from triage.pipeline.host.kernel import BUS, norm_bus


@dataclass
class SmiState:
    """A state nvidia-smi shows at the time it ran (not an event with its own time)."""

    line: int
    text: str
    kind: str  # row-remap | ecc | gpu-lost
    bus_id: str | None
    gpu: int | None


@dataclass
class Smi:
    gpus: list[GpuInfo] = field(default_factory=list)
    states: list[SmiState] = field(default_factory=list)
    taken: datetime | None = None  # `Timestamp :` of -q


_GPU_HEAD = re.compile(rf"^GPU ({BUS})\s*$")
_FIELD = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*)$")


def read_q(lines: list[str]) -> Smi:
    out = Smi()
    section: list[tuple[int, str]] = []  # (indent, name) of the enclosing headings
    gpu: GpuInfo | None = None
    for no, text in enumerate(lines, 1):
        m = _GPU_HEAD.match(text)
        if m:
            gpu = GpuInfo(index=len(out.gpus), bus_id=norm_bus(m.group(1)))
            out.gpus.append(gpu)
            section = []
            continue
        if text.startswith("Timestamp") and out.taken is None:
            out.taken = wall_time(text.split(":", 1)[1].strip())
            continue
        if gpu is None or not text.strip():
            continue
        indent = len(text) - len(text.lstrip())
        section = [(i, n) for i, n in section if i < indent]
        fm = _FIELD.match(text)
        if not fm:
            section.append((indent, text.strip()))
            continue
        name, value = fm.group(2).strip(), fm.group(3).strip()
        if not value:
            section.append((indent, name))
            continue
        where = " / ".join(n for _, n in section)
        if name == "Product Name":
            gpu.name = value
        elif name == "GPU UUID":
            gpu.uuid = value
        elif ("Remapped Rows" in where and value.lower() == "yes"
              and (name == "Pending" or name.startswith("Remapping Failure"))):
            out.states.append(SmiState(no, f"{where}: {text.strip()}", "row-remap", gpu.bus_id, gpu.index))
        elif "Volatile" in where and "Uncorr" in name + where and value.isdigit() and int(value) > 0:
            out.states.append(SmiState(no, f"{where} {name}: {value}", "ecc", gpu.bus_id, gpu.index))
    return out


def read_csv(lines: list[str]) -> Smi:
    out = Smi()
    rows = list(csv.reader([ln for ln in lines if ln.strip()], skipinitialspace=True))
    if not rows:
        return out
    head = [h.strip().lower().split(" [")[0] for h in rows[0]]
    col = {h: i for i, h in enumerate(head)}
    for r in rows[1:]:
        def get(name: str, row: list[str] = r) -> str | None:
            i = col.get(name)
            return row[i].strip() if i is not None and i < len(row) else None
        idx = get("index")
        bus = get("pci.bus_id")
        out.gpus.append(GpuInfo(index=int(idx) if idx and idx.isdigit() else len(out.gpus),
                                bus_id=norm_bus(bus) if bus and re.fullmatch(BUS, bus) else None,
                                name=get("name"), uuid=get("uuid")))
    return out


_ROW = re.compile(rf"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+({BUS})\s+(?:On|Off)\s+\|\s+(\S+)\s+\|")
_LOST = re.compile(rf"Unable to determine the device handle for GPU ?({BUS}): (.*)")


def read_table(lines: list[str]) -> Smi:
    out = Smi()
    for no, text in enumerate(lines, 1):
        m = _ROW.match(text)
        if m:
            g = GpuInfo(index=int(m.group(1)), bus_id=norm_bus(m.group(3)), name=m.group(2).strip())
            out.gpus.append(g)
            ecc = m.group(4)
            if ecc.isdigit() and int(ecc) > 0:
                out.states.append(SmiState(no, f"GPU {g.index}: {ecc} volatile uncorrectable ECC errors", "ecc",
                                           g.bus_id, g.index))
            continue
        m = _LOST.search(text)
        if m:
            out.states.append(SmiState(no, text.strip(), "gpu-lost", norm_bus(m.group(1)), None))
    return out
