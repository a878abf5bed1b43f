"""`analyze --format html`: one self-contained page (nothing fetched, no script) whose markup is
well formed, with the SVG timeline's lanes, log text escaped, and a load series that stays
bounded on a long log without losing its spike."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from triage.pipeline.analyze import Options, analyze_file
from triage.pipeline.loadseries import MAX_BUCKETS

EXAMPLES = sorted((FIXTURES.parent.parent / "examples").glob("*.log"))
HOST = FIXTURES / "host"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# elements drawn inside <svg> that have no content: written as <rect .../> in HTML's foreign content
SVG_EMPTY = {"rect", "line", "polyline", "polygon", "circle", "path"}


class Strict(HTMLParser):
    """A parse that fails on what a browser would silently repair: an end tag that closes
    nothing open or skips an open element, an element left open at the end, a duplicate id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.style = ""
        self.doctype = False
        self._in_style = False

    def handle_decl(self, decl: str) -> None:
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if "id" in a:
            if a["id"] in self.ids:
                self.errors.append(f"duplicate id {a['id']}")
            self.ids.add(a["id"] or "")
        if tag not in VOID:
            self.stack.append(tag)
        self._in_style = tag == "style"

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID and tag not in SVG_EMPTY:
            self.errors.append(f"<{tag}/> is not an empty element")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            self.errors.append(f"</{tag}> closes a void element")
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> while {self.stack[-3:]} are open")
            if tag in self.stack:
                while self.stack.pop() != tag:
                    pass
            return
        self.stack.pop()
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data


def parse(page: str) -> Strict:
    p = Strict()
    p.feed(page)
    p.close()
    assert p.doctype, "no <!DOCTYPE html>"
    assert not p.errors, p.errors[:5]
    assert not p.stack, f"left open: {p.stack}"
    return p


def self_contained(p: Strict, page: str) -> None:
    """Nothing the page would fetch: no script at all, no stylesheet link, no src, no CSS url()
    or @import; links only to upstream pages, as plain <a href>."""
    names = [t for t, _ in p.tags]
    assert "script" not in names and "link" not in names and "iframe" not in names and "img" not in names
    for tag, attrs in p.tags:
        assert "src" not in attrs and "srcset" not in attrs, tag
        if "href" in attrs:
            assert tag == "a" and (attrs["href"] or "").startswith(("https://", "http://")), (tag, attrs)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)  # no event handler either
    assert "@import" not in p.style and "url(" not in p.style
    assert not re.search(r"<script\b", page, re.I)


def html_of(path: Path | str, *args: str, code: int = 1) -> str:
    p = run_cli("analyze", str(path), "--format", "html", *args)
    assert p.returncode == code, p.stderr.decode()[-2000:]
    return p.stdout.decode()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_is_a_valid_self_contained_page(example):
    page = html_of(example)
    p = parse(page)
    self_contained(p, page)
    svgs = [a for t, a in p.tags if t == "svg"]
    assert svgs and svgs[0]["id"] == "timeline"
    lanes = {a["id"] for t, a in p.tags if t == "g" and "lane" in (a.get("class") or "")}
    assert {"lane-phases", "lane-events"} <= lanes
    assert "prefers-color-scheme: dark" in p.style and "@media print" in p.style
    assert len(page) < 300_000


def test_the_crash_log_draws_its_load_lanes_and_the_zoomed_window():
    p = parse(html_of(EXAMPLES[[e.name for e in EXAMPLES].index("sglang-nsa-crash.log")]))
    ids = [a.get("id") for t, a in p.tags if t in ("svg", "g")]
    assert ids.count("timeline") == 1 and ids.count("timeline-zoom") == 1
    for lane in ("lane-running", "lane-queued", "lane-token_usage", "lane-throughput", "lane-cache_hit"):
        assert lane in ids
    assert any(t == "path" and "fail strong" in (a.get("class") or "") for t, a in p.tags), "the crash's marker"
    assert any(t == "line" and a.get("class") == "crash-line" for t, a in p.tags)


def test_log_text_is_escaped_never_markup(tmp_path):
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    log = tmp_path / "server.log"
    log.write_text(
        "[2025-06-24 22:26:45] server_args=ServerArgs(model_path='m', tp_size=1)\n"
        f"[2025-06-24 22:27:55 TP0] Decode batch. #running-req: 3, #token: 10, token usage: 0.10, "
        f"gen throughput (token/s): 5.00, #queue-req: 0 {evil}\n"
        "[2025-06-24 22:27:56 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/scheduler.py", line 1, in run\n'
        "    raise ValueError(x)\n"
        f"ValueError: bad {evil}\n")
    page = html_of(log)
    p = parse(page)
    self_contained(p, page)
    assert "&lt;script&gt;" in page and "onerror=alert" in page  # shown as text
    assert not any(t == "img" for t, _ in p.tags)


def _load_log(path: Path, lines: int, spike_at: int) -> None:
    with path.open("w") as fh:
        fh.write("[2025-06-24 00:00:00] server_args=ServerArgs(model_path='m', tp_size=1)\n")
        for i in range(lines):
            running = 9999 if i == spike_at else 100 + i % 7
            h, rest = divmod(i // 10, 3600)
            stamp = f"2025-06-24 {h % 24:02d}:{rest // 60:02d}:{rest % 60:02d}"
            fh.write(f"[{stamp} TP0] Decode batch. #running-req: {running}, #token: 5000, token usage: 0.25, "
                     f"cuda graph: True, gen throughput (token/s): 900.00, #queue-req: {i % 3}\n")


def test_a_long_series_is_bounded_and_keeps_its_spike(tmp_path, monkeypatch):
    from triage.pipeline import scan as scan_mod

    log = tmp_path / "long.log"
    _load_log(log, 40_000, spike_at=23_457)  # 78 load lines per bucket
    r = analyze_file(str(log), options=Options(chart=True, workers=1))
    chart = r.chart
    assert chart is not None and chart.load_lines == 40_000
    assert MAX_BUCKETS // 2 <= len(chart.points) <= MAX_BUCKETS
    assert max(p.values["running"][1] for p in chart.points) == 9999
    spike = next(p for p in chart.points if p.values["running"][1] == 9999)
    assert spike.line <= 23_459 <= spike.end_line  # the log's line 1 is the launch line
    # the same on two workers, whose byte ranges are merged: a 6 MB log is split only below the
    # 64 MB a real run waits for (the 30 MB this test used to write was read whole, twice)
    monkeypatch.setattr(scan_mod, "PARALLEL_MIN_BYTES", 0)
    merged: list[int] = []
    real_merge = scan_mod.merge

    def counting(parts):  # noqa: ANN001, ANN202
        merged.append(len(parts))
        return real_merge(parts)

    monkeypatch.setattr(scan_mod, "merge", counting)
    two = analyze_file(str(log), options=Options(chart=True, workers=2)).chart
    assert merged == [2], merged
    assert two is not None and two.load_lines == 40_000 and len(two.points) <= MAX_BUCKETS
    assert max(p.values["running"][1] for p in two.points) == 9999


def test_json_is_untouched_by_the_chart(tmp_path):
    """The series feeds only the HTML: no key of it in the JSON, and none is folded for it."""
    log = EXAMPLES[[e.name for e in EXAMPLES].index("sglang-nsa-crash.log")]
    r = analyze_file(str(log))
    assert r.chart is None
    assert "chart" not in r.model_dump() and "chart" not in run_cli("analyze", str(log), "-f", "json").stdout.decode()


def test_a_log_without_load_lines_says_so_and_still_places_its_marks(tmp_path):
    page = html_of(FIXTURES / "vllm-v1-max-seq-len.log")
    p = parse(page)
    self_contained(p, page)
    assert "No load figures" in page
    assert not any(a.get("data-metric") for t, a in p.tags if t == "g")


def test_a_healthy_log_has_no_crash_window():
    page = html_of(FIXTURES / "sglang-clean.log", code=0)
    p = parse(page)
    ids = {a.get("id") for t, a in p.tags}
    assert "timeline" in ids and "timeline-zoom" not in ids
    assert 'class="verdict ok"' in page


def test_host_events_get_their_own_lane():
    page = html_of(HOST / "xid79-nccl" / "server.log", "--with", str(HOST / "xid79-nccl" / "dmesg-T.txt"))
    p = parse(page)
    lane = [a for t, a in p.tags if t == "g" and a.get("id") == "lane-host"]
    assert lane, "no host lane"
    assert any(t == "rect" and "marker host" in (a.get("class") or "") for t, a in p.tags)
    assert "Host records" in page
    # on the chart's clock: the Xid ten minutes before the NCCL watchdog's failure, whose own
    # glog-style line has no timestamp the parser reads (the next stamped line gives its time)
    from triage.commands.analyze import analyze_logs

    r = analyze_logs([str(HOST / "xid79-nccl" / "server.log")], options=Options(chart=True),
                     with_records=[str(HOST / "xid79-nccl" / "dmesg-T.txt")]).reports[0]
    assert r.chart is not None
    crash = next(m for m in r.chart.marks if m.kind == "failure" and m.strong)
    xid = next(m for m in r.chart.marks if m.kind == "host" and "Xid 79" in m.label)
    assert crash.seconds is not None and xid.seconds is not None
    assert 590 <= crash.seconds - xid.seconds <= 620


def test_html_is_for_one_log(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text((FIXTURES / "sglang-clean.log").read_text())
    b.write_text((FIXTURES / "sglang-clean.log").read_text())
    p = run_cli("analyze", str(a), str(b), "--format", "html")
    assert p.returncode == 2 and b"give a single LOG" in p.stderr and not p.stdout
    assert len(p.stderr.decode().strip().splitlines()) == 1
    p = run_cli("fleet", str(tmp_path), "--format", "html")
    assert p.returncode == 2 and not p.stdout


def test_ranks_that_differ_get_a_line_each(tmp_path):
    """SGLang with data parallelism prints a decode line per DP rank: one line per rank where
    their figures differ, one line where every rank printed the same."""
    rows = []
    for i in range(60):
        for dp, tp, running in ((0, 0, 10 + i), (1, 8, 50)):
            rows.append(f"[2025-06-24 22:27:{i:02d} DP{dp} TP{tp}] Decode batch. #running-req: {running}, #token: 5, "
                        "token usage: 0.10, cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0\n")
    log = tmp_path / "dp.log"
    log.write_text("[2025-06-24 22:26:45] server_args=ServerArgs(model_path='m', dp_size=2)\n" + "".join(rows))
    chart = analyze_file(str(log), options=Options(chart=True)).chart
    assert chart is not None and chart.load_lines == 120
    assert {"running DP0", "running DP1"} <= set().union(*(p.values for p in chart.points))
    page = html_of(log, code=0)
    lane = page.split('id="lane-running"')[1].split("</g>")[0]
    assert lane.count("<polyline") == 2 and "per rank: DP0, DP1" in lane
    queued = page.split('id="lane-queued"')[1].split("</g>")[0]
    assert queued.count("<polyline") + queued.count("<circle") == 1  # the ranks' queues were the same


def test_a_restart_is_marked_and_its_phases_drawn(tmp_path):
    start = ("[2025-06-24 22:{m:02d}:00] server_args=ServerArgs(model_path='m', tp_size=1)\n"
             "[2025-06-24 22:{m:02d}:05 TP0] Load weight begin. avail mem=70.00 GB\n"
             "[2025-06-24 22:{m:02d}:20 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=30.00 GB\n"
             "[2025-06-24 22:{m:02d}:40] The server is fired up and ready to roll!\n")
    load = ("[2025-06-24 22:{m:02d}:{s:02d} TP0] Decode batch. #running-req: 4, #token: 5, token usage: 0.10, "
            "cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0\n")
    crash = ("[2025-06-24 22:{m:02d}:50 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
             '  File "/x/scheduler.py", line 1, in run\n    raise RuntimeError(x)\nRuntimeError: boom\n')
    text = (start.format(m=1) + "".join(load.format(m=1, s=41 + i) for i in range(8)) + crash.format(m=1)
            + start.format(m=3) + "".join(load.format(m=3, s=41 + i) for i in range(8)))
    log = tmp_path / "restart.log"
    log.write_text(text)
    chart = analyze_file(str(log), options=Options(chart=True)).chart
    assert chart is not None
    restarts = [m for m in chart.marks if m.kind == "restart"]
    assert [m.line for m in restarts] == [17]  # 4 start-up lines, 8 load lines, 4 of the crash
    assert [m.label for m in chart.marks if m.kind == "phase" and (m.line or 0) > 17] == ["loading weights",
                                                                                         "allocating KV cache", "serving"]
    page = html_of(log, code=0)  # the server served again after it: triage calls it request-level
    assert 'class="marker restart"' in page and page.count('class="phase phase-0"') == 2


@pytest.mark.parametrize("log", sorted(FIXTURES.glob("*.log*")), ids=lambda p: p.name)
def test_every_fixture_log_gives_a_valid_page(log):
    """The fixtures' shapes (eight ranks, a segfault, a .gz stream, interleaved vLLM workers, a
    clean start) each make a well-formed page that fetches nothing."""
    p = run_cli("analyze", str(log), "--format", "html")
    assert p.returncode in (0, 1), p.stderr.decode()[-2000:]
    page = p.stdout.decode()
    self_contained(parse(page), page)


def test_a_baseline_comparison_is_on_the_page():
    page = html_of(FIXTURES / "sglang-nsa-tp8.log", "--baseline", str(FIXTURES / "sglang-clean.log"))
    self_contained(parse(page), page)
    assert 'id="baseline"' in page and "Time to ready" in page


def test_the_source_atlas_site_and_what_its_check_reads_are_on_the_page(tmp_path):
    # SGLang 0.5.14's bare assert in ServerArgs._validate_mamba_extra_buffer (server_args.py:4377)
    log = tmp_path / "bare.log"
    log.write_text("\n".join([
        "[2026-01-05 10:00:00] sglang version 0.5.14", "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 4377, in '
        "_validate_mamba_extra_buffer", "    assert self.mamba_track_interval % self.page_size == 0",
        "AssertionError"]) + "\n")
    page = html_of(log)
    self_contained(parse(page), page)
    assert ("<strong>Raised at:</strong> <code>sglang/srt/server_args.py · ServerArgs._validate_mamba_extra_buffer · "
            "SGLang 0.5.14</code>") in page
    assert 'href="https://github.com/sgl-project/sglang/blob/v0.5.14/python/sglang/srt/server_args.py#L4377"' in page
    assert ("Derived from the source, not a confirmed workaround: the check that raised this reads "
            "<code>--mamba-track-interval</code>, <code>--page-size</code>") in page
