#!/usr/bin/env python3
"""Time `triage analyze` against ripgrep and grep on the same generated log.

usage: python3 benchmarks/bench_scan.py [--size-mb 1024] [--runs 3] [--log FILE]
                                        [--shared ../shared] [--gz] [--quick]

Generates a log with ../shared/bench/make_log.py (or takes --log), then runs, alternating
and on a warm page cache: `triage analyze` (both cores, one core, and the portable scanner
without Hyperscan), `rg -c -f patterns.txt`, `grep -c -E -f patterns.txt` (LC_ALL=C), and
with --gz the same on a gzip copy against `zcat | rg`. Prints median wall time, MB/s, peak
RSS of each, the ratios, and whether the targets of docs/performance.md are met. The
startup target compares a 1 MB log with `python -c "import regex, pydantic, jinja2, typer"`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(cmd: list[str] | str, shell: bool = False, env: dict | None = None) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB of the child tree's largest process, exit code)."""
    # Output goes to a real file: GNU grep notices /dev/null and stops at the first match.
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, shell=shell, stdout=out, stderr=subprocess.DEVNULL,
                             env=env, preexec_fn=os.setsid)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    # children of the child (worker processes, zcat) report through RUSAGE_CHILDREN of the
    # child itself, which ru_maxrss of wait4 already folds in as the maximum
    return wall, int(usage.ru_maxrss), os.waitstatus_to_exitcode(status)


def measure(named: dict[str, tuple[list[str] | str, bool, dict | None]], runs: int) -> dict[str, tuple[float, int]]:
    times: dict[str, list[float]] = {k: [] for k in named}
    rss: dict[str, int] = dict.fromkeys(named, 0)
    for _ in range(runs):
        for name, (cmd, shell, env) in named.items():  # alternate, so drift hits all alike
            wall, peak, code = run_once(cmd, shell, env)
            if code not in (0, 1):
                print(f"warning: {name} exited with {code}", file=sys.stderr)
            times[name].append(wall)
            rss[name] = max(rss[name], peak)
    return {k: (statistics.median(v), rss[k]) for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--log", type=Path)
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--gz", action="store_true", help="also compare on a gzip copy")
    ap.add_argument("--quick", action="store_true", help="skip grep and the portable scanner")
    a = ap.parse_args()

    patterns = a.shared / "bench" / "patterns.txt"
    make_log = a.shared / "bench" / "make_log.py"
    triage = [sys.executable, "-m", "triage", "analyze", "--format", "json"]
    tmp = Path(tempfile.mkdtemp(prefix="triage-bench-"))
    try:
        log = a.log
        if log is None:
            log = tmp / "bench.log"
            print(f"generating {a.size_mb:g} MiB with {make_log} ...", flush=True)
            subprocess.run([sys.executable, str(make_log), "--size-mb", str(a.size_mb), "--out", str(log)],
                           check=True, stdout=subprocess.DEVNULL)
        size_mb = log.stat().st_size / 2**20
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
        have_rg = shutil.which("rg") is not None
        cmds: dict[str, tuple[list[str] | str, bool, dict | None]] = {
            "triage (2 cores)": (triage + [str(log)], False, None),
            "triage (1 core)": (triage + ["-j", "1", str(log)], False, None),
        }
        if not a.quick:
            cmds["triage portable (2 cores)"] = (triage + ["--no-hyperscan", str(log)], False, None)
        if have_rg:
            cmds["rg -c -f patterns.txt"] = (["rg", "-c", "--no-mmap", "-f", str(patterns), str(log)], False, None)
        if not a.quick:
            cmds["grep -c -E -f (LC_ALL=C)"] = (["grep", "-c", "-E", "-f", str(patterns), str(log)], False,
                                                {**os.environ, "LC_ALL": "C"})
        print(f"log: {log} ({size_mb:,.0f} MiB); {a.runs} runs each, alternating; median wall time")
        res = measure(cmds, a.runs)
        anchor = res.get("rg -c -f patterns.txt", (None, 0))[0]
        print(f"{'command':34} {'seconds':>8} {'MiB/s':>8} {'x rg':>6} {'peak RSS':>10}")
        for name, (sec, peak) in res.items():
            ratio = f"{sec / anchor:.2f}" if anchor else "-"
            print(f"{name:34} {sec:8.2f} {size_mb / sec:8.0f} {ratio:>6} {peak / 1024:8.0f} MiB")
        verdicts = []
        if anchor:
            t2, t1 = res["triage (2 cores)"][0], res["triage (1 core)"][0]
            verdicts.append(("triage <= rg time (ratio <= 1.0), both cores", t2 / anchor <= 1.0, f"{t2 / anchor:.2f}"))
            verdicts.append(("triage 1.5x faster than rg, both cores (aim)", anchor / t2 >= 1.5, f"{anchor / t2:.2f}x"))
            verdicts.append(("triage <= rg time, one core", t1 / anchor <= 1.0, f"{t1 / anchor:.2f}"))
            if "triage portable (2 cores)" in res:
                tp = res["triage portable (2 cores)"][0]
                verdicts.append(("portable scanner >= 0.1x rg speed", anchor / tp >= 0.1, f"{anchor / tp:.2f}x"))
        worst_rss = max(res[k][1] for k in res if k.startswith("triage")) / 1024
        verdicts.append(("peak RSS <= 200 MiB", worst_rss <= 200, f"{worst_rss:.0f} MiB"))

        if a.gz:
            gz = tmp / "bench.log.gz"
            subprocess.run(f"gzip -1 -c {log} > {gz}", shell=True, check=True)
            gres = measure({
                "triage on .gz": (triage + [str(gz)], False, None),
                "zcat | rg -c -f": (f"zcat {gz} | rg -c -f {patterns}", True, None),
            }, a.runs)
            for name, (sec, peak) in gres.items():
                print(f"{name:34} {sec:8.2f} {size_mb / sec:8.0f} {'':>6} {peak / 1024:8.0f} MiB")
            tz, zr = gres["triage on .gz"][0], gres["zcat | rg -c -f"][0]
            verdicts.append(("gz: triage <= zcat | rg", tz <= zr, f"{tz / zr:.2f}"))

        small = tmp / "small.log"
        with open(log, "rb") as src, open(small, "wb") as dst:
            dst.write(src.read(1024 * 1024))
        sres = measure({
            "python -c 'import regex, pydantic, jinja2, typer'":
                ([sys.executable, "-c", "import regex, pydantic, jinja2, typer"], False, None),
            "triage analyze 1 MiB": (triage + [str(small)], False, None),
        }, max(a.runs, 5))
        base, ours = sres["python -c 'import regex, pydantic, jinja2, typer'"][0], sres["triage analyze 1 MiB"][0]
        print(f"startup: imports {base:.3f} s, triage on 1 MiB {ours:.3f} s ({ours / base:.1f}x)")
        verdicts.append(("1 MiB log <= 3x the imports", ours / base <= 3.0, f"{ours / base:.1f}x"))

        print()
        for what, ok, figure in verdicts:
            print(f"{'MET ' if ok else 'MISS'} {what}: {figure}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
