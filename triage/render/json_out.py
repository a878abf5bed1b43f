"""Render a Report as JSON: the contract scripts depend on (see models.py)."""

from __future__ import annotations

import json

from triage.core.models import Report


def report_dict(r: Report) -> dict:
    d = r.model_dump(mode="json")
    d["exit_code"] = r.exit_code
    return d


def render_json(r: Report | list[Report], summary: dict | None = None) -> str:
    if isinstance(r, list):
        doc: dict = {"reports": [report_dict(x) for x in r]}
        if summary is not None:
            doc["summary"] = summary
        # the single-log fields, merged, so that one contract serves both shapes
        doc["failures"] = [f for x in doc["reports"] for f in x["failures"]]
        doc["findings"] = [f for x in doc["reports"] for f in x["findings"]]
    else:
        doc = report_dict(r)
    # ensure_ascii keeps the output valid and printable whatever bytes the log held
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
