"""NVIDIA's Xid catalogue (data/xid.json) and what each resolution bucket asks of an on-call
engineer, in words.

An Xid is the driver's report of a GPU error in the kernel log. Some are the application's own
fault seen from the driver (13: a kernel went out of bounds, 31: an illegal address, 43: the
context was torn down, 45: the process was killed); those follow a server's CUDA error and never
explain it. Others are the hardware or the driver failing under the application (79: the GPU fell
off the PCIe bus, 48/94/95/140: uncorrectable memory errors, 74: NVLink, 119/120: the GSP
firmware): one of those on the failing rank's GPU shortly before the failure is its cause.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).parent / "data" / "xid.json"

# Codes NVIDIA's catalogue marks as the application's own error (its investigatory action is
# the application's workflow, or "GPU remains healthy"): they follow the server's CUDA error.
APPLICATION = frozenset({13, 31, 43, 45, 69, 137})

# The buckets that mean the GPU, its memory, its links or its firmware failed: the hardware is
# to blame. 94 (a contained memory error) only needs the application restarted, but it is an
# ECC error under the application, so it is blamed too.
_HARDWARE_BUCKETS = frozenset({"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR",
                               "WORKFLOW_NVLINK5_ERR", "CHECK_MECHANICALS"})
_HARDWARE_CODES = frozenset({48, 63, 64, 79, 92, 94, 95, 140, 171, 172})

# What each bucket asks for, said for the person holding the pager.
ACTIONS = {
    "RESTART_APP": "restart the server; the GPU itself needs no action unless the Xid repeats",
    "RESET_GPU": "drain the node (or at least this GPU), reset the GPU (`nvidia-smi -r -i N` with nothing running "
                 "on it) and only then restart the server; if it recurs after the reset, contact NVIDIA support",
    "RESTART_BM": "drain the node and reboot it: the GPU is gone from the PCIe bus and only a reboot brings it back; "
                  "if it is missing after the reboot, open a hardware ticket",
    "RESTART_VM": "restart the virtual machine",
    "WORKFLOW_XID_48": "drain the node and reset the GPU (or reboot) to clear the uncorrectable ECC error; check "
                       "`nvidia-smi -q -d ECC,ROW_REMAPPER` and open an RMA if the error counts keep rising",
    "WORKFLOW_NVLINK_ERR": "drain the node and reset the GPUs on the failed NVLink (or reboot); check "
                           "`nvidia-smi nvlink -s` and contact the hardware vendor if it recurs",
    "WORKFLOW_NVLINK5_ERR": "drain the node and reset the GPU; follow NVIDIA's NVLink5 error workflow for the subcode",
    "WORKFLOW_XID_45": "nothing for this Xid itself: it reports that a process was torn down; follow the other "
                       "Xid logged with it",
    "WORKFLOW_XID_13": "debug the application (compute-sanitizer, CUDA_LAUNCH_BLOCKING=1); a hardware cause is rare",
    "WORKFLOW_XID_31": "debug the application (compute-sanitizer, CUDA_LAUNCH_BLOCKING=1); a hardware cause is rare",
    "CHECK_MECHANICALS": "check the GPU's auxiliary power cabling",
    "UPDATE_SWFW": "update the GPU driver and firmware",
    "CHECK_UVM": "check the unified-memory (UVM) driver state",
    "XID_154": "follow the recovery action it names (drain, reset, reboot) for the Xid logged with it",
    "IGNORE": "no action needed for this Xid alone",
    "CONTACT_SUPPORT": "contact NVIDIA support with an nvidia-bug-report.sh log",
}


@dataclass(frozen=True)
class Xid:
    code: int
    mnemonic: str
    description: str
    gpus: tuple[str, ...]
    immediate: str | None
    investigatory: str | None

    @property
    def hardware(self) -> bool:
        """A fault of the GPU, its memory, links or firmware rather than the application's."""
        if self.code in APPLICATION:
            return False
        return self.code in _HARDWARE_CODES or (self.immediate or "") in _HARDWARE_BUCKETS

    @property
    def action(self) -> str:
        return ACTIONS.get(self.immediate or "", f"NVIDIA's bucket: {self.immediate}" if self.immediate
                           else "not in NVIDIA's catalogue of actions")

    @property
    def investigate(self) -> str | None:
        if not self.investigatory:
            return None
        return ACTIONS.get(self.investigatory, self.investigatory)


@lru_cache(maxsize=1)
def catalogue() -> dict[int, Xid]:
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    return {r["xid"]: Xid(code=r["xid"], mnemonic=r["mnemonic"], description=r["description"],
                          gpus=tuple(r["gpus"]), immediate=r["immediate"], investigatory=r["investigatory"])
            for r in doc["xids"]}


def lookup(code: int) -> Xid | None:
    return catalogue().get(code)
