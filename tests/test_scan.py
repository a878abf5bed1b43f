"""The fast path, the portable path, small chunks and parallel byte ranges agree exactly."""

import gzip
import io

import pytest
from conftest import FIXTURES

from triage.pipeline.analyze import Options, analyze_scan, prefilter_for
from triage.pipeline.read import iter_chunks
from triage.pipeline.scan import Prefilter, merge, scan, split_points, trie_regex
from triage.render.json_out import render_json

LOGS = sorted(p.name for p in FIXTURES.iterdir() if p.suffix in (".log", ".gz"))


def _text(name: str) -> bytes:
    data = (FIXTURES / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def _report_json(res, cat, name="x"):
    return render_json(analyze_scan(res, name, cat, Options()))


@pytest.mark.parametrize("name", LOGS)
def test_hyperscan_and_portable_paths_agree(catalogue, name):
    pytest.importorskip("hyperscan")
    data = _text(name)
    fast = scan(iter_chunks(io.BytesIO(data)), prefilter_for(catalogue, True))
    slow = scan(iter_chunks(io.BytesIO(data)), prefilter_for(catalogue, False))
    assert fast.engine_used == "hyperscan" and slow.engine_used == "re"
    assert fast.lines == slow.lines and fast.keyword_lines == slow.keyword_lines
    assert _report_json(fast, catalogue) == _report_json(slow, catalogue)


@pytest.mark.parametrize("name", LOGS)
@pytest.mark.parametrize("size", [97, 4096])
def test_chunk_borders_lose_nothing(catalogue, name, size):
    data = _text(name)
    pf = prefilter_for(catalogue, False)
    whole = scan(iter_chunks(io.BytesIO(data), size=1 << 26), pf)
    small = scan(iter_chunks(io.BytesIO(data), size=size), pf)
    assert small.total_lines == whole.total_lines
    assert _report_json(small, catalogue) == _report_json(whole, catalogue)


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_byte_ranges_merge_to_the_whole(catalogue, tmp_path, parts):
    import triage.pipeline.scan as scan_mod

    path = tmp_path / "big.log"
    path.write_bytes(_text("sglang-nsa-tp8.log"))
    pf = prefilter_for(catalogue, False)
    with open(path, "rb") as fh:
        whole = scan(iter_chunks(fh), pf)
    cuts = split_points(str(path), path.stat().st_size, parts)
    ranges = [scan_mod.scan_range(str(path), cuts[i], cuts[i + 1], pf) for i in range(len(cuts) - 1)]
    merged = merge(ranges)
    assert merged.total_lines == whole.total_lines
    assert _report_json(merged, catalogue) == _report_json(whole, catalogue)


def test_portable_prefilter_finds_every_line_with_a_word_and_flags_it():
    """The scan needs per line: does it hold a word, and does it hold a catalogue keyword
    (even one overlapping an anchor). The portable engine answers that with one trie search
    each; which occurrence it reports does not matter."""
    import re

    words = [b"Error", b"Error: ", b"CUDA error: an illegal", b"illegal memory", b"ab", b"abc"]
    rx = re.compile(trie_regex(words))
    pf = Prefilter([w.decode() for w in words], prefer_hyperscan=False, flagged=["illegal memory", "ab"])
    text = b"xx CUDA error: an illegal memory access\nnothing\nError: abc\nplain Error\n"
    hits = pf.hits(text)
    lines = {text.rfind(b"\n", 0, end - 1) + 1 for end, _ in hits}
    flagged = {text.rfind(b"\n", 0, end - 1) + 1 for end, i in hits if pf.flagged[i]}
    starts = [0, text.index(b"nothing"), text.index(b"Error: abc"), text.index(b"plain")]
    assert lines == {starts[0], starts[2], starts[3]}
    assert flagged == {starts[0], starts[2]}  # "illegal memory" overlaps the longer anchor
    assert [pf.words[i] for i, f in enumerate(pf.flagged) if f] == ["ab", "illegal memory"]
    assert rx.search(b"nothing here") is None


def test_long_line_is_cut_not_loaded_whole():
    line = b"x" * (3 * 1024 * 1024) + b" CUDA error: boom\nnext line\n"
    chunks = list(iter_chunks(io.BytesIO(line), size=65536))
    joined = b"".join(chunks)
    assert joined.count(b"\n") == 2 and joined.endswith(b"next line\n")
    assert len(joined) < 1024 * 1024 + 64


def test_request_content_is_never_kept(catalogue):
    """Prompts hold whatever users paste (tracebacks, error messages): a content line is the
    user's text, so the scan keeps none of them, however many keywords they hold."""
    from triage.pipeline.analyze import prefilter_for

    prompt = ("[2025-06-24 22:27:58] Receive: obj=GenerateReqInput(rid='ab16', text='Traceback (most recent call "
              "last):\\n  File \"x.py\", line 1\\nRuntimeError: CUDA error: an illegal memory access was "
              "encountered', sampling_params={})\n")
    served = "[2025-06-24 22:27:59 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.01\n"
    res = scan(iter_chunks(io.BytesIO(((prompt + served) * 50).encode())), prefilter_for(catalogue))
    assert res.lines == {} and not res.keyword_lines


def _noisy_log(path, size_mb: str = "3", tracebacks: str = "300") -> dict:
    """A noisy SGLang log from the benchmark's generator: request tracebacks the server
    survived, spread over the traffic, then the crash that killed it at the end."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "make_logs", Path(__file__).resolve().parents[1] / "benchmarks" / "make_logs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.parse_args(["noisy", "--size-mb", size_mb, "--out", str(path), "--tracebacks", tracebacks])
    with open(path, "wb") as fh:
        return mod.generate(args, fh)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    path = tmp_path_factory.mktemp("noisy") / "noisy.log"
    return path, _noisy_log(path)


@pytest.fixture(scope="module")
def noisy_whole(catalogue, noisy):
    """The noisy log read in one pass, and its report: what every split must give."""
    with open(noisy[0], "rb") as fh:
        whole = scan(iter_chunks(fh), prefilter_for(catalogue, True))
    return whole, _report_json(whole, catalogue)


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_noisy_ranges_merge_to_the_whole(catalogue, noisy, noisy_whole, parts):
    """Each range keeps its own first copies of a request traceback; merged, the copies past
    KEEP_COPIES become repeats again, so counts and end lines are those of one pass."""
    import triage.pipeline.scan as scan_mod

    path, _meta = noisy
    whole, whole_json = noisy_whole
    pf = prefilter_for(catalogue, True)
    cuts = split_points(str(path), path.stat().st_size, parts)
    merged = merge([scan_mod.scan_range(str(path), cuts[i], cuts[i + 1], pf) for i in range(len(cuts) - 1)])
    assert whole.repeats  # the log repeats tracebacks past what is kept
    assert merged.repeats == whole.repeats
    assert _report_json(merged, catalogue) == whole_json


def test_noisy_load_figures_are_those_at_the_crash(catalogue, noisy):
    """The first failure-looking line is a request error near the start; the figures reported
    are those up to the crash at the end, whatever the chunk size."""
    import json

    path, meta = noisy
    pf = prefilter_for(catalogue, True)
    docs = []
    for size in (256 * 1024, 8 * 1024 * 1024):
        with open(path, "rb") as fh:
            res = scan(iter_chunks(fh, size=size), pf)
        doc = json.loads(_report_json(res, catalogue))
        docs.append(doc)
        before = res.load_at[min(res.load_at)]  # at the first failure-looking line: a request error
        assert before.prefill_lines < res.load.prefill_lines
        cache = doc["timeline"]["prefix_cache"]
        assert cache["prompt_tokens"] == res.load.new_tokens + res.load.cached_tokens
        assert doc["timeline"]["peak_running"]["running"] == res.load.peak_running
        assert doc["timeline"]["crash"]["line"] >= meta["crash"]["first_line"]
        assert doc["timeline"]["last_load"]["line"] < meta["crash"]["first_line"] <= doc["timeline"]["last_load"]["line"] + 40
    assert docs[0] == docs[1]


def test_noisy_repeats_count_towards_their_own_traceback(catalogue, noisy):
    """Each kind of request traceback is counted as often as the generator wrote it: a
    repeated window's count goes to the failure of the traceback its kept copy is, not to the
    first failure whose (merged, log-long) span happens to hold it."""
    import json

    path, meta = noisy
    with open(path, "rb") as fh:
        res = scan(iter_chunks(fh), prefilter_for(catalogue, True))
    doc = json.loads(_report_json(res, catalogue))
    counts = sorted(f["count"] for f in doc["failures"] if not f["fatal"])
    kinds = meta["request_traceback_kinds"]
    assert max(kinds.values()) > 16  # past KEEP_COPIES: some copies were only counted
    for kind, n in kinds.items():
        assert n in counts, (kind, n, counts)
