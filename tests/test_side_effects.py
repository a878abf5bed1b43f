"""The library has no module state with side effects: it prints nothing (what the CLI should
say is returned), and parallel work gets its inputs as arguments, not through globals set in
the calling process."""

from __future__ import annotations

import json
import sys

from triage.catalogue.load import load_catalogue
from triage.pipeline import analyze as pipeline
from triage.pipeline.scan import Prefilter

LOG = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nRuntimeError: boom\n"


def test_scanner_fallback_is_a_returned_note_not_a_print(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # `import hyperscan` now fails
    pipeline._prefilter.cache_clear()
    try:
        report = pipeline.analyze_text(LOG, load_catalogue())
    finally:
        pipeline._prefilter.cache_clear()
    assert report.diagnostics == ["Hyperscan is not installed; using the portable scanner (about 5x slower on big logs)"]
    assert capsys.readouterr().err == ""
    assert "diagnostics" not in json.loads(report.model_dump_json())  # about the run, not the log


def test_prefilter_says_why_it_fell_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "hyperscan", None)
    pf = Prefilter(["RuntimeError"], prefer_hyperscan=True)
    assert pf.engine == "re" and pf.note and "not installed" in pf.note
    assert Prefilter(["RuntimeError"], prefer_hyperscan=False).note is None


def test_workers_take_their_inputs_as_arguments():
    import triage.commands.catalogue.backtest as backtest
    import triage.commands.many as many
    import triage.pipeline.scan as scan

    # the worker slots exist only in pool processes; analysing in this process leaves them unset
    pipeline.analyze_text(LOG, load_catalogue())
    assert scan._worker is None and many._worker is None and backtest._worker_catalogue is None
