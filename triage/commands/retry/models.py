"""What `run --retry` records: the changes it made, the attempts, and the summary it prints.

Pydantic models, because the summary is also a JSON event that scripts read: add fields, never
rename them.
"""

from __future__ import annotations

import shlex

from pydantic import BaseModel, Field


class Launch(BaseModel):
    """One way to start the server: its argv, and the variables set on top of triage's environment."""

    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict)

    def shell(self) -> str:
        """As a line for a launch script."""
        # the name quoted too: a catalogue's names are checked, but this line is run by a shell
        prefix = " ".join(f"{shlex.quote(k)}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{prefix} {shlex.join(self.argv)}".strip()


class Skipped(BaseModel):
    """A workaround of the failure that was not applied, and why."""

    workaround: str
    title: str
    reason: str
    by_hand: str | None = None  # what the operator can do instead: the action, or the change to make


class Change(BaseModel):
    """A relaunch's change: one catalogue workaround for the failure that ended the attempt before."""

    signature: str
    finding: str  # the signature's title
    workaround: str
    title: str
    add: list[str] = Field(default_factory=list)  # flags as they go into the command (respelled, valued)
    remove: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    replaces: str | None = None  # the workaround of the same failure that did not hold, now taken out
    note: str | None = None  # respelling, computed value
    cost: str = ""
    passed_over: list[Skipped] = Field(default_factory=list)  # the failure's earlier workarounds, not applied
    # catalogue | feature-switch: a switch derived from the failing stack by the feature map, and
    # the frame that implicated the feature
    source: str = "catalogue"
    frame: str | None = None

    def describe(self) -> str:
        parts = [f"adds {' '.join(self.add)}" if self.add else "",
                 f"removes {' '.join(self.remove)}" if self.remove else "",
                 "sets " + " ".join(f"{k}={v}" for k, v in self.env.items()) if self.env else ""]
        text = "; ".join(p for p in parts if p)
        if self.replaces:
            text += f" (instead of {self.replaces}, which did not hold)"
        if self.source == "feature-switch" and (self.frame or "").startswith("line "):
            text += f" (derived from the failure's own line: {self.frame} names the feature it turns off)"
        elif self.source == "feature-switch":
            text += f" (derived from the stack: {self.frame} runs through the feature it turns off)"
        return text


class Measure(BaseModel):
    """One cost figure, from the first attempt's log and from the log of the attempt that held."""

    name: str
    before: str | None = None
    after: str | None = None


class AttemptRecord(BaseModel):
    number: int  # 1 is the command as given
    command: str
    launch: Launch
    log: str
    change: Change | None = None  # what made this attempt differ from the one before
    # ready: became ready, left running (--until ready); served: ready, then stopped by the
    # operator or exited cleanly; failed; exited: no failure in the log; timeout; interrupted
    end: str = "not started"
    status: int | None = None  # the server's raw status (negative: killed by that signal)
    exit_code: int | None = None  # what `triage run` would have exited with for this attempt alone
    ready_seconds: float | None = None
    signature: str | None = None
    finding: str | None = None
    failure: str | None = None  # "Exception: message (line N)"
    fingerprint: str | None = None
    pid: int | None = None

    @property
    def held(self) -> bool:
        return self.end in ("ready", "served")


class RetrySummary(BaseModel):
    attempts: list[AttemptRecord] = Field(default_factory=list)
    held: int | None = None  # the attempt that held
    workarounds: list[Change] = Field(default_factory=list)  # in effect in the attempt that held
    cost: list[Measure] = Field(default_factory=list)
    command: str | None = None  # the launch command to put in the deployment
    stopped: str = ""  # why the loop ended
    # the last failure's workarounds that were not applied, and why; those with `by_hand` are
    # what is left for the operator to do
    not_applied: list[Skipped] = Field(default_factory=list)
    until: str = "ready"
    exit_code: int = 0


class PlanStep(BaseModel):
    attempt: int  # the attempt this change would start
    change: Change
    command: str


class RetryPlan(BaseModel):
    """`run --retry --dry-run`: the changes for the failure in an existing log, in order."""

    log: str
    command: str
    command_from_log: bool = False  # rebuilt from the configuration the log printed
    finding: str | None = None  # "signature: title"
    steps: list[PlanStep] = Field(default_factory=list)
    then: str = ""  # what the loop would do after the last step
    not_applied: list[Skipped] = Field(default_factory=list)  # never applied automatically, and why
    retries: int = 1
