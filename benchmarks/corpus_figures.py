#!/usr/bin/env python3
"""Dev and test figures of the real-log corpus, side by side, per engine.

usage: python3 benchmarks/corpus_figures.py [--corpus tests/corpus] [--json]

The test split is the honest figure (no signature author read those threads); the dev split is
what signatures were written against. A catalogue that scores well on dev and badly on test is
tuned to the cases at hand. Also prints the test split restricted to threads that no signature
cites in its references ("unseen"), since entries written before the corpus existed may cite a
thread that later landed in the test split.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from triage.catalogue.load import load_catalogue  # noqa: E402
from triage.commands.catalogue.backtest import METRIC_TITLES, METRICS, Tally, backtest, load_cases  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
from corpus_split import thread_key  # noqa: E402


def cell(t: Tally | None, m: str) -> str:
    if t is None or not t.totals.get(m):
        return "-"
    return f"{t.hits.get(m, 0)}/{t.totals[m]} ({100.0 * t.hits.get(m, 0) / t.totals[m]:.0f}%)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT / "tests" / "corpus"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    dev = backtest(a.corpus, "dev")
    test = backtest(a.corpus, "test")
    cited = {thread_key(r) for s in load_catalogue().signatures.values() for r in s.spec.references}
    unseen_ids = {c.label.id for c in load_cases(a.corpus, "test") if thread_key(c.label.source) not in cited}
    unseen = Tally()
    for s in test.scores:
        if s.id in unseen_ids:
            unseen.add(s.scores)
    if a.json:
        doc = {"dev": dev.model_dump(mode="json")["total"], "test": test.model_dump(mode="json")["total"],
               "test_unseen": unseen.model_dump(mode="json"), "unseen_cases": len(unseen_ids),
               "by_engine": {"dev": {e: t.model_dump() for e, t in dev.by_engine.items()},
                             "test": {e: t.model_dump() for e, t in test.by_engine.items()}}}
        print(json.dumps(doc, indent=2))
        return 0
    print(f"# Corpus figures: dev {dev.cases} cases, test {test.cases} cases "
          f"({len(unseen_ids)} test cases from threads no signature cites)\n")
    print("| metric | dev | test | test, uncited threads |")
    print("|---|---|---|---|")
    for m in METRICS:
        print(f"| {METRIC_TITLES[m]} | {cell(dev.total, m)} | {cell(test.total, m)} | {cell(unseen, m)} |")
    engines = sorted(set(dev.by_engine) | set(test.by_engine))
    for m in ("detected", "recognised", "right1", "fixany", "clean"):
        print(f"\n**{METRIC_TITLES[m]}, per engine**\n")
        print("| engine | dev | test |")
        print("|---|---|---|")
        for e in engines:
            print(f"| {e} | {cell(dev.by_engine.get(e), m)} | {cell(test.by_engine.get(e), m)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
