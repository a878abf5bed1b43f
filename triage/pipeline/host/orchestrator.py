"""What the orchestrator recorded: Kubernetes (`kubectl describe pod`, `kubectl get events`, the
pod's JSON) and Slurm (the job's output, `sacct`). Each names how the server's container or job
ended: killed at its memory limit, evicted, restarted by a failing probe, out of time."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime

from triage.pipeline.host.clock import wall_time


@dataclass
class OrchestratorEvent:
    line: int
    text: str
    kind: str  # oom-killed | evicted | crash-loop | probe-failed | killed | slurm-oom | slurm-timeout | slurm-node-fail
    wall: datetime | None = None
    exit_code: int | None = None
    limit: str | None = None  # the memory limit the container ran under, when shown


_REASON = re.compile(r"^\s+Reason:\s+(\w+)")
_EXIT = re.compile(r"^\s+Exit Code:\s+(\d+)")
_FINISHED = re.compile(r"^\s+Finished:\s+(.+)$")
_MEM_LIMIT = re.compile(r"^\s+memory:\s+(\S+)")
_EVENT_ROW = re.compile(r"^\s*(Normal|Warning)\s+(\w+)\s+(\S+(?: \(x\d+ over \S+\))?)\s+(\S+)\s+(.*)$")

_EVENT_KINDS = {"BackOff": "crash-loop", "Unhealthy": "probe-failed", "Evicted": "evicted", "OOMKilling": "oom-killed",
                "Killing": "killed"}


def read_describe(lines: list[str]) -> list[OrchestratorEvent]:
    out: list[OrchestratorEvent] = []
    limits = False
    limit: str | None = None
    state: OrchestratorEvent | None = None
    for no, text in enumerate(lines, 1):
        if text.strip().startswith("Limits:"):
            limits = True
            continue
        if limits:
            m = _MEM_LIMIT.match(text)
            if m:
                limit = m.group(1)
            if not text.startswith("      "):
                limits = False
        if re.match(r"^\s+(?:Last State|Last Termination State|State):\s+Terminated", text):
            state = OrchestratorEvent(no, text.strip(), "terminated")
            continue
        if state is not None:
            if (m := _REASON.match(text)) is not None:
                reason = m.group(1)
                state.kind = {"OOMKilled": "oom-killed", "Error": "terminated"}.get(reason, state.kind)
                state.text = f"container terminated: {reason}"
                state.line = no
            elif (m := _EXIT.match(text)) is not None:
                state.exit_code = int(m.group(1))
                state.text += f", exit code {m.group(1)}"
            elif (m := _FINISHED.match(text)) is not None:
                state.wall = wall_time(m.group(1))
                state.text += f", finished {m.group(1).strip()}"
            elif not text.startswith("      "):
                if state.kind != "terminated" or (state.exit_code or 0) > 128:
                    out.append(state)
                state = None
        if re.match(r"^Reason:\s+Evicted", text):
            out.append(OrchestratorEvent(no, text.strip(), "evicted"))
        if text.startswith("Message:") and "low on resource" in text:
            out.append(OrchestratorEvent(no, text.strip(), "evicted"))
        m = _EVENT_ROW.match(text)
        if m and m.group(2) in _EVENT_KINDS:
            out.append(OrchestratorEvent(no, f"{m.group(2)}: {m.group(5).strip()}", _EVENT_KINDS[m.group(2)]))
    if state is not None:
        out.append(state)
    for ev in out:
        if ev.kind == "oom-killed":
            ev.limit = limit
    return out


def read_events(lines: list[str]) -> list[OrchestratorEvent]:
    """`kubectl get events`: its ages are relative to when it ran, so its events are listed
    with no time of their own."""
    out: list[OrchestratorEvent] = []
    for no, text in enumerate(lines[1:], 2):
        parts = text.split()
        for reason, kind in _EVENT_KINDS.items():
            if reason in parts[:4] or (reason == "OOMKilling" and "OOMKilled" in text):
                out.append(OrchestratorEvent(no, text.strip(), kind))
                break
    return out


def read_pod_json(lines: list[str]) -> list[OrchestratorEvent]:
    doc = json.loads("\n".join(lines))
    out: list[OrchestratorEvent] = []
    status = doc.get("status") or {}
    if status.get("reason") == "Evicted":
        out.append(OrchestratorEvent(1, f"pod evicted: {status.get('message', '')}".strip(), "evicted"))
    limit = None
    for c in (doc.get("spec") or {}).get("containers") or []:
        limit = ((c.get("resources") or {}).get("limits") or {}).get("memory") or limit
    for cs in status.get("containerStatuses") or []:
        for key in ("lastState", "state"):
            term = (cs.get(key) or {}).get("terminated")
            if not term:
                continue
            reason, code = term.get("reason", ""), term.get("exitCode")
            kind = "oom-killed" if reason == "OOMKilled" else "terminated"
            if kind == "terminated" and not (isinstance(code, int) and code > 128):
                continue
            fin = term.get("finishedAt")
            out.append(OrchestratorEvent(_line_of(lines, "finishedAt"), f"container {cs.get('name')} terminated: "
                                         f"{reason}, exit code {code}, finished {fin}", kind,
                                         wall=wall_time(fin) if fin else None, exit_code=code, limit=limit))
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == "CrashLoopBackOff":
            out.append(OrchestratorEvent(_line_of(lines, "CrashLoopBackOff"), f"container {cs.get('name')}: "
                                         "CrashLoopBackOff", "crash-loop"))
    return out


def _line_of(lines: list[str], word: str) -> int:
    return next((i for i, ln in enumerate(lines, 1) if word in ln), 1)


# both spellings Slurm has used: `Detected 1 oom_kill event in StepId=42.0.` and the older
# `Detected 2 oom-kill event(s) in step 42.batch cgroup.`; `*** JOB 42 ON node CANCELLED AT ...` and
# the older `*** JOB 42 CANCELLED AT ... DUE TO TIME LIMIT on node ***`
_SLURM_OOM = re.compile(r"Detected \d+ oom[_-]kill event(?:s|\(s\))? in (?:StepId=|step )?\S+|tasks? [\d,-]+: Out Of Memory")
_SLURM_CANCEL = re.compile(r"\*\*\* (?:JOB|STEP) \S+ (?:ON \S+ )?CANCELLED AT (\S+) DUE TO (TIME LIMIT|NODE FAILURE"
                           r"|PREEMPTION)")


def read_slurm(lines: list[str]) -> list[OrchestratorEvent]:
    out: list[OrchestratorEvent] = []
    for no, text in enumerate(lines, 1):
        if "slurm" not in text and "srun" not in text and "CANCELLED" not in text:
            continue
        if _SLURM_OOM.search(text):
            out.append(OrchestratorEvent(no, text.strip(), "slurm-oom", wall=wall_time(text)))
        elif (m := _SLURM_CANCEL.search(text)) is not None:
            kind = {"TIME LIMIT": "slurm-timeout", "NODE FAILURE": "slurm-node-fail"}.get(m.group(2), "killed")
            out.append(OrchestratorEvent(no, text.strip(), kind, wall=wall_time(m.group(1))))
    return out


_SACCT_STATES = {"OUT_OF_ME": "slurm-oom", "TIMEOUT": "slurm-timeout", "NODE_FAIL": "slurm-node-fail"}


def read_sacct(lines: list[str]) -> list[OrchestratorEvent]:
    out: list[OrchestratorEvent] = []
    head = lines[0].split() if lines else []
    cols = {h: i for i, h in enumerate(head)}
    for no, text in enumerate(lines[1:], 2):
        parts = text.split()
        if not parts or set(parts[0]) <= {"-"}:
            continue
        state = parts[cols["State"]] if "State" in cols and cols["State"] < len(parts) else text
        kind = next((k for s, k in _SACCT_STATES.items() if state.startswith(s)), None)
        if kind is None:
            continue
        end = parts[cols["End"]] if "End" in cols and cols["End"] < len(parts) else None
        out.append(OrchestratorEvent(no, text.strip(), kind, wall=wall_time(end) if end else None))
    return out
