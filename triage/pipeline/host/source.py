"""A host record's file: read it (plain or .gz), and name its kind from what it holds."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from triage.core.errors import TriageError

# a host record bigger than this is read only up to it: a journal of a month is not what
# an incident needs, and the events that matter are named by the failure's time anyway
MAX_BYTES = 512 * 1024 * 1024
MAX_LINE = 64 * 1024

KINDS = ("kernel", "nvidia-smi-q", "nvidia-smi-csv", "nvidia-smi-table", "kubectl-describe-pod", "kubectl-events",
         "pod-json", "slurm-output", "sacct")

_KERNEL = re.compile(
    r"^(?:\[\s*\+?\d+\.\d+\]|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:\d\d |\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"  # dmesg, dmesg -T
    r"|\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel:"  # journalctl -k, syslog
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:?\d\d|Z)? \S+ kernel:)"  # -o short-iso, rsyslog
    r"|\bNVRM: Xid\b|\bkernel: \[\s*\d+\.\d+\]"
)
_SMI_Q = re.compile(r"^=+NVSMI LOG=+\s*$|^Attached GPUs\s+: \d+|^GPU [0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s*$")
_SMI_TABLE = re.compile(r"^\| NVIDIA-SMI \d|^\|\s+\d+\s+.+\|\s+[0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d\s")
_SMI_CSV = re.compile(r"^\s*(?:index|pci\.bus_id|name|uuid|timestamp)\b[^\n]*,", re.I)
_DESCRIBE = re.compile(r"^Name:\s+\S+\s*$|^Namespace:\s+\S+|^Containers:\s*$|^\s+Last State:\s+\w+|^Events:\s*")
_EVENTS = re.compile(r"^(?:LAST SEEN|NAMESPACE\s+LAST SEEN)\s+TYPE\s+REASON\s+OBJECT\s+", re.I)
_SLURM = re.compile(r"slurmstepd(?:-\S+)?: (?:error: )?|^srun: error:|\*\*\* (?:JOB|STEP) \d[\d.]* (?:ON \S+ )?CANCELLED AT ")
_SACCT = re.compile(r"^\s*JobID\s+.*\bState\b")


def read_text(path: str) -> list[str]:
    """The file's lines (a .gz decompressed), each cut at MAX_LINE, the whole cut at MAX_BYTES.
    A file that cannot be read is an input error, said in one line."""
    p = Path(path)
    if not p.exists():
        raise TriageError(f"--with {path}: no such file")
    if not p.is_file():
        raise TriageError(f"--with {path}: not a regular file")
    try:
        with open(p, "rb") as fh:
            head = fh.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(p, "rb") as fh:
            data = fh.read(MAX_BYTES)
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise TriageError(f"--with {path}: cannot be read ({e.__class__.__name__}: {e})") from None
    if b"\x00" in data[:8192]:
        raise TriageError(f"--with {path}: binary data, not a text record")
    text = data.decode("utf-8", errors="replace")
    return [ln[:MAX_LINE] for ln in text.splitlines()]


def sniff(lines: list[str]) -> str | None:
    """The record's kind from its first lines (their content, never the file's name); None
    when it is none of the kinds triage reads."""
    head = lines[:400]
    text = "\n".join(head).lstrip()
    if text.startswith("{"):
        try:
            doc = json.loads("\n".join(lines))
        except ValueError:
            doc = None
        if isinstance(doc, dict) and (doc.get("kind") == "Pod" or "containerStatuses" in json.dumps(doc.get("status", {}))):
            return "pod-json"
        return None
    if any(_SMI_Q.search(ln) for ln in head[:40]):
        return "nvidia-smi-q"
    if any(_SMI_TABLE.search(ln) for ln in head[:40]):
        return "nvidia-smi-table"
    if head and _SMI_CSV.search(head[0]) and ("pci.bus_id" in head[0].lower() or "index" in head[0].lower()):
        return "nvidia-smi-csv"
    if any(_EVENTS.search(ln) for ln in head[:5]):
        return "kubectl-events"
    if sum(1 for ln in head[:60] if _DESCRIBE.search(ln)) >= 2:
        return "kubectl-describe-pod"
    if any(_SACCT.search(ln) for ln in head[:5]):
        return "sacct"
    if any(_SLURM.search(ln) for ln in lines):
        return "slurm-output"
    kernel = sum(1 for ln in head if _KERNEL.search(ln))
    if kernel and kernel >= max(1, len([ln for ln in head if ln.strip()]) // 3):
        return "kernel"
    return None


def sniff_file(path: str, head_bytes: int = 256 * 1024) -> str | None:
    """The kind of a file from its head only (for deciding whether a directory is a bundle).
    Only a regular file is opened: a FIFO in the directory would block the open forever."""
    import os
    import stat

    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as fh:
            data = fh.read(head_bytes)
    except OSError:
        return None
    if data[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as gz:
                data = gz.read(head_bytes)
        except (OSError, EOFError):
            return None
    if b"\x00" in data[:8192]:
        return None
    return sniff(data.decode("utf-8", errors="replace").splitlines())


def bundle(paths: list[str]) -> tuple[str, list[str]] | None:
    """A directory's files as one incident: exactly one server log and, beside it, only host
    records of a kind above; None for anything else (a directory of separate logs). The one
    rule `analyze DIR` and `fleet` (per node directory) both apply."""
    kinds = {p: sniff_file(p) for p in paths}
    logs = [p for p, k in kinds.items() if k is None]
    records = [p for p, k in kinds.items() if k is not None]
    if len(logs) == 1 and records:
        return logs[0], records
    return None
