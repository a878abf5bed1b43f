"""Which logs the golden check covers and how their JSON is produced: the same library call
as `triage analyze LOG --format json` (default redaction, one worker), run in process."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

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


def current_json() -> Iterator[tuple[str, str]]:
    """(log, its JSON) for every covered log, paths relative to the repository as a user in
    its root would type them. What is pinned is the log's report (`reports[0]` of the
    envelope); the envelope around it has its own test (test_conventions)."""
    from triage.catalogue.load import load_catalogue
    from triage.commands.analyze import analyze_logs, document
    from triage.pipeline.analyze import Options

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        cat = load_catalogue()
        opts = Options(workers=1)
        for log in logs():
            report = document(analyze_logs([log], cat, opts, jobs=1))["reports"][0]
            # re-dumped with sorted keys so that a field moving inside a model is not a change
            yield log, json.dumps(report, indent=1, sort_keys=True) + "\n"
    finally:
        os.chdir(here)
