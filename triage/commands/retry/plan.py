"""Which workaround `run --retry` applies next, and the launch it gives.

The workarounds come from the report of the attempt that failed, so they are the ones the
report recommends: spelled for the engine version, valued from the running configuration, and
marked when already applied. Only those the catalogue marks `auto: true` are applied; anything
else is listed for the operator.

A change is kept while the server gets further with it. When the same failure comes back, the
change made for it did not hold and is taken out again (it has a cost and no proven benefit),
and the failure's next workaround is tried in its place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from triage.catalogue.flags import flag_index
from triage.catalogue.load import Catalogue
from triage.catalogue.models import ENV_NAME_RX, WorkaroundSpec
from triage.commands.retry.models import Change, Launch, Skipped
from triage.core.errors import EXIT_FAILURE
from triage.core.models import Finding, Report, Workaround
from triage.pipeline.recommend import apply_workaround, computed_value, finding_text


@dataclass
class Decision:
    finding: Finding | None
    change: Change | None = None
    launch: Launch | None = None  # the launch with the change
    skipped: list[Skipped] = field(default_factory=list)
    reason: str = ""  # why there is no change


@dataclass
class _Applied:
    change: Change
    rec: Workaround
    engine: str | None


def actionable(report: Report) -> Finding | str:
    """The finding that explains the failure that ended the server, or why there is none to act on."""
    if report.exit_code != EXIT_FAILURE or not report.failures:
        return "no failure in the log"
    f = report.failures[0]
    unknown = f"unknown failure: {f.exception}: {f.message}"[:160] + f" (line {f.line}, fingerprint {f.fingerprint})"
    top = report.findings[0] if report.findings else None
    if top is None or top.failure is None or not report.failures[top.failure].fatal:
        return unknown
    if top.generic:
        # a wrapper many causes share ("Scheduler hit an exception"): acting on it would be a guess
        return f"{unknown}; only the generic {top.signature} matches"
    if top.unlikely:
        return f"{top.signature} matches, but is unlikely here ({top.unlikely})"
    return top


def by_hand(rec: Workaround) -> str:
    if rec.action:
        return " ".join(rec.action.split())
    parts = [f"add {' '.join(rec.flags)}" if rec.flags else "",
             f"remove {' '.join(rec.remove_flags)}" if rec.remove_flags else "",
             f"set {' '.join(rec.env)}" if rec.env else ""]
    return "; ".join(p for p in parts if p)


class Plan:
    """The launch as changed so far, and the workarounds already tried for each failure."""

    def __init__(self, base: Launch, cat: Catalogue, environ: Mapping[str, str]) -> None:
        self.base, self.cat = base, cat
        self.environ = environ  # triage's own environment, which the server inherits
        self.applied: list[_Applied] = []
        self.tried: set[tuple[str, str]] = set()  # (signature, workaround)

    def launch(self) -> Launch:
        return self._build(self.applied)

    def _build(self, applied: list[_Applied]) -> Launch:
        argv, env = list(self.base.argv), dict(self.base.env)
        for a in applied:
            argv = apply_workaround(argv, a.rec, flag_index(a.engine) if a.engine else None)
            env.update(a.change.env)
        return Launch(argv=argv, env=env)

    def next(self, report: Report) -> Decision:
        """The change for the failure in `report`, and the plan moves to it; or why there is none."""
        top = actionable(report)
        if isinstance(top, str):
            # no specific signature explains it: the feature map's switches for its stack are
            # still a change with a known cost (derived, and said so); a bare guess is not
            f = report.failures[0] if report.failures and report.exit_code == EXIT_FAILURE else None
            if f is None or not f.fatal or not f.switches:
                return Decision(None, reason=top)
            title = f"{f.exception}: {f.message}"[:120] + " (no specific signature; switches derived from its stack)"
            return self._choose(report, None, f"stack:{f.fingerprint}", title, f.switches, top)
        return self._choose(report, top, top.signature, top.title, top.workarounds, None)

    def _choose(self, report: Report, top: Finding | None, sig: str, title: str, recs: list[Workaround],
                unknown: str | None) -> Decision:
        kept = [a for a in self.applied if a.change.signature != sig]
        replaced = [a.change.workaround for a in self.applied if a.change.signature == sig]
        before = self._build(kept)
        engine = report.environment.engine
        skipped: list[Skipped] = []
        for rec in recs:
            why_not = self._unusable(rec, sig, report, top, before)
            if why_not is not None:
                skipped.append(Skipped(workaround=rec.id, title=rec.title, reason=why_not,
                                       by_hand=by_hand(rec) if self._manual(rec) else None))
                continue
            spec = self.cat.workarounds.get(rec.id) if rec.source == "catalogue" else None
            cost = " ".join(spec.cost.split()) if spec is not None else rec.cost
            change = Change(signature=sig, finding=title, workaround=rec.id, title=rec.title,
                            add=list(rec.flags), remove=list(rec.remove_flags), env=_env(rec), note=rec.note,
                            replaces=replaced[-1] if replaced else None, cost=cost,
                            passed_over=skipped, source=rec.source, frame=rec.frame)
            applied = _Applied(change, rec, engine if (rec.flags or rec.remove_flags) else None)
            launch = self._build([*kept, applied])
            if self._effective(launch) == self._effective(before):
                gone = ", ".join(rec.remove_flags) or ", ".join(rec.flags)
                skipped.append(Skipped(workaround=rec.id, title=rec.title,
                                       reason=f"changes nothing in this command ({gone}: already so)"))
                continue
            self.tried.add((sig, rec.id))
            self.applied = [*kept, applied]
            return Decision(top, change, launch, skipped)
        if unknown is not None:
            reason = f"{unknown}; none of the switches derived from its stack can be applied automatically"
        elif replaced:
            reason = f"{sig} came back after {replaced[-1]}, and none of its other workarounds can be applied automatically"
        else:
            reason = f"none of the workarounds of {sig} can be applied automatically"
        return Decision(top, skipped=skipped, reason=reason)

    def _effective(self, launch: Launch) -> tuple[list[str], dict[str, str]]:
        return launch.argv, {k: v for k, v in launch.env.items() if self.environ.get(k) != v}

    def _manual(self, rec: Workaround) -> bool:
        if rec.source == "feature-switch":
            return not rec.auto or bool(rec.action)
        spec = self.cat.workarounds.get(rec.id)
        return rec.source != "catalogue" or spec is None or not spec.automatic or bool(spec.action)

    def _unusable(self, rec: Workaround, sig: str, report: Report, top: Finding | None, before: Launch) -> str | None:
        if (sig, rec.id) in self.tried:
            return "tried in an earlier attempt; the failure came back"
        if rec.source == "feature-switch":
            # derived from the stack by the feature map: applied after the catalogue's own, when
            # the map marks the switch safe to apply blindly
            if rec.action:
                return "a step outside the launch command"
            if not rec.auto:
                return "a derived switch the feature map does not mark safe to apply automatically"
            if rec.status != "recommended":
                return rec.note or rec.status
            return _env_problem(rec, before, self.environ)
        spec = self.cat.workarounds.get(rec.id)
        if rec.source != "catalogue" or spec is None:
            return "the engine's own hint, not a catalogue entry"
        if spec.action:
            return "a step outside the launch command"
        if not spec.automatic:
            return ("not marked safe to apply automatically (auto: false)" if spec.auto is False
                    else "its catalogue entry does not say whether it is safe to apply automatically")
        if rec.status == "already-applied":
            return rec.note or "already in the running configuration"
        if rec.status == "not-applicable":
            return rec.note or "the log contradicts it"
        engine = report.environment.engine
        if (rec.flags or rec.remove_flags) and spec.engine != engine:
            return f"its flags are {spec.engine}'s, and the log shows {engine or 'no known engine'}"
        if any("<" in f for f in rec.flags):
            return "has a value the operator must choose"
        return (_value_problem(spec, report, top) if top is not None else None) or _env_problem(rec, before, self.environ)


def _env(rec: Workaround) -> dict[str, str]:
    return dict(e.split("=", 1) for e in rec.env if "=" in e)


def _value_problem(spec: WorkaroundSpec, report: Report, top: Finding) -> str | None:
    """A value rule that could not be computed leaves the catalogue's example value in the flag,
    which may move the setting the wrong way for this server."""
    if spec.value is None:
        return None
    if computed_value(spec.value, report.environment.settings, finding_text(report, top)) is None:
        where = spec.value.from_setting or "the error message"
        return f"its value is computed from {where}, and this log gives none to compute from (or it is at its limit)"
    return None


# Variables that decide which code the server runs (a library preloaded into it, where Python
# and the shell look for modules and programs): never changed unattended, whatever an entry says.
NEVER_AUTO_ENV = frozenset({"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PYTHONPATH", "PYTHONHOME",
                            "PYTHONSTARTUP", "PYTHONUSERBASE", "PYTHONINSPECT", "PATH", "BASH_ENV", "ENV",
                            "PERL5LIB", "NODE_OPTIONS", "IFS"})
NEVER_AUTO_PREFIXES = ("LD_", "DYLD_")


def _env_problem(rec: Workaround, before: Launch, environ: Mapping[str, str]) -> str | None:
    for k in _env(rec):
        if not re.match(ENV_NAME_RX, k):
            return f"{k!r} is not an environment variable name"
        if k in NEVER_AUTO_ENV or k.startswith(NEVER_AUTO_PREFIXES):
            return f"sets {k}, which decides what code the server runs: by hand only"
    for k, v in _env(rec).items():
        have = before.env.get(k, environ.get(k))
        if have and have != v:  # an empty value is as good as unset
            return f"would replace {k}={have}, which the server already runs with"
    return None


def dry_run(report: Report, cat: Catalogue, base: Launch, environ: Mapping[str, str], retries: int) -> list[Decision]:
    """The changes `run --retry` would make, in order, if the failure in `report` kept coming back."""
    plan = Plan(base, cat, environ)
    out: list[Decision] = []
    for _ in range(retries):
        d = plan.next(report)
        out.append(d)
        if d.change is None:
            break
    return out
