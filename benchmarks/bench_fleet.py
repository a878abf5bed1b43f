#!/usr/bin/env python3
"""Logs per second of `triage fleet` on the local process pool and on Ray, on this machine.

usage: python3 benchmarks/bench_fleet.py [--servers 60] [--per-server 8] [--jobs 0] [--batch 32]
                                         [--runs 1] [--no-ray] [--json]

Writes a generated archive (tests/fleet_archive.py: small SGLang/vLLM logs of six crash
kinds, healthy logs, .gz, one corrupt file) into a temporary directory, then times
`run_fleet` on it: first on the local pool, then on a local Ray instance (`ray.init` with
--jobs CPUs, timed on its own and left out of the logs/s, as a cluster is started once and
used for many runs). It checks that both runs give the same leaderboard. Needs `ray` for the
second half (pip install 'triage[ray]'); --no-ray skips it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fleet_archive import make_archive  # noqa: E402

from triage.commands.fleet.render import leaderboard  # noqa: E402
from triage.commands.fleet.run import FleetOptions, run_fleet  # noqa: E402


def timed(source: str, opts: FleetOptions, runs: int) -> tuple[float, dict]:
    best, doc = float("inf"), {}
    for _ in range(runs):
        t0 = time.perf_counter()
        tally = run_fleet(source, opts)
        best = min(best, time.perf_counter() - t0)
        doc = json.loads(json.dumps(leaderboard(tally, source, None)))
    return best, doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--servers", type=int, default=60)
    ap.add_argument("--per-server", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=0, help="processes / Ray CPUs (0: one per core)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--runs", type=int, default=1, help="best of N")
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    jobs = a.jobs or (os.cpu_count() or 1)
    os.environ.setdefault("TRIAGE_NO_CACHE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="triage-bench-fleet-"))
    out: dict = {"jobs": jobs, "batch": a.batch}
    try:
        arch = make_archive(tmp / "archive", a.servers, a.per_server)
        source = str(arch.root)
        n = arch.logs + 1 + arch.empty  # every file the fleet looks at
        out["files"] = n
        secs, local = timed(source, FleetOptions(jobs=jobs, batch=a.batch), a.runs)
        out["local_pool"] = {"seconds": round(secs, 3), "logs_per_s": round(n / secs, 1)}
        if not a.no_ray:
            try:
                import ray
            except ImportError:
                out["ray"] = "skipped: ray is not installed (pip install 'triage[ray]')"
            else:
                t0 = time.perf_counter()
                ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
                start = time.perf_counter() - t0
                secs, on_ray = timed(source, FleetOptions(ray="local", batch=a.batch), a.runs)
                ray.shutdown()
                out["ray"] = {"seconds": round(secs, 3), "logs_per_s": round(n / secs, 1),
                              "ray_init_seconds": round(start, 2), "same_leaderboard": on_ray == local}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['files']} files, {jobs} processes, batches of {a.batch}")
        lp = out["local_pool"]
        print(f"local pool: {lp['seconds']:.2f} s, {lp['logs_per_s']:.0f} logs/s")
        r = out.get("ray")
        if isinstance(r, dict):
            print(f"ray:        {r['seconds']:.2f} s, {r['logs_per_s']:.0f} logs/s "
                  f"(ray.init {r['ray_init_seconds']:.1f} s not counted); same leaderboard: {r['same_leaderboard']}")
        elif r:
            print(f"ray:        {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
