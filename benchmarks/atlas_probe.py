#!/usr/bin/env python3
"""The source atlas on messages nobody tuned it to: a probe set of real failures from public threads.

usage: python3 benchmarks/atlas_probe.py [--probe benchmarks/data/atlas-probe.jsonl] [--list]

Each line of the probe file is one failure pasted into a public GitHub thread (`url`), as the
thread shows it (`log`: the exception line and the traceback above it, byte-exact), with the
engine, the version the thread names, where the message's text comes from (`origin`: engine,
library, torch, native, python, other) and, for an engine or library message, the file the
released source raises it in (`site`, found with scripts/release_grep.py). The set was collected
by someone who did not run triage on it, taking every thread in search order (see
benchmarks/data/README.md), so its mix of origins is the mix real threads have.

The figures: of the failures whose message the atlas could hold (origin engine or library),
how many `analyze` locates, and in the expected file; of the others, how many it locates anyway
(each is a wrong location unless the file matches). `--list` names the misses.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from triage.catalogue.load import load_catalogue  # noqa: E402
from triage.pipeline.analyze import Options, analyze_text  # noqa: E402

HOLDABLE = ("engine", "library")
# A thread's paste is often the traceback alone; the server's whole log would have said which
# engine (and release) wrote it, so each excerpt gets the start-up line that engine prints
BANNER = {
    "vllm": "INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version {version}",
    "sglang": "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='model')",
    "lmdeploy": "2025-01-01 00:00:00,000 - lmdeploy - INFO - lmdeploy serve api_server model",
}


def _in_paste(r: dict) -> bool:
    msg = r["message"]
    body = msg.split(": ", 1)[1] if ": " in msg[:60] else msg
    return body[:30] in r["log"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", default=str(ROOT / "benchmarks" / "data" / "atlas-probe.jsonl"))
    ap.add_argument("--list", action="store_true", help="name each miss and each unexpected location")
    a = ap.parse_args()
    cat = load_catalogue()
    rows = [json.loads(x) for x in Path(a.probe).read_text().splitlines() if x.strip()]
    tally: Counter = Counter()
    misses: list[str] = []
    for r in rows:
        log = r["log"] if r["log"].endswith("\n") else r["log"] + "\n"
        banner = BANNER.get(r["engine"])
        if banner:
            log = banner.format(version=r.get("version") or "") + "\n" + log
        # the thread names the release; the log excerpt often does not
        opts = Options(version=str(r["version"])) if r.get("version") else Options()
        rep = analyze_text(log, cat, name=r["url"], options=opts)
        sites = [s for f in rep.failures for s in f.raised_at]
        want = (r.get("site") or {}).get("file")
        holdable = r["origin"] in HOLDABLE
        # the thread's excerpt may stop before the exception line (its message then comes from
        # the thread's title): no locator can find what the log does not hold
        shown = _in_paste(r)
        key = ("holdable" if holdable else "not holdable") if shown else "not in the paste"
        tally[key, "cases"] += 1
        if sites:
            tally[key, "located"] += 1
            # `site.file` lists every file the text is in, across the cached releases
            files = [w.strip() for w in (want or "").split(";") if w.strip()]
            right = any(s.file == w for s in sites for w in files)
            tally[key, "in the expected file"] += right
            if not right:
                misses.append(f"located elsewhere ({r['origin']}): {r['url']} -> {sites[0].file} "
                              f"(expected {want})")
        elif holdable and shown:
            misses.append(f"not located ({r['origin']}, expected {want}): {r['url']}: {r['message'][:120]}")
        tally["origin", r["origin"]] += 1
    print(f"# Source atlas probe: {len(rows)} failures from {a.probe}\n")
    print("| origin of the message | cases | located | in the expected file |")
    print("|---|---:|---:|---:|")
    for key in ("holdable", "not holdable", "not in the paste"):
        n = tally[key, "cases"]
        if not n:
            continue
        pct = lambda k, n=n, key=key: f"{tally[key, k]} ({100 * tally[key, k] / n:.0f}%)"  # noqa: E731
        label = {"holdable": "engine or library (the atlas can hold it)",
                 "not holdable": "torch, native, Python, other (it cannot)",
                 "not in the paste": "the paste stops before the message (any origin)"}[key]
        print(f"| {label} | {n} | {pct('located')} | {pct('in the expected file')} |")
    print("\nBy origin: " + ", ".join(f"{o} {n}" for (k, o), n in sorted(tally.items()) if k == "origin"))
    if a.list and misses:
        print("\n## Misses\n")
        for m in misses:
            print(f"- {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
