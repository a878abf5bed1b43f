"""Which logs the golden check covers and how their JSON is produced: the same steps as
`triage analyze LOG --format json` (default redaction, one worker), run in process."""

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
    its root would type them."""
    from triage.catalogue.load import load_catalogue
    from triage.pipeline.analyze import Options, analyze
    from triage.pipeline.redact import redact_report
    from triage.render.json_out import render_json

    here = os.getcwd()
    os.chdir(ROOT)
    try:
        cat = load_catalogue()
        opts = Options(workers=1)
        for log in logs():
            report = redact_report(analyze(log, cat, opts))
            # re-dumped with sorted keys so that a field moving inside a model is not a change
            yield log, json.dumps(json.loads(render_json(report)), indent=1, sort_keys=True) + "\n"
    finally:
        os.chdir(here)
