"""`triage run --retry N`: start the server; when it dies of a known failure whose workaround can
be applied automatically, relaunch it with that workaround, at most N times; then summarise.

Each attempt writes its own log (FILE, FILE.1, FILE.2, ...) so that no attempt's evidence is
overwritten by the next. The loop stops at the first attempt that holds (ready; with
`--until exit`, serving until it exits cleanly or the operator stops it), at an unknown failure,
a hang, the operator's signal, or when no applicable workaround is left.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

from triage.commands.output import Output
from triage.commands.retry.attempt import AttemptPrinter, Interrupts, run_attempt
from triage.commands.retry.models import (
    AttemptRecord,
    Change,
    Launch,
    PlanStep,
    RetryPlan,
    RetrySummary,
    Skipped,
)
from triage.commands.retry.plan import Decision, Plan, dry_run
from triage.commands.retry.summary import summarize
from triage.commands.run import default_log_name
from triage.commands.watch import WatchOptions, check_options, note, open_output
from triage.core.errors import EXIT_FAILURE, TriageError
from triage.core.models import Report
from triage.core.shellwords import split_command

_STOPPED = {
    "ready": "attempt {n} is ready",
    "served": "attempt {n} was ready and served until it {how}",
    "interrupted": "stopped by the operator during attempt {n}",
    "timeout": "attempt {n} timed out before it was ready (a hang: no workaround is applied for it)",
    "exited": "attempt {n} ended with no failure in its log (status {status}): nothing to work around",
}


def attempt_log(base: str, index: int) -> str:
    return base if index == 0 else f"{base}.{index}"


def retry_command(command: list[str], log_path: str | None, opts: WatchOptions, retries: int) -> int:
    """Relaunch with workarounds until an attempt holds; the summary (and JSON events) on stdout
    or in the -o file."""
    with open_output(opts.output, log_path or "") as stream:
        return _retry(command, log_path, opts, retries, stream)


def _retry(command: list[str], log_path: str | None, opts: WatchOptions, retries: int, stream: IO[str] | None) -> int:
    from triage.catalogue.load import load_catalogue

    check_options(opts)
    if retries < 1:
        raise TriageError(f"--retry must be at least 1 (got {retries})")
    if not command:
        raise TriageError("no command to run (usage: triage run --retry N [OPTIONS] -- COMMAND ...)")
    base = log_path or default_log_name()
    cat = load_catalogue(opts.catalogue_dirs, cache=True)  # as watch's Watcher loads it
    plan = Plan(Launch(argv=list(command)), cat, os.environ)
    out = AttemptPrinter(opts.fmt, redact=opts.redact, redact_ips=opts.redact_ips, stream=stream,
                         stream_name=opts.output)
    attempts: list[AttemptRecord] = []
    reports: list[Report | None] = []
    not_applied: list[Skipped] = []
    stopped = ""
    change: Change | None = None
    with Interrupts() as guard:
        while True:
            n = len(attempts) + 1
            if guard.signum is not None:
                stopped = f"stopped by the operator before attempt {n}"
                break
            launch = plan.launch()
            rec = AttemptRecord(number=n, command=launch.shell(), launch=launch, log=attempt_log(base, n - 1),
                                change=change)
            _announce(rec, out)
            reports.append(run_attempt(rec, opts, out, guard, cat))
            attempts.append(rec)
            if rec.end != "failed":
                how = "exited cleanly" if rec.status == 0 else "was stopped"
                stopped = _STOPPED.get(rec.end, "attempt {n} ended").format(n=n, status=rec.status, how=how)
                break
            decision = plan.next(reports[-1]) if reports[-1] is not None else Decision(None, reason="no log")
            if decision.change is None:
                stopped = f"attempt {n} failed: {decision.reason}"
                not_applied = decision.skipped
                break
            if n > retries:
                stopped = (f"attempt {n} failed and no relaunch is left (--retry {retries}); the next change would "
                           f"have been {decision.change.workaround}: {decision.change.describe()}")
                break
            change = decision.change
            _relaunch(n + 1, decision, out)
    summary = summarize(attempts, reports, [a.change for a in plan.applied], stopped, not_applied, opts.until)
    if not attempts and guard.signum is not None:
        summary.exit_code = 128 + guard.signum
    _print_summary(summary, opts, out)
    return summary.exit_code


def _announce(rec: AttemptRecord, out: AttemptPrinter) -> None:
    # the command from the masked argv: masking the printed line missed a value holding a quote
    launch = _redacted_launch(rec.launch, out.out)
    note(f"attempt {rec.number}: {launch.shell()}")
    note(f"attempt {rec.number}: logging to {rec.log}")
    out.attempt = rec.number
    if out.json:
        out.event({"event": "attempt", "command": launch.shell(), "argv": launch.argv, "env": launch.env,
                   "log": rec.log})


def _redacted_launch(launch: Launch, out: Output) -> Launch:
    """Flag and value together (`--api-key KEY`), before the strings are walked one by one."""
    if not out.redact:
        return launch
    return Launch(argv=out.argv(launch.argv), env=out.env(launch.env))


def _relaunch(n: int, d: Decision, out: AttemptPrinter) -> None:
    """What changes and why, before the next attempt starts."""
    c = d.change
    assert c is not None
    note(f"{c.signature}: {c.finding}")
    for s in c.passed_over:
        note(f"  not applying {s.workaround}: {s.reason}")
    note(f"relaunching as attempt {n} with {c.workaround} ({c.title}): {c.describe()}")
    if c.note:
        note(f"  {c.note}")
    note(f"  cost: {c.cost}")
    if out.json:
        out.attempt = n
        out.event({"event": "relaunch", "change": c.model_dump(mode="json")})


def _print_summary(summary: RetrySummary, opts: WatchOptions, out: AttemptPrinter) -> None:
    from triage.commands.retry import render as retry_out

    red = Output(redact=opts.redact, ips=opts.redact_ips)
    if red.redact:
        for a in summary.attempts:
            a.launch = _redacted_launch(a.launch, red)
            a.command = a.launch.shell()
        if summary.held is not None:
            summary.command = summary.attempts[summary.held - 1].command
        summary = RetrySummary.model_validate(red.data(summary.model_dump()))
    text = retry_out.summary_json(summary) if opts.fmt == "json" else retry_out.summary_markdown(summary)
    out.write(text, markdown=opts.fmt != "json")


def plan_from_log(log: str, command: list[str], opts: WatchOptions, retries: int) -> int:
    """`--dry-run`: the changes that would be made for the failure in an existing log, in order.
    Exit 0 when there is at least one, 1 when the loop would not relaunch."""
    from triage.catalogue.load import load_catalogue
    from triage.pipeline.analyze import analyze_file
    from triage.pipeline.recommend import launch_args

    if retries < 1:
        raise TriageError(f"--retry must be at least 1 (got {retries})")
    if not os.path.isfile(log):
        raise TriageError(f"--log {log}: no such file (with --dry-run, --log names the log of the failed server)")
    cat = load_catalogue(opts.catalogue_dirs, cache=True)  # as watch's Watcher loads it
    report = analyze_file(log, cat)
    env = report.environment
    argv = list(command) or (split_command(env.launch_command) if env.launch_command else launch_args(env) or [])
    if not argv:
        raise TriageError(f"{log} does not print the launch configuration: give the command after --")
    base = Launch(argv=argv)
    decisions = dry_run(report, cat, base, os.environ, retries)
    chosen = {d.change.workaround for d in decisions if d.change is not None}
    # the simulation passes over each chosen workaround again as "tried": not worth listing
    skipped = {s.workaround: s for d in decisions for s in d.skipped if s.workaround not in chosen}
    out = Output(redact=opts.redact, ips=opts.redact_ips)
    # commands from masked argvs (a value holding a quote is one word there, not in the printed line)
    plan = RetryPlan(log=log, command=_redacted_launch(base, out).shell(), command_from_log=not command,
                     retries=retries, not_applied=list(skipped.values()))
    top = decisions[0].finding if decisions else None
    if top is not None:
        plan.finding = f"{top.signature}: {top.title}"
    for i, d in enumerate(decisions):
        if d.change is not None and d.launch is not None:
            plan.steps.append(PlanStep(attempt=i + 2, change=d.change, command=_redacted_launch(d.launch, out).shell()))
    last = decisions[-1] if decisions else None
    if not plan.steps:
        plan.then = f"no relaunch: {last.reason if last is not None else 'no failure in the log'}"
    elif last is not None and last.change is None:
        plan.then = f"if the failure comes back in attempt {len(plan.steps) + 1}, stop: {last.reason}"
    else:
        plan.then = f"if the failure comes back in attempt {len(plan.steps) + 1}, stop: no relaunch left (--retry {retries})"
    from triage.commands.retry import render as retry_out

    plan = RetryPlan.model_validate(out.data(plan.model_dump()))
    from triage.commands.output import write_output

    text = retry_out.plan_json(plan) if opts.fmt == "json" else retry_out.plan_markdown(plan)
    write_output(text, Path(opts.output) if opts.output else None, [log], markdown=opts.fmt != "json")
    return 0 if plan.steps else EXIT_FAILURE
