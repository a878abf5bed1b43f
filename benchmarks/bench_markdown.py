#!/usr/bin/env python3
"""Markdown against JSON on a log of N distinct tracebacks (issue 35): the Markdown report must
be linear in failures, within 2x of the JSON one.

usage: python3 benchmarks/bench_markdown.py [--tracebacks 10000,100000] [--json]

The log is bench_hostile.py's `tracebacks` case. The analysis runs once per N (in this process,
one scanning process, no catalogue cache), then each format is rendered from the same result;
a run of `triage analyze` is the analysis plus one rendering, so both are given. Before the
fix the template looked each request-level failure up with `failures.index(f)` (a deep
`__eq__` over every failure before it): 10k tracebacks took 136 s in Markdown against 12.6 s
in JSON, and 20k never finished.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _hostile():  # noqa: ANN202 - the sibling script, as a module
    spec = importlib.util.spec_from_file_location("bench_hostile", ROOT / "benchmarks" / "bench_hostile.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bench(path: Path, n: int) -> dict:
    from triage.commands.analyze import analyze_logs, render
    from triage.pipeline.analyze import Options

    t = time.perf_counter()
    result = analyze_logs([str(path)], options=Options(workers=1), jobs=1)
    analysis = time.perf_counter() - t
    row: dict = {"tracebacks": n, "failures": len(result.reports[0].failures), "analysis_s": round(analysis, 2)}
    for fmt in ("json", "markdown"):
        t = time.perf_counter()
        text = render(result, fmt)
        dt = time.perf_counter() - t
        row[f"{fmt}_render_s"] = round(dt, 2)
        row[f"{fmt}_total_s"] = round(analysis + dt, 2)
        row[f"{fmt}_mb"] = round(len(text) / 1e6, 1)
    row["total_ratio"] = round(row["markdown_total_s"] / row["json_total_s"], 2)
    row["render_ratio"] = round(row["markdown_render_s"] / max(row["json_render_s"], 1e-6), 2)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tracebacks", default="10000,100000")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.environ["TRIAGE_NO_CACHE"] = "1"
    hostile = _hostile()
    rows = []
    with tempfile.TemporaryDirectory(prefix="triage-md-") as tmp:
        for n in (int(x) for x in a.tracebacks.split(",")):
            f = Path(tmp) / f"tracebacks-{n}.log"
            hostile.distinct_tracebacks(f, n)
            rows.append(bench(f, n))
            f.unlink()
            if not a.json:
                r = rows[-1]
                print(f"{n:>7} tracebacks ({r['failures']} failures): analysis {r['analysis_s']} s; "
                      f"JSON {r['json_total_s']} s (render {r['json_render_s']} s, {r['json_mb']} MB); "
                      f"Markdown {r['markdown_total_s']} s (render {r['markdown_render_s']} s, {r['markdown_mb']} MB); "
                      f"Markdown/JSON {r['total_ratio']}x", flush=True)
    if a.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
