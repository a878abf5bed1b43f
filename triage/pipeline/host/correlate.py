"""The host stage: read the records given with `--with`, put their events on the server log's
clock, map ranks to GPUs, and say whether a host event caused the failure. When one did, the
server-side advice is demoted (a longer NCCL timeout does not bring back a GPU that fell off the
bus) and the host's action becomes what to do now."""

from __future__ import annotations

from datetime import datetime, timedelta

from triage.catalogue.xid import lookup
from triage.core.errors import TriageError
from triage.core.models import GpuInfo, HostEvent, HostRecords, HostSource, Report
from triage.pipeline.host.attribute import attribute
from triage.pipeline.host.clock import server_time, to_server
from triage.pipeline.host.kernel import KernelEvent, boot_time, read_kernel
from triage.pipeline.host.nvsmi import Smi, read_csv, read_q, read_table
from triage.pipeline.host.orchestrator import (
    OrchestratorEvent,
    read_describe,
    read_events,
    read_pod_json,
    read_sacct,
    read_slurm,
)
from triage.pipeline.host.source import KINDS, read_text, sniff

WINDOW = 3600.0

_KILL_ACTIONS = {
    "oom-killed": "raise the container's memory limit (resources.limits.memory{limit}): loading a checkpoint holds "
                  "shards in host memory; or lower what the server keeps in host memory (fewer loader workers, "
                  "no CPU offload or swap space)",
    "oom-kill": "give the server more host memory or run fewer processes beside it; the kernel's memory summary "
                "above the kill line shows what held the memory",
    "slurm-oom": "resubmit with more memory (`--mem` or `--mem-per-gpu`)",
    "slurm-timeout": "resubmit with a longer `--time`, or make the job checkpoint and resume",
    "slurm-node-fail": "resubmit on another node and report the failed node to the cluster's admins",
    "evicted": "schedule the pod where the resource it lacked is free; set requests equal to limits so it is "
               "not the first evicted",
}


def _unknown(path: str) -> TriageError:
    return TriageError(f"--with {path}: not a record triage reads (kernel log, nvidia-smi -q / CSV / table, "
                       "kubectl describe pod / get events / pod JSON, Slurm output or sacct); see docs/host-records.md")


def _year(report: Report, texts: list[list[str]]) -> int | None:
    """The year of the incident, for the dates printed without one (vLLM's `06-24 10:15:03`,
    the journal's `Jun 24 10:15:02`): the server log's, else the first record that prints it."""
    from triage.pipeline.host.clock import wall_time

    for t in (report.timeline.first_time, report.timeline.crash_time):
        if t and len(t) >= 4 and t[:4].isdigit():
            return int(t[:4])
    for lines in texts:
        for ln in lines[:200]:
            for part in (ln, ln.split(":", 1)[-1]):
                w = wall_time(part.strip(), year=1)  # year 1: the line printed none
                if w is not None and w.year > 1:
                    return w.year
    return None


def _failure_time(report: Report, log_path: str | None, year: int | None) -> tuple[datetime | None, str]:
    fatal = report.fatal_failures
    if fatal and fatal[0].time:
        return server_time(fatal[0].time, year), f"the failure at line {fatal[0].line}"
    if report.timeline.crash_time:
        return server_time(report.timeline.crash_time, year), "the crash"
    last = _last_time(log_path, report.lines)
    if last is not None:
        return server_time(last[1], year), f"the log's last timestamp (line {last[0]})"
    return None, "no time in the server log"


def _last_time(log_path: str | None, total_lines: int) -> tuple[int, str] | None:
    """The last timestamp of the server log, read from its last 256 KiB only, with its line
    number (the scan counted the lines: `total_lines` is the last one). A compressed log is
    not seeked into: None."""
    if not log_path or log_path == "-" or total_lines <= 0:
        return None
    from triage.pipeline.parse.lines import parse_line

    try:
        with open(log_path, "rb") as fh:
            if fh.read(2) == b"\x1f\x8b":
                return None
            fh.seek(0, 2)
            start = max(0, fh.tell() - 256 * 1024)
            fh.seek(start)
            tail = fh.read()
    except OSError:
        return None
    lines = tail.decode("utf-8", errors="replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # begun mid-line
    first_no = total_lines - len(lines) + 1
    for i in range(len(lines) - 1, -1, -1):
        ln = parse_line(first_no + i, lines[i])
        if ln.ts:
            return ln.no, ln.ts
    return None


def host_records(report: Report, log_path: str | None, paths: list[str], offset: timedelta | None = None,
                 window: float = WINDOW) -> HostRecords:
    read = []
    for path in paths:
        lines = read_text(path)
        kind = sniff(lines)
        if kind is None:
            raise _unknown(path)
        read.append((path, kind, lines))
    year = _year(report, [r[2] for r in read])
    off = offset or timedelta(0)
    boot = next((b for _, k, lines in read if k == "kernel" and (b := boot_time(lines, year)) is not None), None)
    out = HostRecords(window_seconds=window)
    smi = Smi()
    for path, kind, lines in read:
        src = HostSource(path=path, kind=kind, lines=len(lines))
        events: list[HostEvent] = []
        if kind == "kernel":
            kev = read_kernel(lines, year)
            src.clock, src.clock_note = _kernel_clock(kev, boot, offset)
            events = [_kernel_event(path, e, boot, off) for e in kev]
        elif kind.startswith("nvidia-smi"):
            part = {"nvidia-smi-q": read_q, "nvidia-smi-csv": read_csv, "nvidia-smi-table": read_table}[kind](lines)
            smi.gpus = _merge_gpus(smi.gpus, part.gpus)
            src.clock = "a snapshot: its states have no time of their own"
            for st in part.states:
                events.append(HostEvent(source=path, line=st.line, text=st.text, kind=st.kind, bus_id=st.bus_id,
                                        gpu=st.gpu, hardware=True, note="a state when nvidia-smi ran",
                                        action=_STATE_ACTIONS.get(st.kind)))
        else:
            reader = {"kubectl-describe-pod": read_describe, "kubectl-events": read_events, "pod-json": read_pod_json,
                      "slurm-output": read_slurm, "sacct": read_sacct}[kind]
            oev = reader(lines)
            events = [_orchestrator_event(path, e, off) for e in oev]
            timed = [e for e in oev if e.wall is not None]
            src.clock = (("UTC; the server log's times taken as UTC" if any(e.wall.tzinfo for e in timed if e.wall)
                          else _naive_clock(offset)) if timed else None)
            if oev and not timed:
                src.clock_note = ("its times are relative to when the command ran (`2m`, `10m`): listed in order, "
                                  "not placed")
        src.events = len(events)
        out.sources.append(src)
        out.events.extend(events)
    out.gpus = smi.gpus
    when, what = _failure_time(report, log_path, year)
    out.failure_time = when.isoformat(sep=" ", timespec="seconds") if when else None
    out.failure_time_from = what
    for ev in out.events:
        if ev.time and when:
            ev.seconds_before_failure = round((when - datetime.fromisoformat(ev.time)).total_seconds(), 1)
    out.events.sort(key=lambda e: (e.time is None, e.time or "", e.source, e.line))
    out.attribution = attribute(report, out.events, out.gpus, when, window, log_path,
                                has_failure=bool(report.fatal_failures))
    if out.attribution.cause is None and when is None and out.events:
        out.attribution.how.append(f"the failure's time is unknown ({what}): no host event could be blamed")
    return out


def _naive_clock(offset: timedelta | None) -> str:
    if offset:
        return f"local time, {_fmt(offset)} ahead of the server log (--host-offset)"
    return "local time, taken to be the server log's clock (give --host-offset if they differ)"


def _fmt(td: timedelta) -> str:
    mins = int(td.total_seconds() // 60)
    sign = "-" if mins < 0 else "+"
    return f"{sign}{abs(mins) // 60:02d}:{abs(mins) % 60:02d}"


def _kernel_clock(events: list[KernelEvent], boot: datetime | None, offset: timedelta | None) -> tuple[str | None, str | None]:
    if any(e.wall is not None and e.wall.tzinfo is not None for e in events):
        return "UTC; the server log's times taken as UTC", None
    if any(e.wall is not None for e in events):
        return _naive_clock(offset), None
    if any(e.uptime is not None for e in events):
        if boot is not None:
            return f"seconds since boot; boot at {boot.isoformat(sep=' ', timespec='seconds')} (from a syslog line)", None
        return None, ("seconds since boot only, and no boot time: run `dmesg -T` (or give the journal or syslog of the "
                      "same boot) to place its events on the timeline")
    return (_naive_clock(offset) if events else None), None


def _kernel_event(path: str, e: KernelEvent, boot: datetime | None, off: timedelta) -> HostEvent:
    t = e.wall
    if t is None and e.uptime is not None and boot is not None:
        t = boot + timedelta(seconds=e.uptime)
    ev = HostEvent(source=path, line=e.line, text=e.text.strip(), kind=e.kind, bus_id=e.bus_id, xid=e.xid,
                   time=to_server(t, off).isoformat(sep=" ", timespec="seconds") if t else None)
    if e.kind == "xid" and e.xid is not None:
        info = lookup(e.xid)
        if info is not None:
            ev.mnemonic, ev.hardware, ev.action, ev.investigate = (info.mnemonic, info.hardware, info.action,
                                                                   info.investigate)
        else:
            ev.note = "an Xid not in NVIDIA's catalogue"
    elif e.kind == "gpu-lost":
        info = lookup(79)
        ev.hardware, ev.action, ev.mnemonic = True, info.action if info else None, "GPU_HAS_FALLEN_OFF_THE_BUS"
    elif e.kind == "pcie-aer":
        ev.hardware = e.fatal
        ev.action = ("drain the node and reseat or replace the GPU (or its riser); check `lspci -vvv` for the link "
                     "and the BMC's event log") if e.fatal else None
        if not e.fatal:
            ev.note = "a corrected PCIe error: logged, harmless alone"
    elif e.kind == "oom-kill":
        ev.action = _KILL_ACTIONS["oom-kill"]
        ev.note = f"killed process {e.pid} ({e.process})"
    return ev


def _orchestrator_event(path: str, e: OrchestratorEvent, off: timedelta) -> HostEvent:
    action = _KILL_ACTIONS.get(e.kind)
    if action and "{limit}" in action:
        action = action.format(limit=f", now {e.limit}" if e.limit else "")
    return HostEvent(source=path, line=e.line, text=e.text, kind=e.kind,
                     time=to_server(e.wall, off).isoformat(sep=" ", timespec="seconds") if e.wall else None,
                     action=action, note=f"memory limit {e.limit}" if e.limit else None)


_STATE_ACTIONS = {
    "row-remap": "reset the GPU to apply the pending row remap (drain it first); if remapping failed, RMA the GPU",
    "ecc": "check `nvidia-smi -q -d ECC,ROW_REMAPPER`; reset the GPU, and RMA it if uncorrectable errors return",
    "gpu-lost": "drain the node and reboot it; if the GPU is still missing, open a hardware ticket",
}


def _merge_gpus(have: list[GpuInfo], new: list[GpuInfo]) -> list[GpuInfo]:
    if not have:
        return new
    by_index = {g.index: g for g in have}
    for g in new:
        old = by_index.get(g.index)
        if old is None:
            by_index[g.index] = g
        else:
            old.bus_id = old.bus_id or g.bus_id
            old.name = old.name or g.name
            old.uuid = old.uuid or g.uuid
    return [by_index[i] for i in sorted(by_index)]


def apply(report: Report, host: HostRecords) -> None:
    """The host's verdict into the report: when a host event is to blame, the server-side advice
    no longer stands (its workarounds are marked not applicable, the patched command dropped)."""
    report.host = host
    att = host.attribution
    if att.cause is None:
        return
    ev = host.events[att.cause]
    why = f"the host records blame {ev.kind}{f' (Xid {ev.xid})' if ev.xid is not None else ''} at {ev.source}:{ev.line}"
    for f in report.findings:
        for w in f.workarounds:
            if w.status == "recommended":
                w.status = "not-applicable"
                w.note = f"{why}; a change to the server would not have prevented it"
    for failure in report.failures:
        for w in failure.switches:
            if w.status == "recommended":
                w.status = "not-applicable"
                w.note = why
    report.patched_command = None


__all__ = ["KINDS", "WINDOW", "apply", "host_records"]
