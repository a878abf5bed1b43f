"""Which logs the golden check covers and how their JSON is produced: the same library call
as `triage analyze LOG --format json` (default redaction, one worker), run in process."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from triage.core.models import Report

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
GROUPS = {  # golden sub-folder -> the logs it holds, relative to the repository
    "examples": "examples/*.log",
    "fixtures": "tests/fixtures/*.log*",
    "shapes": "tests/fixtures/shapes/*.log",
    "corpus": "tests/corpus/cases/*.log",
}


def logs() -> list[str]:
    return [p.relative_to(ROOT).as_posix() for pat in GROUPS.values() for p in sorted(ROOT.glob(pat))]


def golden_path(log: str) -> Path:
    for group, pat in GROUPS.items():
        if Path(log).match(pat):
            return GOLDEN / group / (Path(log).name.removesuffix(".gz").removesuffix(".log") + ".json")
    raise ValueError(f"{log} is in no golden group")


@cache
def analysed() -> list[tuple[str, Report, Report, str]]:
    """(log, its report, the redacted report, its JSON) for every covered log, paths relative
    to the repository as a user in its root would type them. Each log is analysed once per
    process: the golden check and the report linter (tests/report_linter.py) read the same pass.
    What is pinned is the log's report (`reports[0]` of the envelope); the envelope around it
    has its own test (test_conventions)."""
    from triage.catalogue.load import load_catalogue
    from triage.commands.analyze import analyze_logs, document
    from triage.pipeline.analyze import Options
    from triage.pipeline.redact import redact_report

    here = os.getcwd()
    os.chdir(ROOT)
    out = []
    try:
        cat = load_catalogue()
        opts = Options(workers=1)
        for log in logs():
            # `triage analyze LOG --format json`: analyze_logs, whose last step with the default
            # redaction is this redact_report, and the envelope's report
            result = analyze_logs([log], cat, opts, jobs=1, redact=False)
            rep = result.reports[0]
            red = redact_report(rep)
            result.reports = [red]
            report = document(result)["reports"][0]
            # re-dumped with sorted keys so that a field moving inside a model is not a change
            out.append((log, rep, red, json.dumps(report, indent=1, sort_keys=True) + "\n"))
    finally:
        os.chdir(here)
    return out


def current_json() -> Iterator[tuple[str, str]]:
    """(log, its JSON) for every covered log (see analysed)."""
    for log, _rep, _red, text in analysed():
        yield log, text
