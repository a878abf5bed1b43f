"""The JSON contract of `triage analyze --format json`, as a pydantic model: what `triage schema
report` publishes and what the tests validate every JSON report against.

The JSON itself is written from plain data (commands/analyze.py `document`); this model is
imported only by those two, so that a run does not build its validators.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from triage.commands.analyze import SCHEMA
from triage.commands.many import Summary
from triage.core.models import Failure, Finding, Report


class Document(BaseModel):
    """What `triage analyze --format json` prints, for one log or many: the same envelope.

    For a single log the report's own fields (`source`, `environment`, `timeline`, ...) are
    repeated at the top level too, so that scripts written against the one-log shape of 0.1
    keep working; new scripts read `reports`."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_id: str = Field(default=SCHEMA, alias="schema", description="Name and version of this contract.")
    triage_version: str = Field(description="The triage release that wrote the document.")
    exit_code: int = Field(description="0: no failure in any log; 1: a failure; 2: a log could not be read.")
    reports: list[Report] = Field(description="One report per log, in input order.")
    summary: Summary = Field(description="Failures grouped across logs; logs that could not be read.")
    failures: list[Failure] = Field(description="Every report's failures, in report order (each names its source).")
    findings: list[Finding] = Field(description="Every report's findings, in report order (each names its source).")
