"""`--baseline OTHER.log`: compare a log with an earlier or healthy start of the same server.

Two answers: was this start slower (to ready, and per phase), and which warning and error
lines does this log have that the baseline never printed (where an unknown crash's cause
often shows).
"""

from __future__ import annotations

from triage.catalogue.load import Catalogue
from triage.core.models import BaselineComparison, NovelLine, PhaseDelta, Report
from triage.pipeline.analyze import Options, analyze_file

SLOWER_RATIO = 1.25  # and at least SLOWER_SECONDS more, so a 4 s -> 6 s blip is not flagged
SLOWER_SECONDS = 10.0


def _slower(now: float | None, before: float | None) -> bool:
    return now is not None and before is not None and now > before * SLOWER_RATIO and now - before >= SLOWER_SECONDS


def compare(report: Report, baseline_path: str, cat: Catalogue, opts: Options) -> None:
    from triage.commands.novel import novel, warning_lines

    base = analyze_file(baseline_path, cat, Options(**{**opts.__dict__, "command": None}))
    cmp = BaselineComparison(source=baseline_path, ready_seconds=report.timeline.ready_seconds,
                             baseline_ready_seconds=base.timeline.ready_seconds)
    cmp.slower = _slower(cmp.ready_seconds, cmp.baseline_ready_seconds)
    before = {p.name: p.seconds for p in base.timeline.phases}
    for p in report.timeline.phases:
        b = before.get(p.name)
        cmp.phases.append(PhaseDelta(name=p.name, seconds=p.seconds, baseline_seconds=b, slower=_slower(p.seconds, b)))
    if report.source != "-":
        cmp.novel = [NovelLine(template=t, count=n, line=first)
                     for t, n, first in novel(warning_lines(report.source), warning_lines(baseline_path))]
    report.baseline = cmp
