"""Behaviour is pinned: every bundled log gives the JSON kept in tests/golden.

A failure here means users would see a different report. If the change is intended, run
`python scripts/golden.py --diff`, read the diff, then `python scripts/golden.py --update`
and commit the golden files with the change that moved them."""

from __future__ import annotations

from golden_logs import GOLDEN, analysed, current_json, golden_path, logs
from report_linter import violations


def test_every_bundled_log_has_a_golden_report():
    expected = {golden_path(log) for log in logs()}
    kept = set(GOLDEN.rglob("*.json"))
    assert not expected - kept, f"no golden report for {sorted(expected - kept)[:5]}: run scripts/golden.py --update"
    assert not kept - expected, f"golden reports for logs that are gone: {sorted(kept - expected)[:5]}"


def test_json_reports_match_the_golden_files():
    changed = [log for log, text in current_json()
               if not golden_path(log).exists() or golden_path(log).read_text(encoding="utf-8") != text]
    assert not changed, (f"{len(changed)} report(s) changed, first {changed[:5]}; "
                         "see `python scripts/golden.py --diff`, then --update if intended")


def test_bundled_reports_break_no_rule_of_the_report_linter(catalogue):
    """Every bundled log's report (the corpus, the examples, the fixtures and shapes) against
    the report linter: the advice rules of issue 32 as invariants."""
    cases = analysed()
    assert len(cases) > 250
    found = {log: bad for log, rep, red, _ in cases if (bad := violations(rep, red, catalogue))}
    assert found == {}
