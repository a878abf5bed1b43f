"""Render `run --retry`: the summary of the attempts, and the `--dry-run` plan. Markdown for the
operator, JSON (one `summary` or `plan` event line) for scripts."""

from __future__ import annotations

import json
import shlex

from triage.commands.retry.models import AttemptRecord, Change, RetryPlan, RetrySummary, Skipped
from triage.render.markdown import codeblock, inline

_ENDS = {
    "ready": "ready",
    "served": "served",
    "failed": "failed",
    "exited": "exited with no failure in its log",
    "timeout": "timed out before ready",
    "interrupted": "stopped by the operator",
    "not started": "not started",
}


def _code(text: str) -> str:
    return f"`{inline(text)}`"


def _change_lines(c: Change, indent: str = "") -> list[str]:
    out = [f"{indent}- change: **{inline(c.workaround)}** ({inline(c.title)}): {inline(c.describe())}, "
           f"for {inline(c.signature)}"]
    if c.note:
        out.append(f"{indent}  ({inline(c.note)})")
    out.extend(f"{indent}- not applied: {inline(s.workaround)}: {inline(s.reason)}" for s in c.passed_over)
    return out


def _ended(a: AttemptRecord) -> str:
    text = _ENDS.get(a.end, a.end)
    if a.end == "ready" and a.ready_seconds is not None:
        text = f"ready after {a.ready_seconds:.1f}s, left running (process group {a.pid})"
    elif a.end == "served":
        ready = f" after {a.ready_seconds:.1f}s" if a.ready_seconds is not None else ""
        text = (f"ready{ready}, served, then exited cleanly" if a.status == 0
                else f"ready{ready}, served until stopped (status {a.status})")
    elif a.status is not None:
        text += f" (status {a.status})"
    return text


def _attempt(a: AttemptRecord) -> list[str]:
    out = [f"### Attempt {a.number}: {inline(_ended(a))}", ""]
    if a.change is not None:
        out.extend(_change_lines(a.change))
    out.append(f"- command: {_code(a.command)}")
    out.append(f"- log: {_code(a.log)}")
    if a.failure:
        out.append(f"- failure: {inline(a.failure)}")
    if a.signature:
        out.append(f"- finding: **{inline(a.signature)}**: {inline(a.finding or '')}")
    elif a.failure:
        out.append(f"- finding: none (fingerprint {inline(a.fingerprint or '?')}); full report: "
                   f"{_code('triage analyze ' + shlex.quote(a.log))}")
    out.append("")
    return out


def _not_applied(items: list[Skipped]) -> list[str]:
    manual = [s for s in items if s.by_hand]
    out = []
    if manual:
        out += ["## To do by hand", ""]
        for s in manual:
            out.append(f"- **{inline(s.workaround)}** ({inline(s.title)}): {inline(s.by_hand or '')}")
            out.append(f"  (not applied automatically: {inline(s.reason)})")
        out.append("")
    rest = [s for s in items if not s.by_hand]
    if rest:
        out += ["## Not applied", ""]
        out.extend(f"- **{inline(s.workaround)}** ({inline(s.title)}): {inline(s.reason)}" for s in rest)
        out.append("")
    return out


def summary_markdown(s: RetrySummary) -> str:
    n = len(s.attempts)
    if s.held is not None:
        head = f"held on attempt {s.held} of {n}"
        applied = "; ".join(f"{c.workaround} ({c.describe()})" for c in s.workarounds)
        verdict = (f"attempt {s.held} held with {applied}." if applied
                   else f"attempt {s.held} held with the command as given.")
    else:
        head = f"no attempt held ({n} attempt{'s' if n != 1 else ''})"
        last = s.attempts[-1] if s.attempts else None
        verdict = "no attempt was started."
        if last is not None:
            verdict = f"no attempt held; attempt {last.number} {_ended(last)}" + (f": {last.failure}" if last.failure else ".")
    out = [f"# Triage run --retry: {head}", "", f"**Verdict:** {inline(verdict)}", "",
           f"**Stopped because:** {inline(s.stopped)}.", "", "## Attempts", ""]
    for a in s.attempts:
        out.extend(_attempt(a))
    if s.held is not None and s.workarounds:
        out += ["## What held, and its cost", ""]
        for c in s.workarounds:
            out.append(f"- **{inline(c.workaround)}** ({inline(c.title)}), for {inline(c.signature)}: "
                       f"{inline(c.describe())}")
            out.append(f"  - cost: {inline(c.cost)}")
        out.append("")
        if s.cost:
            out += [f"Measured from the logs (before: attempt 1, the command as given; after: attempt {s.held}):", "",
                    "| | before | after |", "|---|---|---|"]
            out.extend(f"| {inline(m.name)} | {inline(m.before or 'not measured')} | "
                       f"{inline(m.after or 'not measured')} |" for m in s.cost)
            out.append("")
        if s.until == "ready":
            out += ["Attempt watched until ready only: it has served no load yet, so nothing is measured after the "
                    "change (`--until exit` watches it serve).", ""]
    if s.command is not None:
        out += ["## Launch command for the deployment", "", codeblock(s.command, "bash"), ""]
    if s.held is None:
        out.extend(_not_applied(s.not_applied))
    return "\n".join(out)


def summary_json(s: RetrySummary) -> str:
    return json.dumps({"event": "summary", **s.model_dump(mode="json")}, ensure_ascii=True) + "\n"


def plan_markdown(p: RetryPlan) -> str:
    out = [f"# Triage run --retry --dry-run: {inline(p.log)}", ""]
    out.append(f"**Failure:** {inline(p.finding or 'no catalogued failure')}")
    out.append("")
    source = " (rebuilt from the configuration the log printed)" if p.command_from_log else ""
    out += [f"Attempt 1 is the command as given{source}:", "", codeblock(p.command, "bash"), ""]
    if p.steps:
        out += ["## Changes, in order", ""]
        for step in p.steps:
            c = step.change
            when = "if attempt 1 fails with this failure" if step.attempt == 2 else \
                f"if the failure comes back in attempt {step.attempt - 1}"
            out.append(f"{step.attempt - 1}. {when}: attempt {step.attempt} with **{inline(c.workaround)}** "
                       f"({inline(c.title)}): {inline(c.describe())}")
            if c.note:
                out.append(f"   ({inline(c.note)})")
            out.append(f"   - cost: {inline(c.cost)}")
            out.append(f"   - command: {_code(step.command)}")
        out.append("")
    out += [f"Then: {inline(p.then)}.", ""]
    out.extend(_not_applied(p.not_applied))
    return "\n".join(out)


def plan_json(p: RetryPlan) -> str:
    return json.dumps({"event": "plan", **p.model_dump(mode="json")}, ensure_ascii=True) + "\n"
