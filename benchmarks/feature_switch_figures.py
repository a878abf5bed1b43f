#!/usr/bin/env python3
"""What the feature map's derived switches do on the real-log corpus, per split.

usage: python3 benchmarks/feature_switch_figures.py [--corpus tests/corpus] [--json]

Per split: reports with a process-level failure, reports where the failing stack runs through a
mapped feature, reports offered a derived switch, reports where a feature was found already off,
and the ranking check: reports where a derived switch stands above a catalogue workaround of a
specific (non-generic) signature's finding (must be 0), and above a generic one's (by design).
Reads only each case's log and the `split:` line of its label; names no case.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from triage.catalogue.load import load_catalogue  # noqa: E402
from triage.pipeline.analyze import analyze_file  # noqa: E402


def _split(label: Path) -> str | None:
    for line in label.read_text(encoding="utf-8").splitlines():
        if line.startswith("split:"):
            return line.split(":", 1)[1].strip()
    return None


def _above(workarounds: list) -> bool:  # noqa: ANN001 - Workaround records
    """A derived switch ahead of a catalogue workaround in one finding's list."""
    seen_switch = False
    for w in workarounds:
        if w.source == "feature-switch":
            seen_switch = True
        elif w.source == "catalogue" and seen_switch:
            return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT / "tests" / "corpus"))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cat = load_catalogue()
    keys = ("reports", "fatal", "feature_on_stack", "switch_offered", "already_off", "above_specific", "above_generic")
    figures: dict[str, dict[str, int]] = {}
    by_feature: dict[str, int] = {}
    for log in sorted(Path(a.corpus, "cases").glob("*.log")):
        split = _split(log.with_suffix(".yaml"))
        if split not in ("dev", "test"):
            continue
        t = figures.setdefault(split, dict.fromkeys(keys, 0))
        r = analyze_file(str(log), catalogue=cat)
        t["reports"] += 1
        fatal = r.fatal_failures
        t["fatal"] += bool(fatal)
        t["feature_on_stack"] += any(f.features for f in fatal)
        t["switch_offered"] += any(f.switches for f in fatal)
        t["already_off"] += any(x.state == "off" for f in fatal for x in f.features)
        t["above_specific"] += any(_above(x.workarounds) for x in r.findings if not x.generic)
        t["above_generic"] += any(_above(x.workarounds) for x in r.findings if x.generic)
        for f in fatal:
            for w in f.switches:
                by_feature[w.feature or "?"] = by_feature.get(w.feature or "?", 0) + 1
    if a.json:
        print(json.dumps({"splits": figures, "switches_by_feature": by_feature}, indent=2))
        return 0
    print("| figure | " + " | ".join(sorted(figures)) + " |")
    print("|---|" + "---|" * len(figures))
    for k in keys:
        print(f"| {k} | " + " | ".join(str(figures[s][k]) for s in sorted(figures)) + " |")
    print("\nderived switches offered, by feature (both splits): "
          + ", ".join(f"{k} {v}" for k, v in sorted(by_feature.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
