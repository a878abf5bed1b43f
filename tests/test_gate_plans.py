"""The portable engine's two gate plans (one trie regex, or one per first byte) find every line
that holds a word, on every log shape; the plan picked on the first chunk does not change a
hit; a byte far more frequent than the sample said still finds its lines."""

import importlib.util
import re
from bisect import bisect_left
from pathlib import Path

import pytest

from triage.pipeline import scan as scan_mod
from triage.pipeline.analyze import prefilter_for
from triage.pipeline.scan import LINE_CAP, _gate_starts


def _make(tmp_path: Path, *args: str) -> bytes:
    spec = importlib.util.spec_from_file_location(
        "make_logs", Path(__file__).resolve().parents[1] / "benchmarks" / "make_logs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    path = tmp_path / "shape.log"
    a = mod.parse_args([args[0], "--out", str(path), *args[1:]])
    with open(path, "wb") as fh:
        mod.generate(a, fh)
    return path.read_bytes()


SHAPES = {
    "quiet": ("quiet", "--size-mb", "0.4"),
    "noisy": ("noisy", "--size-mb", "0.4", "--tracebacks", "20"),
    "long": ("long", "--size-mb", "0.5", "--long-every", "10", "--line-bytes", "34000"),
    "vllm": ("vllm", "--size-mb", "0.4"),
}


def _word_lines(pf, data: bytes) -> set[int]:
    """Line starts whose first LINE_CAP bytes hold a word: what the gates must lead to. Each
    word is looked for from line to line (a hit, or a first occurrence past LINE_CAP, moves on
    to the next line): a test of every word on every line was half of this file's time."""
    ends = [m.start() for m in re.finditer(b"\n", data)]
    ends.append(len(data))  # the last line ends at the end of the data, newline or not
    out = set()
    for w in pf._bwords:
        assert w and b"\n" not in w
        i = data.find(w)
        while i != -1:
            n = bisect_left(ends, i)  # the line holding i ends at ends[n]
            start = ends[n - 1] + 1 if n else 0
            if i + len(w) <= start + LINE_CAP:
                out.add(start)
            i = data.find(w, ends[n] + 1) if ends[n] < len(data) else -1
    return out


def test_word_lines_is_the_line_by_line_test(catalogue):
    """_word_lines against the plain reading of its rule, on a small log of every kind of line."""
    pf = prefilter_for(catalogue, False)
    w = pf._bwords[0]
    data = b"\n".join([b"x" * 10 + w, b"y" * (LINE_CAP - len(w)) + w, b"z" * (LINE_CAP - len(w) + 1) + w,
                        b"", w + w, b"nothing here", w])
    plain, pos = set(), 0
    for line in data.split(b"\n"):
        if any(x in line[:LINE_CAP] for x in pf._bwords):
            plain.add(pos)
        pos += len(line) + 1
    assert _word_lines(pf, data) == plain, (sorted(_word_lines(pf, data)), sorted(plain))
    assert len(plain) >= 4


@pytest.fixture(scope="module", params=sorted(SHAPES))
def shape(request, tmp_path_factory):
    return request.param, _make(tmp_path_factory.mktemp(request.param), *SHAPES[request.param])


def test_both_plans_reach_every_line_with_a_word(catalogue, shape):
    name, data = shape
    pf = prefilter_for(catalogue, False)
    plans = pf._gate_plans(pf._sample(data, len(data)))
    assert len(plans) == 2 and len(plans[0]) == 1 and len(plans[1]) > 1, name
    want = _word_lines(pf, data)
    assert want, name
    if name == "long":  # lines past the cap, whose words beyond it lead nowhere: ~12 of them in 0.5 MB
        assert sum(len(line) > LINE_CAP for line in data.split(b"\n")) >= 10
    hits = []
    for plan in plans:
        lines = {data.rfind(b"\n", 0, p) + 1 for p in _gate_starts(plan, data, len(data))}
        assert want <= lines, (name, len(want - lines))
        pf._plan = plan  # the hits with this plan, as if the first chunk had picked it
        hits.append(pf.hits(data))
    assert hits[0] == hits[1] and hits[0]


def test_a_byte_the_sample_called_rare_falls_back_to_one_pass(catalogue, shape, monkeypatch):
    """A chunk full of a byte the sample saw rarely: past its budget the loop over its hits
    hands over to `re`, and the lines after that are still found."""
    name, data = shape
    pf = prefilter_for(catalogue, False)
    each = pf._gate_plans(pf._sample(data, len(data)))[1]
    group = max((g for g in each if g.by_find), key=lambda g: g.freq)
    word = next(w for w in pf._bwords if group.rx.search(w))  # a word this group's gates lead to
    flood_line = b"[2025-09-14 06:20:00] echo " + group.opener * 300 + b"\n"
    assert group.rx.search(flood_line) is None
    tail = b"[2025-09-14 06:20:01 TP0] " + word + b"\n"
    chunk = data + flood_line * 3000 + tail
    calls = []
    real = scan_mod._search
    monkeypatch.setattr(scan_mod, "_search", lambda *a: (calls.append(a[2]), real(*a))[1])
    starts = _gate_starts([group], chunk, len(chunk))
    assert len(chunk) - len(tail) in {chunk.rfind(b"\n", 0, p) + 1 for p in starts}, name
    assert calls and len(data) <= calls[0] < len(chunk) - len(tail), name  # the hand-over came in the flood


def test_a_small_log_gets_the_one_regex(catalogue):
    pf = prefilter_for(catalogue, False)
    plans = pf._gate_plans(b"[2025-09-14 06:20:01 TP0] Decode batch. #running-req: 3\n" * 100)
    assert len(plans) == 1 and len(plans[0]) == 1
