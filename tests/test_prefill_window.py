"""The prefix cache's figures are those of the window before the crash (pipeline/prefill.py):
read back from a regular file, summed by the scan of a stream, the same lines either way and
whatever the chunking, the number of ranges or a line cut at MAX_LINE; a log shorter than the
window is counted whole."""

import importlib.util
import json
import random
import re
from pathlib import Path

import pytest

from triage.core.load_summary import LoadSummary
from triage.pipeline import prefill
from triage.pipeline import read as read_mod
from triage.pipeline import scan as scan_mod
from triage.pipeline.analyze import Options, analyze_file, analyze_scan, prefilter_for
from triage.pipeline.read import iter_chunks, iter_spans
from triage.pipeline.scan import scan
from triage.render.json_out import render_json
from triage.render.markdown import render_markdown

WINDOW = 256 * 1024  # smaller than the logs below, so that the window cuts


def _make_log(path: Path, size_mb: str = "2") -> dict:
    spec = importlib.util.spec_from_file_location(
        "make_logs", Path(__file__).resolve().parents[1] / "benchmarks" / "make_logs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    args = mod.parse_args(["quiet", "--size-mb", size_mb, "--out", str(path)])  # ends in the NSA crash
    with open(path, "wb") as fh:
        return mod.generate(args, fh)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("prefill") / "server.log"
    _make_log(path)
    return path


@pytest.fixture
def small_window(monkeypatch):
    monkeypatch.setattr(prefill, "WINDOW_BYTES", WINDOW)


def _reference(data: bytes, end: int) -> prefill.Tokens:
    lo = max(0, end - WINDOW)
    out = prefill.Tokens(window=WINDOW if lo else 0)
    for m in prefill._PREFILL.finditer(data):
        if lo <= m.start() < end:
            out.new += int(m[1])
            out.cached += int(m[2])
            out.lines += 1
    return out


def _ends(data: bytes) -> list[int]:
    """25 line starts drawn at random (seeded) and the end of the log: where a crash may be."""
    starts = [0, *(m.end() for m in re.finditer(b"\n", data))][:-1]
    return sorted(random.Random(5).sample(starts, 25)) + [len(data)]


def test_ring_counts_the_lines_of_the_window(log, small_window):
    data = log.read_bytes()
    for end in _ends(data):
        expected = _reference(data, end)
        for size in (32 * 1024, 300 * 1024, 8 * 1024 * 1024):  # chunks smaller and larger than the window
            ring, at = prefill.Ring(), 0
            with open(log, "rb") as fh:
                for buf, n in iter_spans(fh, size=size):
                    ring.feed(buf, n, at)
                    if at + n >= end:
                        break
                    at += n
            assert ring.window(end) == expected, (size, end)
    assert _reference(data, len(data)).window and _reference(data, len(data)).lines > 100


@pytest.mark.parametrize("block", [60, 997, 1 << 20])  # read-back blocks: shorter than a figure, cutting them
def test_read_back_counts_the_lines_of_the_window(log, small_window, monkeypatch, block):
    monkeypatch.setattr(prefill, "READ_BLOCK", block)
    data = log.read_bytes()
    for end in _ends(data):
        assert prefill.read_back(str(log), end) == _reference(data, end), end


def _reports(log: Path, catalogue, monkeypatch) -> dict[str, dict]:
    """The JSON report of one log read four ways."""
    out = {}
    out["file, one core"] = json.loads(render_json(analyze_file(str(log), catalogue, Options(workers=1))))
    monkeypatch.setattr(scan_mod, "PARALLEL_MIN_BYTES", 0)
    out["file, three ranges"] = json.loads(render_json(analyze_file(str(log), catalogue, Options(workers=3))))
    with open(log, "rb") as fh:
        res = scan(iter_chunks(fh, size=100 * 1024), prefilter_for(catalogue))
    assert res.prefill_source is None  # a stream: the scan summed the window
    out["stream"] = json.loads(render_json(analyze_scan(res, str(log), catalogue, Options())))
    with open(log, "rb") as fh:
        res = scan(iter_chunks(fh), prefilter_for(catalogue, False))
    out["stream, portable engine"] = json.loads(render_json(analyze_scan(res, str(log), catalogue, Options())))
    return out


def test_file_ranges_and_stream_give_the_same_window(log, catalogue, small_window, monkeypatch):
    reports = _reports(log, catalogue, monkeypatch)
    first = reports["file, one core"]
    for how, doc in reports.items():
        assert doc == first, how
    cache = first["timeline"]["prefix_cache"]
    assert cache["window_mib"] == 0.25
    data = log.read_bytes()
    crash = first["timeline"]["crash"]["line"]
    crash_at = sum(len(x) for x in data.splitlines(keepends=True)[: crash - 1])
    window = _reference(data, crash_at)
    whole = sum(int(a) + int(b) for a, b in prefill._PREFILL.findall(data))  # every line of the log
    assert cache["prompt_tokens"] == window.new + window.cached < whole
    assert cache["cached_tokens"] == window.cached


def test_report_says_the_cost_is_that_of_the_window(log, catalogue, small_window):
    report = analyze_file(str(log), catalogue, Options(workers=1))
    text = render_markdown(report)
    assert "the prefill lines of the last 256 KiB of log before the failure reused" in text
    assert "this log's prefill lines" not in text


def test_a_log_shorter_than_the_window_is_counted_whole(log, catalogue):
    report = analyze_file(str(log), catalogue, Options(workers=1))
    cache = report.timeline.prefix_cache
    data = log.read_bytes()
    pairs = prefill._PREFILL.findall(data)
    crash = report.timeline.crash.line
    before = prefill._PREFILL.findall(b"".join(data.splitlines(keepends=True)[: crash - 1]))
    assert len(before) == len(pairs)  # the crash ends the log: every prefill line is before it
    assert cache is not None and "window_mib" not in cache
    assert cache["prompt_tokens"] == sum(int(a) + int(b) for a, b in pairs)
    assert "this log's prefill lines reused" in render_markdown(report)


def test_a_cut_line_falls_back_to_reading_the_file_again(tmp_path, catalogue, small_window, monkeypatch):
    """A line over MAX_LINE that the scan cut: the scan's offsets are not the file's, so the
    window is found again by line number in a second pass."""
    path = tmp_path / "long.log"
    _make_log(path)
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    lines.insert(len(lines) // 2, b"[2025-09-14 06:20:00] echo " + b"x" * 20_000 + b"\n")
    path.write_bytes(b"".join(lines))
    monkeypatch.setattr(read_mod, "MAX_LINE", 4096)
    pf = prefilter_for(catalogue)
    size = path.stat().st_size
    with open(path, "rb") as fh:  # small reads: the long line spans several and is cut
        cut = scan(iter_spans(fh, size=8 * 1024), pf, source=(str(path), size))
    assert cut.total_bytes < size
    with open(path, "rb") as fh:  # one read holds the whole line: nothing is cut
        whole = scan(iter_chunks(fh), pf)
    assert whole.total_bytes == size
    a = analyze_scan(cut, str(path), catalogue).timeline.prefix_cache
    b = analyze_scan(whole, str(path), catalogue).timeline.prefix_cache
    assert a == b and a is not None and a["window_mib"] == 0.25


def test_a_file_gone_before_the_read_back_is_a_diagnostic(tmp_path, catalogue, small_window):
    path = tmp_path / "gone.log"
    _make_log(path, "1")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        res = scan(iter_spans(fh), prefilter_for(catalogue), source=(str(path), size))
    path.unlink()
    report = analyze_scan(res, str(path), catalogue)
    assert report.timeline.prefix_cache is None
    assert any("not read back" in d for d in report.diagnostics)
    assert report.failures  # the rest of the report stands


def test_window_text_and_summary_copy():
    assert prefill.size_text(32 << 20) == "32 MiB" and prefill.size_text(WINDOW) == "256 KiB"
    s = LoadSummary(new_tokens=3, cached_tokens=1, prefill_lines=1, prefill_window=WINDOW)
    assert s.copy() == s
    prefill.apply(s, prefill.Tokens(new=5, cached=5, lines=2))
    assert (s.new_tokens, s.cached_tokens, s.prefill_lines, s.prefill_window) == (5, 5, 2, 0)
    assert s.prefix_hit() == (5, 10, 50.0)


def test_ring_lets_go_of_lines_no_window_reaches(small_window):
    ring = prefill.Ring()
    line = b"Prefill batch. #new-seq: 1, #new-token: 10, #cached-token: 30, #running-req: 1\n"
    block = line * 1000
    at = 0
    for _ in range(50):
        ring.feed(block, len(block), at)
        at += len(block)
    assert len(ring._offsets) <= (WINDOW + len(block)) // len(line) + 1
    w = ring.window(at)
    assert w.lines == WINDOW // len(line) and (w.new, w.cached) == (10 * w.lines, 30 * w.lines)


def test_retry_summary_names_the_window():
    from triage.commands.retry.summary import hit_rate
    from triage.core.models import Report, Timeline

    cache = {"cached_tokens": 75.0, "prompt_tokens": 100.0, "hit_rate": 75.0}
    whole = Report(source="a.log", timeline=Timeline(prefix_cache=dict(cache)))
    assert hit_rate(whole) == "75.0% (75 of 100 prompt tokens from the cache)"
    cut = Report(source="a.log", timeline=Timeline(prefix_cache={**cache, "window_mib": 32.0}))
    assert hit_rate(cut) == "75.0% (75 of 100 prompt tokens from the cache, in the last 32 MiB of log)"
