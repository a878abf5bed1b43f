"""triage: crash triage and workaround recommendations for LLM inference server logs.

Library use mirrors the CLI:

    from triage import analyze
    report = analyze("sglang-server.log")
    print(report.failures[0].exception, report.findings[0].signature)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["analyze", "__version__"]

if TYPE_CHECKING:
    from triage.core.models import Report


def analyze(path: str, extra_catalogues: list[str] | None = None, version: str | None = None,
            command: str | None = None) -> Report:
    """Analyse one log (path, or `-` for stdin) and return the Report the CLI renders."""
    from triage.pipeline.analyze import Options
    from triage.pipeline.analyze import analyze as _analyze

    return _analyze(path, options=Options(version=version, command=command), extra_catalogues=extra_catalogues)
