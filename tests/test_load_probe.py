"""The load probe (load figures out of the Hyperscan pass) gives what the findall passes give:
the same peak, peak line, prefill sums and figures before the first failure, whatever the
window, the values around it and the chunking."""

import functools
import io
import random

import pytest

from triage.pipeline.analyze import prefilter_for
from triage.pipeline.read import iter_chunks
from triage.pipeline.scan import load_window, probe_expressions, scan

hyperscan = pytest.importorskip("hyperscan")


def _log(seed: int, values: list[int], crash_at: int | None = None) -> bytes:
    rnd = random.Random(seed)
    out = []
    for i, v in enumerate(values):
        ts = f"[2025-09-14 06:{i // 600 % 60:02d}:{i // 10 % 60:02d} TP0]"
        if rnd.random() < 0.2:
            out.append(f"{ts} Prefill batch. #new-seq: {rnd.randint(1, 9)}, #new-token: {rnd.randint(0, 9000)}, "
                       f"#cached-token: {rnd.randint(0, 40000)}, token usage: 0.35, #running-req: {v}, #queue-req: 0")
        else:
            out.append(f"{ts} Decode batch. #running-req: {v}, #token: {rnd.randint(1, 9) * 1000}, "
                       f"token usage: 0.35, cuda graph: False, gen throughput (token/s): 1973.53, #queue-req: 0")
        if rnd.random() < 0.1:
            out.append(f'{ts} INFO:     10.0.0.1:4000 - "POST /generate HTTP/1.1" 200 OK')
        if crash_at is not None and i == crash_at:
            out += [f"{ts} Scheduler hit an exception: Traceback (most recent call last):",
                    '  File "/sgl/scheduler.py", line 10, in event_loop', "    self.run()",
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"]
    return ("\n".join(out) + "\n").encode()


def _figures(res):
    return (res.load, res.load_at, res.last_load, res.final_load, res.total_lines, sorted(res.lines))


SHAPES = {
    # values around the window, over it (the guard), under it (no window hit), a ramp
    "steady": lambda r: [r.randint(230, 256) for _ in range(3000)],
    "ramp": lambda r: [i // 10 for i in range(3000)],
    "spike_over": lambda r: [r.randint(200, 260) if i != 2500 else 4096 for i in range(3000)],
    "low_then_high": lambda r: [r.randint(0, 50) if i < 1500 else r.randint(240, 255) for i in range(3000)],
    "high_then_low": lambda r: [r.randint(240, 255) if i < 1500 else r.randint(0, 9) for i in range(3000)],
    "two_digit_window": lambda r: [r.randint(60, 130) for _ in range(3000)],
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("window", [(200, 255), (128, 255), (240, 300), (0, 127), (90, 110), (700, 827)])
@pytest.mark.parametrize("crash_at", [None, 400, 2900])
def test_probe_gives_the_findall_figures(catalogue, shape, window, crash_at):
    data = _shape_log(shape, crash_at)
    probed = prefilter_for(catalogue, True, window)
    assert probed.window == window  # the probe is compiled in, so the test compares two paths
    for size in (64 * 1024, 1 << 20):  # chunks that cut the values' runs, and one chunk
        a = _plain_scan(catalogue, shape, crash_at, size)
        b = scan(iter_chunks(io.BytesIO(data), size=size), probed)
        assert _figures(b) == _figures(a)
    assert a.load.peak_running and a.load.prefill_lines  # the log has figures to get right


# The 18 logs (shape, crash) and their scans without a probe, made once for the six windows
# each is probed with: half of this file's time was making and scanning them again per window.
_PLAIN: dict[tuple[str, int | None, int], object] = {}


@functools.cache
def _shape_log(shape: str, crash_at: int | None) -> bytes:
    return _log(7, SHAPES[shape](random.Random(3)), crash_at)


def _plain_scan(catalogue, shape: str, crash_at: int | None, size: int):  # noqa: ANN001, ANN202
    key = (shape, crash_at, size)
    if key not in _PLAIN:
        _PLAIN[key] = scan(iter_chunks(io.BytesIO(_shape_log(shape, crash_at)), size=size), prefilter_for(catalogue, True))
    return _PLAIN[key]


@pytest.mark.parametrize("text", [
    b"Decode batch. #running-req: 0250, #token: 1\nDecode batch. #running-req: 251, #token: 1\n",  # leading zero
    b"Decode batch. #running-req: 2500\nDecode batch. #running-req: 251, #token: 1\n",  # over, no comma
    b"Decode batch. #running-req: 25\nDecode batch. #running-req: 2\n",  # under, no comma
    b"Decode batch. #running-req: 253",  # no newline at the end
    b"Decode batch. #running-req: " + b"9" * 5000 + b", #token: 1\nDecode batch. #running-req: 251, #token: 1\n",
    b"Prefill batch. #new-seq: 1, #new-token: " + b"7" * 30 + b", #cached-token: 1, #running-req: 3\n"
    b"Prefill batch. #new-seq: 1, #new-token: 5, #cached-token: 2, #running-req: 250\n",
])
def test_probe_edge_values(catalogue, text):
    plain, probed = prefilter_for(catalogue, True), prefilter_for(catalogue, True, (200, 327))
    assert _figures(scan([text], probed)) == _figures(scan([text], plain))


def test_guard_fires_on_every_value_over_the_window_and_no_other():
    db = hyperscan.Database()
    db.compile(expressions=probe_expressions(100, 327)[0:1], ids=[0], elements=1, flags=[0])

    def fires(text: bytes) -> bool:
        fired: list[tuple] = []
        db.scan(text, match_event_handler=lambda *a: fired.append(a))
        return bool(fired)

    for v in range(0, 20000, 7):
        assert fires(b"#running-req: %d, x" % v) == (v > 327), v
    assert fires(b"#running-req: 0123, x")  # a leading zero is not read as the literal 123


def test_window_is_sampled_around_the_largest_value(tmp_path, monkeypatch):
    # "big" lowered from 64 MiB to 8 MiB: the 64 slices of 64 KiB still sample the whole file
    # (every 128 KiB instead of every 1 MiB), and the test writes 17 MB, not 134 MB
    from triage.pipeline import scan as scan_mod

    big = 8 * 1024 * 1024
    monkeypatch.setattr(scan_mod, "PROBE_MIN_BYTES", big)
    sampled = scan_mod.PROBE_SAMPLES * scan_mod.PROBE_SAMPLE_BYTES
    assert sampled <= big // 2  # slices apart, not the whole file read
    path = tmp_path / "big.log"
    data = _log(1, [random.Random(i).randint(300, 700) for i in range(4000)])
    path.write_bytes(data * (big // len(data) + 1))
    lo, hi = load_window(str(path), path.stat().st_size)
    assert lo <= 700 <= hi and hi - lo + 1 == 128
    assert load_window(str(path), 1024) is None  # a small log is not worth a probe
    assert load_window(str(path), big - 1) is None  # nor one just under the size
    none = tmp_path / "vllm.log"
    none.write_bytes(b"Avg prompt throughput: 1.0 tokens/s, Running: 3 reqs\n" * (big * 70 // 64 // 50))
    assert load_window(str(none), none.stat().st_size) is None


def test_digits_that_are_no_figure_are_skipped_not_a_crash(catalogue):
    """A run of 5,000 digits (int() refuses over 4,300) or a `1.2.3` on a load line, the last
    one before the crash: the figures come from the lines that hold real ones."""
    from triage.pipeline.analyze import analyze_text

    load = ("[2025-09-14 06:14:29 TP0] Decode batch. #running-req: " + "9" * 5000 + ", #token: 1, token usage: "
            "0.3.5, cuda graph: False, gen throughput (token/s): 1.2.3, #queue-req: " + "8" * 5000)
    text = "\n".join([
        "[2025-09-14 06:14:28 TP0] Prefill batch. #new-seq: 1, #new-token: 12, #cached-token: 3, token usage: 0.30, "
        "#running-req: 3, #queue-req: 0", load,
        "[2025-09-14 06:14:30 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl/scheduler.py", line 10, in event_loop', "    self.run()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", ""])
    report = analyze_text(text, catalogue)
    assert report.timeline.peak_running is not None and report.timeline.peak_running.running == 3
    last = report.timeline.last_load
    assert last is not None and last.line == 2
    assert (last.running, last.queued, last.token_usage, last.throughput) == (None, None, None, None)
