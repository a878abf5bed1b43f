#!/usr/bin/env python3
"""Hostile logs at scale: time and peak memory of `triage analyze` (and of the catch-up of
`triage watch`) on inputs built to hit the quadratic and unbounded paths of issue 19.

usage: python3 benchmarks/bench_hostile.py [--cases tracebacks,killed,errors,burst,labels]
                                           [--tracebacks 2500,5000,10000] [--killed-mb 50]
                                           [--errors-mb 200] [--burst-mb 256] [--label-mb 300]
                                           [--label-bound 20] [--json]

Cases
- tracebacks: N distinct tracebacks (different frames and messages), N from --tracebacks.
  Linear work means the time per traceback stays flat as N doubles; the issue measured
  17 s / 50 s / >170 s for 2.5k / 5k / 10k before the fix.
- killed: --killed-mb of `Killed` lines (the same line, then each one different), and errors:
  --errors-mb of distinct `ERROR` lines. Peak RSS must stay bounded (3.3 GB and 1.3 GB before the fix) and the
  report must say that the cap on kept lines was hit.
- burst: a --burst-mb log written at once, then `triage watch --until exit` started on it:
  the time until the crash at its end is reported (catching up at the fast scanner's speed,
  not line by line; 4.5 MB/s before the fix).

- labels: `triage catalogue backtest` on a one-case corpus whose label (cases/<id>.yaml) is
  hostile (issue 35): a YAML alias bomb (ran for minutes), a symlink to /dev/zero (MemoryError),
  a FIFO no one writes to (blocked for ever) and a --label-mb MiB label (300 by default; two
  minutes). Each must end in one `triage: error:` line naming the label, exit 2, within
  --label-bound seconds (the child is killed at the bound); a case that does not is marked
  ok=False and the benchmark exits 1.

Logs are generated into --dir (default: a temporary directory, removed afterwards).
Peak RSS and CPU seconds are from wait4 of the triage process; on a shared machine CPU seconds
are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CRASH = (
    "[2025-01-01 23:59:59 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
    "    scheduler.event_loop()\n"
    "ZeroDivisionError: division by zero in the frobnicator\n"
)


def word(i: int) -> str:
    """A name for number i without digits: the scan folds digits away when it compares lines."""
    out = ""
    while True:
        out = "abcdefghijklmnopqrstuvwxyz"[i % 26] + out
        i //= 26
        if not i:
            return out


def distinct_tracebacks(path: Path, n: int, seed: int = 19) -> None:
    """n request tracebacks, each with its own frames and exception (no two alike)."""
    rng = random.Random(seed)
    with open(path, "w") as fh:
        fh.write("[2025-01-01 00:00:00 TP0] server_args=ServerArgs(model_path='org/model', tp_size=1)\n")
        for i in range(n):
            w = word(i)
            fh.write(f"[2025-01-01 00:00:{i % 60:02d} TP0] Exception in request {i}: Traceback (most recent call last):\n")
            for k in range(3):
                fh.write(f'  File "/srv/app/module_{w}_{word(k)}.py", line {rng.randint(1, 999)}, in handler_{w}\n')
                fh.write(f"    step_{w}(request)\n")
            fh.write(f"Value{w.title()}Error: request {w} could not be served because of reason {rng.random():.6f}\n")
            fh.write(f"[2025-01-01 00:00:{i % 60:02d} TP0] Decode batch. #running-req: {i % 50}, #token: {i}\n")
        fh.write(CRASH)


def repeated_lines(path: Path, mb: float, template: str) -> None:
    """`template` formatted with a running number until the file holds `mb` MiB."""
    target = int(mb * 1024 * 1024)
    with open(path, "w") as fh:
        size, i = 0, 0
        while size < target:
            block = "".join(template.format(i=i + k, w=word(i + k)) for k in range(10_000))
            fh.write(block)
            size += len(block)
            i += 10_000
        fh.write(CRASH)


CPU: dict[str, float] = {}  # CPU seconds (user + system) of the last run: steadier than wall time on a busy machine


def run(args: list[str], timeout: float = 3600) -> tuple[int, float, int, str]:
    """(exit code, wall seconds, peak RSS MiB, stdout) of `python -m triage *args`."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "triage", *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env={**os.environ, "TRIAGE_NO_CACHE": "1"}, cwd=ROOT)
    out = p.stdout.read() if p.stdout else b""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    CPU["last"] = usage.ru_utime + usage.ru_stime
    return p.returncode, time.perf_counter() - t, usage.ru_maxrss // 1024, out.decode("utf-8", "replace")


def bench_tracebacks(d: Path, counts: list[int]) -> list[dict]:
    rows = []
    for n in counts:
        f = d / f"tracebacks-{n}.log"
        distinct_tracebacks(f, n)
        code, dt, rss, out = run(["analyze", str(f), "--format", "json", "-j", "1"])
        failures = len(json.loads(out)["failures"]) if code in (0, 1) else None
        rows.append({"case": "tracebacks", "n": n, "seconds": round(dt, 2), "cpu_s": round(CPU["last"], 2),
                     "us_per_traceback": round(1e6 * CPU["last"] / n),
                     "rss_mib": rss, "failures": failures})
    return rows


def bench_lines(d: Path, name: str, mb: float, template: str) -> dict:
    f = d / f"{name}.log"
    repeated_lines(f, mb, template)
    code, dt, rss, out = run(["analyze", str(f), "--format", "json", "-j", "1"])
    notes = json.loads(out)["notes"] if code in (0, 1) else []
    return {"case": name, "mb": mb, "seconds": round(dt, 2), "cpu_s": round(CPU["last"], 2), "rss_mib": rss, "exit": code,
            "cap_noted": any("cap" in n or "counted" in n for n in notes)}


def bench_burst(d: Path, mb: float) -> dict:
    """A server that wrote `mb` MiB before triage started watching, the crash last."""
    f = d / "burst.log"
    repeated_lines(f, mb, "[2025-01-01 00:00:00 TP0] Decode batch. #running-req: 7, #token: {i}, gen throughput: 1.0\n")
    code, dt, rss, _ = run(["watch", str(f), "--until", "exit", "--grace", "0.2", "--timeout", "3000",
                            "--format", "json"])
    cpu = CPU["last"]
    return {"case": "burst", "mb": mb, "seconds": round(dt, 2), "cpu_s": round(cpu, 2), "mb_per_cpu_s": round(mb / cpu, 1),
            "rss_mib": rss, "exit": code}


LABEL = """id: case-1
source: https://example.com/1
where: a benchmark
engine: sglang
version: null
kind: crash
exception: ZeroDivisionError
exception_type: ZeroDivisionError
failure_class: test
expected_signature: null
workaround: {flags: [], remove_flags: [], env: [], note: none}
fixed_in: null
note: none
split: dev
"""
# nine anchors of nine: 9**9 list items once expanded (the loader refuses aliases)
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))
LABELS = ("alias-bomb", "dev-zero", "fifo", "huge")


def hostile_corpus(d: Path, kind: str, label_mb: float) -> Path:
    """A corpus of one crash log whose label is `kind` of hostile."""
    root = d / f"corpus-{kind}"
    (root / "cases").mkdir(parents=True)
    (root / "cases" / "case-1.log").write_text(CRASH)
    label = root / "cases" / "case-1.yaml"
    if kind == "alias-bomb":
        label.write_text(ALIAS_BOMB)
    elif kind == "dev-zero":
        label.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(label)
    elif kind == "huge":  # a valid label, then a comment: label_mb MiB of YAML text in all
        with open(label, "w") as fh:
            fh.write(LABEL)
            line = "# " + "x" * 1021 + "\n"
            for _ in range(int(label_mb * 1024)):
                fh.write(line)
    else:
        raise ValueError(kind)
    return root


def run_bounded(args: list[str], bound: float) -> dict:
    """`python -m triage *args`, killed at `bound` seconds: exit code (None when killed), wall
    and CPU seconds, peak RSS, stderr."""
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "triage", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env={**os.environ, "TRIAGE_NO_CACHE": "1"}, cwd=ROOT, start_new_session=True)
    try:
        _, err = p.communicate(timeout=bound)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        _, err = p.communicate()
        killed = True
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # cumulative: the caller takes differences
    return {"code": None if killed else p.returncode, "seconds": time.perf_counter() - t,
            "cpu_total": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss // 1024,
            "stderr": err.decode("utf-8", "replace")}


def bench_labels(d: Path, label_mb: float, bound: float, kinds: tuple[str, ...] = LABELS) -> list[dict]:
    rows = []
    for kind in kinds:
        root = hostile_corpus(d, kind, label_mb)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = run_bounded(["catalogue", "backtest", str(root), "-j", "1"], bound)
        cpu = r["cpu_total"] - (before.ru_utime + before.ru_stime)
        lines = r["stderr"].splitlines()
        one_line = (len(lines) == 1 and lines[0].startswith("triage: error: ") and "case-1.yaml" in lines[0]
                    and "internal error" not in lines[0])
        ok = r["code"] == 2 and one_line and r["seconds"] < bound
        rows.append({"case": f"label-{kind}", **({"mb": label_mb} if kind == "huge" else {}),
                     "seconds": round(r["seconds"], 2), "cpu_s": round(cpu, 2), "bound_s": bound,
                     "exit": r["code"], "one_line": one_line, "ok": ok,
                     "error": (lines[0] if lines else "")[:160]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="tracebacks,killed,errors,burst,labels")
    ap.add_argument("--tracebacks", default="2500,5000,10000")
    ap.add_argument("--killed-mb", type=float, default=50)
    ap.add_argument("--errors-mb", type=float, default=200)
    ap.add_argument("--burst-mb", type=float, default=256)
    ap.add_argument("--label-mb", type=float, default=300)
    ap.add_argument("--label-bound", type=float, default=20, help="seconds each hostile label may take")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cases = a.cases.split(",")
    with tempfile.TemporaryDirectory(prefix="triage-hostile-") as tmp:
        d = a.dir or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        rows: list[dict] = []
        if "tracebacks" in cases:
            rows += bench_tracebacks(d, [int(x) for x in a.tracebacks.split(",")])
        if "killed" in cases:
            rows.append(bench_lines(d, "killed", a.killed_mb, "Killed\n"))
            rows.append(bench_lines(d, "killed-distinct", a.killed_mb, "Killed process {w}\n"))
        if "errors" in cases:
            rows.append(bench_lines(d, "errors", a.errors_mb,
                                    "[2025-01-01 00:00:00] ERROR worker {w}: request failed\n"))
        if "burst" in cases:
            rows.append(bench_burst(d, a.burst_mb))
        if "labels" in cases:
            rows += bench_labels(d, a.label_mb, a.label_bound)
    if a.json:
        print(json.dumps(rows, indent=1))
    else:
        for r in rows:
            print("  ".join(f"{k}={v}" for k, v in r.items()))
    if any(r.get("ok") is False for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
