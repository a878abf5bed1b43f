"""Render a backtest result: Markdown for reviewers, JSON for pipelines."""

from __future__ import annotations

import json

from triage.commands.catalogue.backtest import METRIC_TITLES, METRICS, BacktestResult, Tally


def _cell(t: Tally, metric: str) -> str:
    total = t.totals.get(metric, 0)
    if not total:
        return "-"
    return f"{t.hits.get(metric, 0)}/{total} ({100.0 * t.hits.get(metric, 0) / total:.0f}%)"


def render_markdown(r: BacktestResult, failed: list[str] | None = None) -> str:
    out = [f"# Backtest: {r.corpus} ({r.split} split, {r.cases} cases)", ""]
    engines = list(r.by_engine)
    out.append("| metric | all | " + " | ".join(engines) + " |")
    out.append("|---|---|" + "---|" * len(engines))
    for m in METRICS:
        out.append(f"| {METRIC_TITLES[m]} | {_cell(r.total, m)} | "
                   + " | ".join(_cell(r.by_engine[e], m) for e in engines) + " |")
    out.append("")
    if r.held_back:
        out.append(f"The figures count {r.held_back} test-split cases; the lists below leave them out, so that "
                   "the held-out logs stay unread while signatures are written (--show-test names them).")
        out.append("")
    missed = {k: v for k, v in r.misses.items() if v or r.held_back_misses.get(k)}
    if missed:
        out.append("## Misses by cause")
        out.append("")
        by_id = {s.id: s for s in r.scores}
        for cause, ids in missed.items():
            n_held = r.held_back_misses.get(cause, 0)
            named = ", ".join(
                f"{i}" + (f" (got {by_id[i].top}, want {'/'.join(by_id[i].expected)})"
                          if cause == "wrong signature" else "") for i in ids)
            tail = (f"{'; and ' if ids else ''}{n_held} test-split case{'s' if n_held != 1 else ''}, not named"
                    if n_held else "")
            out.append(f"- **{cause}** ({len(ids) + n_held}): {named}{tail}")
        out.append("")
    if r.errors:
        out.append("## Cases the pipeline refused")
        out.append("")
        out.extend(f"- {e}" for e in r.errors)
        out.append("")
    if r.changes is not None:
        changed = len(r.changes) + r.held_back_changes
        held = f", of which {r.held_back_changes} test-split cases, not listed" if r.held_back_changes else ""
        out.append(f"## Against {r.against}: {changed} changed{held}, {r.unchanged} same")
        out.append("")
        if r.changes:
            out.append("| case | split | original | new |")
            out.append("|---|---|---|---|")
            out.extend(f"| {c.id} | {c.split} | {c.original} | {c.new} |" for c in r.changes)
            out.append("")
    if failed:
        out.append("**Below threshold:** " + "; ".join(failed))
        out.append("")
    return "\n".join(out)


def render_json(r: BacktestResult, failed: list[str] | None = None) -> str:
    doc = r.model_dump(mode="json")
    doc["percent"] = {m: r.total.percent(m) for m in METRICS}
    doc["below_threshold"] = failed or []
    return json.dumps(doc, indent=2) + "\n"
