"""The summary of a `run --retry`: which attempt held, with what, at what measured cost."""

from __future__ import annotations

from triage.commands.retry.models import AttemptRecord, Change, Measure, RetrySummary, Skipped
from triage.core.errors import EXIT_FAILURE
from triage.core.models import Report


def hit_rate(report: Report | None) -> str | None:
    pc = report.timeline.prefix_cache if report is not None else None
    if not pc:
        return None
    where = f", in the last {pc['window_mib']:g} MiB of log" if "window_mib" in pc else ""
    return (f"{pc['hit_rate']:.1f}% ({int(pc['cached_tokens']):,} of {int(pc['prompt_tokens']):,} prompt tokens "
            f"from the cache{where})")


def throughput(report: Report | None) -> str | None:
    """The last generation throughput the log printed, with the load it was printed at: two
    attempts' figures compare only at a similar number of running requests."""
    last = report.timeline.last_load if report is not None else None
    if last is None or last.throughput is None:
        return None
    at = f" at {last.running} running requests" if last.running is not None else ""
    return f"{last.throughput:g} tok/s{at} (line {last.line})"


def measure(first: Report | None, held: Report | None, held_served: bool) -> list[Measure]:
    """Before: the command as given (attempt 1), up to its failure. After: the attempt that held.
    An attempt watched only until ready has served no load, so it has no "after" figures."""
    out = []
    for name, fn in (("prefix-cache hit rate", hit_rate), ("generation throughput (last reported)", throughput)):
        before, after = fn(first), fn(held) if held_served else None
        if before is not None or after is not None:
            out.append(Measure(name=name, before=before, after=after))
    return out


def summarize(attempts: list[AttemptRecord], reports: list[Report | None], workarounds: list[Change],
              stopped: str, not_applied: list[Skipped], until: str) -> RetrySummary:
    s = RetrySummary(attempts=attempts, stopped=stopped, not_applied=not_applied, until=until)
    held = next((a for a in attempts if a.held), None)
    if held is not None:
        s.held = held.number
        s.workarounds = workarounds
        s.command = held.command
        s.cost = measure(reports[0], reports[held.number - 1], held.end == "served") if held.number > 1 else []
        s.exit_code = 0
    elif attempts:
        last = attempts[-1]
        s.exit_code = last.exit_code if last.exit_code is not None else EXIT_FAILURE
    else:
        s.exit_code = EXIT_FAILURE
    return s
