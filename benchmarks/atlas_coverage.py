#!/usr/bin/env python3
"""How much of the real-log corpus the source atlas locates, next to what the catalogue names.

usage: python3 benchmarks/atlas_coverage.py [--corpus tests/corpus]

Per split and engine: crash cases with a specific (non-generic) finding, with a located failure
(`raised_at`), and with either. The crash cases with neither are counted by why the atlas could
not locate them; the test split is given as counts only (no case is named: whoever writes
signatures must not read held-out cases).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from triage.catalogue.atlas import shipped, words  # noqa: E402
from triage.catalogue.load import load_catalogue  # noqa: E402
from triage.commands.catalogue.backtest import load_cases  # noqa: E402
from triage.core.errors import TriageError  # noqa: E402
from triage.core.models import Report  # noqa: E402
from triage.pipeline.analyze import analyze_file  # noqa: E402

_NATIVE = re.compile(r"CUDA error|HIP error|CUDA kernel|cuda|NCCL|nccl|\.cu:\d|\.cpp:\d|c10::|at::|Tllm|"
                     r"TensorRT|illegal (memory|instruction)|Segmentation fault|core dumped|SIG[A-Z]+|"
                     r"Fatal Python error|Assertion failed|assert\(|oneCCL|map::at", re.I)
_BUILTIN = re.compile(r"list index out of range|has no attribute|not subscriptable|missing \d+ required|"
                      r"unexpected keyword argument|not enough values to unpack|too many values to unpack|"
                      r"\[Errno \d+\]|object is not|takes \d+ positional|division by zero|^'.*'$|"
                      r"unsupported operand|cannot import name|No module named|is not defined|"
                      r"returned non-zero exit status|Expecting value: line")
_LIBRARY_FRAME = re.compile(r"/(torch|triton|transformers|ray|tensorrt_llm|safetensors|accelerate|zmq|uvloop|"
                            r"asyncio|concurrent|multiprocessing|pydantic|fastapi|starlette)/")
ATLAS_ENGINES = {"sglang", "vllm", "lmdeploy"}


def miss_cause(engine: str, report: Report) -> str:
    if not report.failures:
        return "no failure detected"
    f = report.failures[0]
    text = " ".join([f.exception, f.message, *(c.message for c in f.chain)])
    if f.exception == "(traceback cut off)":
        return "no message: the log ends before the exception line"
    if f.exception.startswith("(") or not f.message.strip():
        return "no message: a bare signal, exit or empty exception"
    if engine not in ATLAS_ENGINES:
        return f"engine not in the atlas ({engine})"
    if _NATIVE.search(text):
        return "message from C++/CUDA/NCCL or a signal"
    if _BUILTIN.search(f.message):
        return "raised by Python itself or its standard library (subprocess, json)"
    if f.frames and _LIBRARY_FRAME.search(f.frames[-1].file):
        return "raised in torch, Triton or another library the atlas does not read"
    cut = len(f.message) >= 100 or f.message.rstrip().endswith(("...", "…"))
    near = _nearest_share(f.message)
    if near >= 0.6:
        return ("engine message not located: cut off, " if cut else "engine message not located: ") + \
            "a template shares most of its words (reworded, paraphrased, or below the atlas's minimum)"
    return ("engine message not located: cut off, " if cut else "engine message not located: ") + \
        "no template shares its words (another package, a fork or plugin, or the user's code)"


def _nearest_share(message: str) -> float:
    """The largest share of the message's words (4+ letters) that one atlas template holds."""
    atlas = shipped()
    if atlas is None:
        return 0.0
    mine = words(message.split("\n", 1)[0])
    if not mine:
        return 0.0
    best = 0.0
    for t in atlas.candidates(message, cut=True):
        best = max(best, len(mine & words(t.text)) / len(mine))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=str(ROOT / "tests" / "corpus"))
    a = ap.parse_args()
    cat = load_catalogue()
    for split in ("dev", "test"):
        rows: dict[str, Counter] = defaultdict(Counter)
        causes: Counter = Counter()
        for case in load_cases(a.corpus, split):
            lab = case.label
            if lab.kind != "crash":
                continue
            try:
                r = analyze_file(case.log, catalogue=cat)
            except TriageError:
                causes["error"] += 1
                continue
            specific = any(not x.generic for x in r.findings)
            located = any(f.raised_at for f in r.failures)
            for key in (lab.engine, "all"):
                rows[key]["cases"] += 1
                rows[key]["specific"] += specific
                rows[key]["located"] += located
                rows[key]["either"] += specific or located
                rows[key]["located, not specific"] += located and not specific
            if not (specific or located):
                causes[miss_cause(lab.engine, r)] += 1
        print(f"\n## {split} split: crash cases\n")
        print("| engine | cases | specific | located | either | located, not specific |")
        print("|---|---:|---:|---:|---:|---:|")
        for eng in sorted(rows, key=lambda e: (e == "all", e)):
            c = rows[eng]
            pct = lambda k, c=c: f"{c[k]} ({100 * c[k] / c['cases']:.0f}%)"  # noqa: E731
            print(f"| {eng} | {c['cases']} | {pct('specific')} | {pct('located')} | {pct('either')} | "
                  f"{c['located, not specific']} |")
        print(f"\nNeither specific nor located, by cause ({sum(causes.values())}):\n")
        for cause, n in causes.most_common():
            print(f"- {n}: {cause}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
