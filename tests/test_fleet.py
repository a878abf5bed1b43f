"""`triage fleet` on the local pool: counts, leaderboard, servers, --since, retries, sources.

The Ray run and its comparison with this one are in test_fleet_ray.py.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import signal
import socket
import time
from datetime import datetime

import pytest
from conftest import run_cli
from fleet_archive import GPUS, SIGNATURES, make_archive

from triage.commands.fleet import worker
from triage.commands.fleet.run import FleetOptions, run_fleet
from triage.commands.fleet.source import LogFile, place_of
from triage.commands.fleet.when import parse_since, real_time
from triage.core.errors import TriageError


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return make_archive(tmp_path_factory.mktemp("fleet") / "archive", servers=6, per_server=8)


@pytest.fixture(scope="module")
def local_doc(archive):
    p = run_cli("fleet", str(archive.root), "--format", "json", "--jobs", "2", "--batch", "8", "--no-redact")
    return p, json.loads(p.stdout)


def test_summary_counts_read_failed_and_skipped(archive, local_doc):
    p, doc = local_doc
    assert p.returncode == 1  # failures found
    s = doc["summary"]
    assert s == {"files": archive.logs + archive.empty + 1, "read": archive.logs, "failed": 1,
                 "skipped": archive.empty, "with_failure": archive.logs - archive.counts["healthy"], "groups": 6}
    assert [e["path"] for e in doc["errors"]] == archive.broken  # reported, not dropped
    assert "corrupt" in doc["errors"][0]["error"]
    err = p.stderr.decode()
    assert err.count("\n") == 1 and err.startswith("triage: error: 1 log(s)") and "Traceback" not in err


def test_leaderboard_groups_by_signature_and_fingerprint(archive, local_doc):
    _, doc = local_doc
    rows = {r["key"]: r for r in doc["leaderboard"]}
    for kind, sig in SIGNATURES.items():
        r = rows[sig]
        assert r["known"] and r["logs"] == archive.counts[kind] and r["servers"] == archive.servers
    oom = rows["torch-cuda-out-of-memory"]  # from .gz logs, vLLM 0.6.0, MM-DD stamps
    assert oom["engines"] == {"vllm 0.6.0": archive.counts["oom-gz"]}
    assert oom["first_seen"] == "2026-09-03T08:16:57"  # year from the files' mtime (Nov 2026)
    assert oom["top_workaround"]["id"] and oom["top_workaround"]["logs"] == archive.counts["oom-gz"]
    assert oom["fix"]["no_upstream_fix"]
    assert oom["example"].endswith(".log.gz")
    unknown = [r for r in doc["leaderboard"] if not r["known"]]
    assert len(unknown) == 1  # one fingerprint across servers despite ranks, paths and numbers
    u = unknown[0]
    assert u["logs"] == archive.counts["unknown"] and u["title"].startswith("ZeroDivisionError")
    # the host NCCL prints names the server, not the directory
    assert u["server_names"] == [f"gpu-node-{s:02d}.cluster" for s in range(archive.servers)]
    assert rows["system-segfault"]["server_names"] == [f"node{s:02d}" for s in range(archive.servers)]
    assert u["first_seen"] < u["last_seen"]
    assert u["gpus"] == {GPUS[0]: 3, GPUS[1]: 3}  # even servers print one model, odd ones the other
    ranks = [r["rank"] for r in doc["leaderboard"]]
    assert ranks == list(range(1, len(ranks) + 1))


def test_first_and_last_seen_counted_by_hand(local_doc):
    """The six servers' figures worked out from fleet_archive.py, not from its counters."""
    rows = {r["key"]: r for r in local_doc[1]["leaderboard"]}
    # the unknown crash is server s's log n = 8s + 4, stamped [2026-11-(10 + n % 18) 1(n % 10):00:00]:
    # 11-14 14:00, 11-22 12:00, 11-12 10:00, 11-20 18:00, 11-10 16:00, 11-18 14:00
    u = next(r for r in rows.values() if not r["known"])
    assert (u["first_seen"], u["last_seen"]) == ("2026-11-10T16:00:00", "2026-11-22T12:00:00")
    assert u["example"].endswith("/node01/serve-4.log")  # the log it was seen in last
    assert u["engines"] == {"sglang": 6} and u["servers"] == 6 and u["logs"] == 6
    # a segfault prints no time: each is placed at its file's mtime, server s at 2026-11-(10 + s) 12:00
    seg = rows["system-segfault"]
    assert (seg["first_seen"], seg["last_seen"]) == ("2026-11-10T12:00:00", "2026-11-15T12:00:00")
    assert seg["example"].endswith("/node05/serve-2.log") and seg["fatal_logs"] == 6
    # vLLM prints MM-DD: the year is the files' (2026), although the crash is from May
    assert rows["vllm-max-seq-len-exceeds-kv-cache"]["first_seen"] == "2026-05-12T10:11:44"
    assert rows["vllm-max-seq-len-exceeds-kv-cache"]["engines"] == {"vllm 0.9.1": 6}
    assert rows["sglang-torch-compile-stream-capturing"]["first_seen"] == "2025-03-18T09:14:20"  # a full date is kept as printed


def test_nothing_in_the_archive_goes_uncounted(tmp_path, monkeypatch):
    """A dangling link, a FIFO, a corrupt and a truncated .gz and a directory that cannot be listed
    are each reported by name; a directory named like a log is walked; no FIFO is opened."""
    a = make_archive(tmp_path / "archive", servers=1, per_server=2)
    node = a.root / "node00"
    (node / "dangling.log").symlink_to(tmp_path / "gone.log")
    os.mkfifo(node / "pipe.log")  # opening it would block the worker for ever
    (node / "old.log").mkdir()
    (node / "old.log" / "inner.log").write_bytes((node / "serve-0.log").read_bytes())
    (node / "cut.log.gz").write_bytes(gzip.compress(b"INFO 11-10 08:00:01 x\n" * 100)[:40])
    locked = a.root / "node09"
    locked.mkdir()
    (locked / "serve.log").write_text("ERROR boom\n")
    real = os.scandir

    def scandir(path="."):  # what a directory without the read permission does (root ignores chmod)
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    t = run_fleet(str(a.root), FleetOptions(jobs=1))
    assert t.read == 3 and t.skipped == 1  # serve-0, serve-1, old.log/inner.log; empty.log
    why = {os.path.relpath(p, a.root): e for p, e in t.errors.items()}
    assert set(why) == {"node00/dangling.log", "node00/pipe.log", "node00/cut.log.gz", "node00/rotated.log.gz", "node09"}
    assert t.failed == len(why) == 5
    assert "no such file" in why["node00/dangling.log"] and "not a regular file" in why["node00/pipe.log"]
    assert "corrupt" in why["node00/cut.log.gz"] and "cannot list" in why["node09"]
    # the reason does not repeat the path the leaderboard lists it under ("path: path: ...")
    assert not any(e.startswith((str(a.root), f"'{a.root}")) for e in why.values()), why


def test_markdown_leaderboard_to_a_file(archive, tmp_path):
    out = tmp_path / "board.md"
    p = run_cli("fleet", str(archive.root / "node0[01]"), "-o", str(out), "-j", "2")
    assert p.returncode == 1 and p.stdout == b""
    text = out.read_text()
    assert text.startswith("# Fleet: ") and "| # | failure | servers | logs |" in text
    assert "`system-segfault`" in text and "unknown `" in text and "Could not analyse:" in text


def test_since_skips_old_files_and_old_failures(archive):
    since = datetime(2026, 11, 13)
    t = run_fleet(str(archive.root), FleetOptions(since=since, jobs=2, batch=8))
    recent = sum(1 for s in range(archive.servers) if 10 + s % 18 >= 13)
    assert t.read == recent * archive.per_server
    assert t.skipped == (archive.servers - recent) * archive.per_server + archive.empty
    assert t.failed == 1  # the corrupt file was written now: it is tried, and reported
    assert "vllm-max-seq-len-exceeds-kv-cache" not in t.groups  # crashed in May
    assert "sglang-torch-compile-stream-capturing" not in t.groups  # crashed in 2025
    assert all(g.first_seen is None or g.first_seen >= since for g in t.groups.values())


def test_a_worker_that_dies_is_retried_once_then_reported(tmp_path, monkeypatch):
    a = make_archive(tmp_path / "archive", servers=2, per_server=8)
    flaky, deadly = str(a.root / "node00" / "serve-0.log"), str(a.root / "node01" / "serve-2.log")
    died = tmp_path / "died-once"
    real = worker.analyse_file

    def dying(lf, cat, opts):
        if lf.path == deadly or (lf.path == flaky and not died.exists()):
            died.touch()
            os._exit(9)  # the worker process dies, not just the call
        return real(lf, cat, opts)

    monkeypatch.setattr(worker, "analyse_file", dying)  # forked workers inherit it
    t = run_fleet(str(a.root), FleetOptions(jobs=2, batch=4))
    assert t.read == a.logs - 1 and t.skipped == a.empty
    assert t.failed == 2 and set(t.errors) == {deadly, *a.broken}
    assert "a worker process died" in t.errors[deadly] and "twice" in t.errors[deadly]
    assert t.groups["vllm-max-seq-len-exceeds-kv-cache"].logs == 2  # the flaky one counted once


def test_a_file_that_fails_once_is_read_on_the_second_try(tmp_path, monkeypatch):
    a = make_archive(tmp_path / "archive", servers=1, per_server=8)
    calls: dict[str, int] = {}
    real = worker.analyse_file

    def flaky(lf, cat, opts):
        calls[lf.path] = calls.get(lf.path, 0) + 1
        if calls[lf.path] == 1:
            raise OSError(5, "Input/output error")
        return real(lf, cat, opts)

    monkeypatch.setattr(worker, "analyse_file", flaky)
    t = run_fleet(str(a.root), FleetOptions(jobs=1))
    assert t.read == a.logs and t.failed == 1 and set(t.errors) == set(a.broken)


def test_year_and_day_inferred_from_the_file_mtime():
    nye = datetime(2027, 1, 1, 0, 5).timestamp() - datetime(1970, 1, 1).timestamp()
    assert real_time("12-31 23:59:00", nye) == datetime(2026, 12, 31, 23, 59)  # vLLM, written next year
    assert real_time("01-01 00:01:00", nye) == datetime(2027, 1, 1, 0, 1)
    assert real_time("02-29 10:00:00", nye) == datetime(2024, 2, 29, 10)  # the last leap year
    assert real_time("23:50:00.123456", nye) == datetime(2026, 12, 31, 23, 50, 0, 123456)  # glog: the day before
    assert real_time("2025-06-24 22:26:45.5", nye) == datetime(2025, 6, 24, 22, 26, 45, 500000)
    assert real_time("2024-03-06T17:53:22.335714Z", None) == datetime(2024, 3, 6, 17, 53, 22, 335714)
    assert real_time("12-31 23:59:00", None) is None and real_time("nonsense", nye) is None


def test_since_accepts_dates_and_ages():
    now = datetime(2026, 12, 1, 12)
    assert parse_since("2026-11-24") == datetime(2026, 11, 24)
    assert parse_since("2026-11-24T08:00Z") == datetime(2026, 11, 24, 8)
    assert parse_since("7d", now) == datetime(2026, 11, 24, 12)
    assert parse_since("12h", now) == datetime(2026, 12, 1)


def test_server_is_the_parent_directory_or_the_name_at_the_top():
    assert place_of("/a/archive/node07/2026-11-30/serve.log", "/a/archive") == "2026-11-30"
    assert place_of("/a/archive/node07/serve.log.gz", "/a/archive") == "node07"
    assert place_of("/a/archive/host17.log.gz", "/a/archive") == "host17"


def test_driver_memory_does_not_grow_with_logs(tmp_path):
    from triage.commands.fleet.board import Tally
    from triage.pipeline.analyze import analyze_file

    log = tmp_path / "n" / "serve.log"
    log.parent.mkdir()
    log.write_text("[2026-11-10 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   '  File "/x/sglang/srt/managers/scheduler.py", line 1, in run\n    f()\n'
                   "ZeroDivisionError: boom\n")
    rep = analyze_file(str(log), worker.catalogue(()))
    sizes = []
    for n in (10, 1000):
        t = Tally()
        for i in range(n):
            worker.add_report(t, rep, LogFile(f"/archive/n{i % 5}/serve-{i}.log", 1.8e9, 10, f"n{i % 5}"), None, None)
        sizes.append(len(pickle.dumps(t)))
    assert sizes[1] - sizes[0] < 64  # counts grow, the aggregates do not


def test_fsspec_sources(archive, tmp_path):
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed (pip install fsspec)")
    fs = fsspec.filesystem("memory")
    for name in ("node00/serve-0.log", "node00/serve-2.log", "node03/serve-3.log.gz", "node03/serve-1.log"):
        fs.pipe(f"/fleet/{name}", (archive.root / name).read_bytes())
    t = run_fleet("memory://fleet", FleetOptions(jobs=1))  # memory:// lives in this process only
    assert (t.read, t.failed, t.skipped, t.with_failure) == (4, 0, 0, 3)
    assert t.groups["torch-cuda-out-of-memory"].servers == {"node03"}
    example = t.groups["torch-cuda-out-of-memory"].example[1]
    assert example.startswith("memory://") and example.endswith("/fleet/node03/serve-3.log.gz")
    t = run_fleet(f"file://{archive.root}/node0[01]/*.log*", FleetOptions(jobs=2))
    assert t.read == 2 * archive.per_server and t.failed == 1


def test_an_object_store_prefix_is_listed_a_directory_at_a_time(archive, monkeypatch):
    """fs.find would hold every object of a bucket at once; a prefix that cannot be listed is
    reported, not skipped; hidden prefixes are not entered."""
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed (pip install fsspec)")
    fs = fsspec.filesystem("memory")
    for name in ("node00/serve-2.log", "node01/serve-2.log", "node02/serve-2.log", ".tmp/serve-2.log"):
        fs.pipe(f"/walked/{name}", (archive.root / "node00" / "serve-2.log").read_bytes())
    real_ls = type(fs).ls

    def ls(self, path, detail=True, **kw):
        if path.rstrip("/").endswith("node02"):
            raise PermissionError(13, "Access Denied", path)
        return real_ls(self, path, detail=detail, **kw)

    monkeypatch.setattr(type(fs), "ls", ls)
    monkeypatch.setattr(type(fs), "find", lambda *a, **k: pytest.fail("listed the whole prefix at once"))
    t = run_fleet("memory://walked", FleetOptions(jobs=1))
    assert t.read == 2 and t.groups["system-segfault"].servers == {"node00", "node01"}
    assert t.failed == 1 and [(p, "cannot list" in e) for p, e in t.errors.items()] == [("memory:///walked/node02", True)]


def _closed_port() -> int:
    """A loopback port where nothing listens (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ray_address_where_nothing_listens_is_one_line_and_exit_2(archive):
    """ray.init would retry such an address for minutes, printing a warning every few seconds."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'triage[ray]' (the test extra has it)")
    port = _closed_port()

    def hung(*_):  # without the check, ray.init would hold the suite for minutes
        pytest.fail("--ray with an address where nothing listens did not return within 60 s")

    signal.signal(signal.SIGALRM, hung)
    for ray_opt, env in ((f"127.0.0.1:{port}", {}), (f"ray://127.0.0.1:{port}", {}),
                         ("auto", {"RAY_ADDRESS": f"127.0.0.1:{port}"})):
        t0 = time.process_time()
        signal.alarm(60)
        try:
            p = run_cli("fleet", str(archive.root), "--ray", ray_opt, env=env)
        finally:
            signal.alarm(0)
        err = p.stderr.decode()
        assert p.returncode == 2 and p.stdout == b"", err
        assert err == f"triage: error: --ray {ray_opt}: cannot reach 127.0.0.1:{port} (Connection refused); " \
                      "is the Ray head running there?\n"
        assert time.process_time() - t0 < 5  # no retry loop


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    p = run_cli("fleet", str(tmp_path / "missing"), "--since", "7d")
    err = p.stderr.decode()
    assert p.returncode == 2 and err == f"triage: error: {tmp_path / 'missing'}: no such file or directory\n"
    log = tmp_path / "a" / "serve.log"
    log.parent.mkdir()
    log.write_bytes(b"ERROR boom\n")
    p = run_cli("fleet", str(tmp_path / "a"), "-o", str(log))
    assert p.returncode == 2 and b"refusing to overwrite" in p.stderr and log.read_bytes() == b"ERROR boom\n"
    (tmp_path / "empty").mkdir()
    for source, since, words in ((str(tmp_path / "empty"), None, "no file to analyse"),
                                 (str(tmp_path), "last tuesday", "--since last tuesday"),
                                 ("s3://no-such-bucket-triage/logs", None, "s3://no-such-bucket-triage/logs")):
        with pytest.raises(TriageError) as e:
            run_fleet(source, FleetOptions(since=parse_since(since) if since else None, jobs=1))
        assert words in str(e.value) and "\n" not in str(e.value)


def test_a_second_run_in_one_process_sees_an_edited_catalogue(tmp_path):
    """The driver's catalogue is loaded afresh for each run: an extra signature added between
    two runs in one process (a notebook, a service) is used by the second."""
    from hostile_catalogue import SIG, WK

    logs = tmp_path / "archive" / "node00"
    logs.mkdir(parents=True)
    (logs / "server.log").write_text("[2025-01-01 00:00:00] ERROR RuntimeError: frobnicator exploded at step 3\n")
    cat = tmp_path / "cat"
    (cat / "signatures").mkdir(parents=True)
    (cat / "workarounds").mkdir()
    opts = FleetOptions(jobs=1, catalogue_dirs=[str(cat)])
    before = run_fleet(str(tmp_path / "archive"), opts)
    (cat / "workarounds" / "restart.yaml").write_text(WK)
    (cat / "signatures" / "frob.yaml").write_text(SIG.format(pattern=r"frobnicator exploded at step \d+",
                                                             example="at step 3"))
    after = run_fleet(str(tmp_path / "archive"), opts)
    assert "my-frobnicator-exploded" not in before.groups
    assert "my-frobnicator-exploded" in after.groups, list(after.groups)


def test_a_pool_that_breaks_before_a_submit_loses_no_batch(monkeypatch):
    """A worker can die between the driver's wait and its next submit: the pool then refuses
    the batch outright (BrokenProcessPool from submit, not from a result). That batch never ran;
    it goes to the next pool, and every batch comes back once (it used to end the whole run)."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures.process import BrokenProcessPool
    from types import SimpleNamespace

    from triage.commands.fleet import runners

    pools: list[ThreadPoolExecutor] = []

    class Refusing(ThreadPoolExecutor):
        def __init__(self, accept: int) -> None:
            super().__init__(1)
            self.accept = accept

        def submit(self, fn, /, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            if self.accept == 0:
                raise BrokenProcessPool("a child process terminated abruptly")
            self.accept -= 1
            return super().submit(fn, *args, **kwargs)

    def pool(self):  # noqa: ANN001, ANN202
        pools.append(Refusing(2 if not pools else 10**6))
        return pools[-1]

    monkeypatch.setattr(runners.LocalPool, "_pool", pool)
    monkeypatch.setattr(runners, "analyse_batch", lambda b, job: [f.path for f in b])
    batches = [[SimpleNamespace(path=f"log{i}")] for i in range(6)]
    out = list(runners.LocalPool(jobs=1).map(iter(batches), job=None))
    assert sorted(b[0].path for b, _ in out) == [f"log{i}" for i in range(6)]  # each once
    assert all(result == [b[0].path] for b, result in out)  # none lost as "a worker process died"
    assert len(pools) == 2
