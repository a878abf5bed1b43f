"""triage: crash triage and workaround recommendations for LLM inference server logs.

Library use mirrors the CLI:

    from triage import analyze
    report = analyze("sglang-server.log")
    print(report.failures[0].exception, report.findings[0].signature)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from triage.core.version import __version__

__all__ = ["analyze", "__version__"]

if TYPE_CHECKING:
    from triage.core.models import Report


def analyze(path: str, extra_catalogues: list[str] | None = None, version: str | None = None,
            command: str | None = None, redact: bool = False) -> Report:
    """Analyse one log (path, or `-` for stdin) and return the Report the CLI renders.

    Unlike the CLI, secrets are left in unless `redact` is asked for: the caller decides what
    leaves the process. Many logs at once: triage.commands.analyze.analyze_logs."""
    from triage.catalogue.load import load_catalogue
    from triage.commands.analyze import analyze_logs
    from triage.pipeline.analyze import Options

    result = analyze_logs([path], load_catalogue(extra_catalogues), Options(version=version, command=command),
                          redact=redact)
    return result.reports[0]
