"""Which rank ran on which GPU, and whether a host event caused the failure.

Ranks to GPUs, best evidence first: NCCL's init lines (`rank 3 nranks 8 cudaDev 3 busId 3b000`,
printed with NCCL_DEBUG=INFO) give the bus id itself; SGLang's `[gpu_id=N]` and the log's
CUDA_VISIBLE_DEVICES give the device; otherwise rank N (TP3, rank3, rank=3) is taken to be the
N-th visible device, which is right for one server per node and said as an assumption.

A host event is to blame when it is a fault of the hardware or the host (not the application's
own error seen from the driver), on a GPU the failure involves (the failing rank's; for a
collective timeout or hang, any GPU of the job, since the ranks that report the timeout are the
ones left waiting), and shortly before the failure: within the window before it, or at most two
minutes after (a kernel log and a Python traceback of the same fault can be ordered either way).
An event on another GPU, or hours earlier, is listed and said not to be the cause.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from triage.core.models import Attribution, GpuInfo, HostEvent, Report
from triage.pipeline.host.kernel import nccl_bus

AFTER = 120.0  # seconds a host event may trail the failure and still be its cause
_NCCL_INIT = re.compile(r"\brank (\d+) nranks \d+ cudaDev (\d+)(?: nvmlDev (\d+))? busId ([0-9a-fA-F]+)")
_CVD = re.compile(r"CUDA_VISIBLE_DEVICES['\"]?\s*[=:]\s*['\"]?(\d+(?:\s*,\s*\d+)*)")
_SGL_GPU = re.compile(r"\[gpu_id=(\d+)\]")
_RANK_NO = re.compile(r"(?:TP|rank|rank=|Worker_TP|RANK)\s*(\d+)\b")
HEAD_BYTES = 16 * 1024 * 1024

_COLLECTIVE = re.compile(r"(?i)timeout|timed out|watchdog|hang|nccl|collective|heartbeat")


def rank_number(rank: str) -> int | None:
    found = _RANK_NO.findall(rank)
    return int(found[-1]) if found else None


def _head(path: str) -> list[str]:
    """The log's first HEAD_BYTES, decoded as the scan decodes it (gzip, UTF-16 undone)."""
    from triage.core.errors import TriageError
    from triage.pipeline.read import open_source

    try:
        with open_source(path) as fh:
            data = fh.read(HEAD_BYTES)
    except (OSError, EOFError, TriageError):
        return []
    return data.decode("utf-8", errors="replace").splitlines()


def map_ranks(log_path: str | None, report: Report, gpus: list[GpuInfo]) -> tuple[dict[str, int], dict[str, str], list[str]]:
    """rank -> GPU index, rank -> bus id, and how each was read."""
    lines = _head(log_path) if log_path and log_path != "-" and Path(log_path).is_file() else []
    lines += [e.text for f in report.failures for e in f.raw[:200]]
    by_bus = {g.bus_id: g.index for g in gpus if g.bus_id}
    to_index: dict[str, int] = {}
    to_bus: dict[str, str] = {}
    how: list[str] = []
    visible: list[int] | None = None
    for text in lines:
        m = _NCCL_INIT.search(text)
        if m:
            rank, bus = f"rank{m.group(1)}", nccl_bus(m.group(4))
            if rank not in to_bus:
                to_bus[rank] = bus
                if bus in by_bus:
                    to_index[rank] = by_bus[bus]
        if visible is None and (m := _CVD.search(text)) is not None:
            visible = [int(x) for x in m.group(1).split(",")]
        if (m := _SGL_GPU.search(text)) is not None:
            tp = _RANK_NO.search(text[: m.start()] + text[m.end():m.end() + 40])
            if tp:
                to_index.setdefault(f"rank{tp.group(1)}", int(m.group(1)))
    if to_bus:
        how.append(f"NCCL's init lines name the bus id of {len(to_bus)} rank(s)")
    ranks = {r for f in report.failures for r in f.ranks}
    numbers = {n for r in ranks if (n := rank_number(r)) is not None}
    numbers |= {n for r in to_bus if (n := rank_number(r)) is not None}
    if not numbers and report.environment.gpu_count:
        numbers = set(range(report.environment.gpu_count))
    for n in sorted(numbers):
        key = f"rank{n}"
        if key in to_index:
            continue
        if key in to_bus:
            continue  # known by bus id; nvidia-smi was not given to name its index
        if visible is not None:
            if n < len(visible):
                to_index[key] = visible[n]
        else:
            to_index[key] = n
    if visible is not None:
        how.append(f"CUDA_VISIBLE_DEVICES={','.join(map(str, visible))} in the log: rank N on the N-th listed GPU")
    elif any(k not in to_bus for k in to_index):
        how.append("no CUDA_VISIBLE_DEVICES in the log: rank N taken to run on GPU N (one server per node)")
    for rank, idx in to_index.items():
        found = next((g.bus_id for g in gpus if g.index == idx and g.bus_id), None)
        if found and rank not in to_bus:
            to_bus[rank] = found
    return to_index, to_bus, how


def _involved(report: Report, to_index: dict[str, int], to_bus: dict[str, str]) -> tuple[list[str], set[str], set[int], bool]:
    """The failing ranks, and the bus ids and indices of the GPUs the failure involves; True
    when those are the whole job's (a collective timeout or hang)."""
    fatal = report.fatal_failures
    failing = [f"rank{n}" for f in fatal[:1] for r in f.ranks if (n := rank_number(r)) is not None]
    head = fatal[0] if fatal else None
    collective = head is None or head.kind in ("nccl", "watchdog") or bool(
        _COLLECTIVE.search(f"{head.exception} {head.message[:300]}"))
    keys = list(to_index) + [k for k in to_bus if k not in to_index] if collective or not failing else failing
    return failing, {to_bus[k] for k in keys if k in to_bus}, {to_index[k] for k in keys if k in to_index}, collective


def attribute(report: Report, events: list[HostEvent], gpus: list[GpuInfo], failure_time: datetime | None,
              window: float, log_path: str | None, has_failure: bool = True) -> Attribution:
    to_index, to_bus, how = map_ranks(log_path, report, gpus)
    failing, buses, indices, whole_job = _involved(report, to_index, to_bus)
    att = Attribution(ranks=dict(sorted(to_index.items(), key=lambda kv: rank_number(kv[0]) or 0)), how=how,
                      failing_ranks=failing, involved_gpus=sorted(indices))
    by_bus = {g.bus_id: g.index for g in gpus if g.bus_id}
    for ev in events:
        if ev.bus_id and ev.gpu is None:
            ev.gpu = by_bus.get(ev.bus_id)
    best: tuple[float, int] | None = None
    for i, ev in enumerate(events):
        if not ev.hardware and ev.kind not in _KILLS:
            ev.note = ev.note or "the application's own error as the driver saw it, not a cause"
            continue
        if ev.seconds_before_failure is None:
            ev.note = ev.note or "no time on the server log's clock: listed, not blamed"
            continue
        if ev.seconds_before_failure > window:
            ev.note = f"{_ago(ev.seconds_before_failure)} before the failure: too early to be its cause"
            continue
        if ev.seconds_before_failure < -AFTER:
            ev.note = f"{_ago(-ev.seconds_before_failure)} after the failure: a consequence at most"
            continue
        if ev.kind not in _KILLS and (buses or indices):
            on = (ev.bus_id in buses) if ev.bus_id and buses else (ev.gpu in indices) if ev.gpu is not None else None
            if on is False:
                ev.note = "on a GPU this failure does not involve"
                continue
            if on is None:
                ev.note = "its GPU could not be matched to a rank (give nvidia-smi with --with)"
        score = abs(ev.seconds_before_failure)
        if best is None or score < best[0]:
            best = (score, i)
    if best is not None:
        ev = events[best[1]]
        ev.blamed = True
        att.cause = best[1]
        att.verdict, att.do_now = _verdict(ev, att, whole_job, has_failure)
    return att


_KILLS = {"oom-kill", "oom-killed", "evicted", "slurm-oom", "slurm-timeout", "slurm-node-fail"}


def _ago(seconds: float) -> str:
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _gpu_name(ev: HostEvent, att: Attribution) -> str:
    parts = []
    if ev.gpu is not None:
        parts.append(f"GPU {ev.gpu}")
        ranks = [r for r, i in att.ranks.items() if i == ev.gpu]
        if ranks:
            parts.append(", ".join(ranks))
    if ev.bus_id:
        parts.append(ev.bus_id)
    return " / ".join(parts) or "a GPU of this host"


def _verdict(ev: HostEvent, att: Attribution, whole_job: bool, has_failure: bool) -> tuple[str, str]:
    ref = ("the failure", "the server's error") if has_failure else ("the log's last line", "the log's last line")
    b = ev.seconds_before_failure or 0
    when = f"{_ago(b)} before {ref[0]}" if b >= 0 else f"{_ago(-b)} after {ref[1]}"
    if ev.kind in ("xid", "gpu-lost", "pcie-aer", "row-remap", "ecc", "nvlink"):
        what = f"Xid {ev.xid} ({ev.mnemonic})" if ev.xid is not None else ev.kind
        tail = (" The other ranks' timeouts followed from it: they were left waiting for this GPU."
                if whole_job else "")
        return (f"The hardware is the cause: the kernel logged {what} on {_gpu_name(ev, att)}, {when}.{tail} "
                "Server-side changes (a longer timeout, other flags) would not have helped.",
                ev.action or "drain the node and contact support")
    if ev.kind in ("oom-killed", "oom-kill", "slurm-oom"):
        return (f"The server was killed for using more host memory than it was allowed ({ev.kind}), {when}; "
                "the server log stops without an error of its own.",
                ev.action or "give the container or job more memory")
    if ev.kind == "evicted":
        return (f"The pod was evicted by Kubernetes, {when}: the node ran short of a resource.",
                ev.action or "schedule it on a node with room, or set requests equal to limits")
    return (f"The scheduler ended the job ({ev.kind}), {when}.", ev.action or "resubmit with a longer limit")
