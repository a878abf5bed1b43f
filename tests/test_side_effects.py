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


class _Terminal:
    """A stderr that says it is a terminal and records what is written to it."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_the_library_draws_no_progress_line_the_cli_asks_for_one(tmp_path, monkeypatch):
    """A big log on a terminal: the CLI's Options(progress=True) draws a progress line on
    stderr; the library's default draws nothing (it used to, for any file over 100 MB)."""
    import triage.core.progress as progress

    monkeypatch.setattr(progress, "MIN_BYTES", 1)  # every file is "big"
    log = tmp_path / "server.log"
    log.write_text(LOG)
    cat = load_catalogue()
    for asked in (False, True):
        term = _Terminal()
        monkeypatch.setattr(sys, "stderr", term)
        report = pipeline.analyze_file(str(log), cat, pipeline.Options(workers=1, progress=asked))
        monkeypatch.undo()
        monkeypatch.setattr(progress, "MIN_BYTES", 1)
        assert report.failures[0].exception == "RuntimeError"
        assert ("scanning" in term.text) is asked, term.text


def test_the_library_writes_nothing_under_home_or_the_cache(tmp_path):
    """`triage.analyze()` in a fresh interpreter, HOME and XDG_CACHE_HOME pointed at empty
    directories: both stay empty (the catalogue cache is the command line's, not the library's)."""
    import os
    import subprocess

    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    cache.mkdir()
    log = tmp_path / "server.log"
    log.write_text(LOG)
    code = "import sys, triage; print(triage.analyze(sys.argv[1]).failures[0].exception)"
    env = {k: v for k, v in os.environ.items() if k != "TRIAGE_NO_CACHE"}
    p = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, timeout=60, cwd=tmp_path,
                       env={**env, "HOME": str(home), "XDG_CACHE_HOME": str(cache)})
    assert p.stdout.strip() == b"RuntimeError", p.stderr
    assert p.stderr == b""
    assert not list(home.rglob("*")) and not list(cache.rglob("*"))
    assert sorted(x.name for x in tmp_path.iterdir()) == ["cache", "home", "server.log"]
