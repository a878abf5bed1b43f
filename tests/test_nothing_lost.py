"""Issue 35, "nothing lost": inputs that used to lose the crash or end in an internal error.

Each test goes through the command line (in this process: tests/conftest.py run_cli)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

CRASH = FIXTURES / "sglang-nsa-tp8.log"


# -- reading: stdin, compression, UTF-16, line ends, FIFOs, read errors (items 1, 3, 4, 10, 15) ---


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_analyze_stdin_redirected_from_a_regular_file(jobs):
    """`triage analyze - < server.log`: stdin is a regular file, which the byte-range workers
    used to reopen by its name, `-` (FileNotFoundError) whenever more than one job ran."""
    p = run_cli("analyze", "-", "-j", jobs, "--format", "json", stdin=CRASH)
    assert p.returncode == 1, p.stderr
    assert b"internal error" not in p.stderr
    doc = json.loads(p.stdout)
    assert doc["reports"][0]["source"] == "-" and doc["failures"]
    # the same report as for the file itself (but for its name)
    direct = json.loads(run_cli("analyze", str(CRASH), "--format", "json").stdout)
    assert [f["fingerprint"] for f in doc["failures"]] == [f["fingerprint"] for f in direct["failures"]]


def test_new_from_stdin_redirected_from_a_regular_file(tmp_path):
    log = tmp_path / "unknown.log"
    log.write_text("[2025-06-24 22:26:47 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   '  File "/x/frobnicate.py", line 77, in frobnicate_shards\n'
                   "    raise ValueError('shard 17 frobnication checksum mismatch')\n"
                   "ValueError: shard 17 frobnication checksum mismatch: 0x3f2a != 0x3f2b\n\n", encoding="utf-8")
    p = run_cli("new", "-", stdin=log)
    assert p.returncode == 0, p.stderr
    assert b"frobnication" in p.stdout


@pytest.mark.parametrize("command", ["analyze", "new"])
def test_closed_stdin_is_one_line(command):
    p = run_cli(command, "-", stdin_closed=True)
    assert p.returncode == 2
    assert p.stderr.decode().startswith("triage: error: -: stdin is closed")
    assert b"internal error" not in p.stderr and p.stderr.count(b"\n") == 1


def _compressed(fmt: str, data: bytes) -> bytes:
    import bz2
    import io
    import lzma
    import zipfile

    if fmt == "xz":
        return lzma.compress(data)
    if fmt == "bz2":
        return bz2.compress(data)
    if fmt == "zip":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("server.log", data)
        return buf.getvalue()
    if fmt == "zst":
        zstandard = pytest.importorskip("zstandard")
        return zstandard.ZstdCompressor().compress(data)
    lz4frame = pytest.importorskip("lz4.frame")
    return lz4frame.compress(data)


@pytest.mark.parametrize("fmt", ["xz", "bz2", "zip", "zst", "lz4"])
def test_compressed_logs_are_read_by_their_magic_bytes(tmp_path, fmt):
    """They read as "no failure found" (exit 0), and an .lz4 as a failure made up of its bytes."""
    blob = _compressed(fmt, CRASH.read_bytes())
    direct = json.loads(run_cli("analyze", str(CRASH), "--format", "json").stdout)
    for name in (f"server.log.{fmt}", "renamed.log"):  # the suffix does not matter
        f = tmp_path / name
        f.write_bytes(blob)
        p = run_cli("analyze", str(f), "--format", "json")
        assert p.returncode == 1, p.stderr
        doc = json.loads(p.stdout)
        assert [x["fingerprint"] for x in doc["failures"]] == [x["fingerprint"] for x in direct["failures"]]
    if fmt != "zip":  # a zip needs to seek: a pipe is refused (below)
        p = run_cli("analyze", "-", "--format", "json", stdin=blob)
        assert p.returncode == 1, p.stderr


@pytest.mark.parametrize("fmt", ["zst", "lz4"])
def test_zstd_and_lz4_without_their_package_are_refused(tmp_path, fmt, monkeypatch):
    magic = {"zst": b"\x28\xb5\x2f\xfd", "lz4": b"\x04\x22\x4d\x18"}[fmt]
    f = tmp_path / "server.log"
    f.write_bytes(magic + b"\x00" * 64 + b"Traceback (most recent call last):\nValueError: noise\n")
    for module in ("zstandard",) if fmt == "zst" else ("lz4", "lz4.frame"):
        monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    p = run_cli("analyze", str(f))
    assert p.returncode == 2
    line = p.stderr.decode()
    assert line.count("\n") == 1 and "not installed" in line and "triage[compression]" in line, line


@pytest.mark.parametrize(("fmt", "tool"), [("xz", "xz -dc"), ("bz2", "bzip2 -dc"), ("zst", "zstd -dc"), ("lz4", "lz4 -dc")])
def test_a_truncated_compressed_log_is_one_line(tmp_path, fmt, tool):
    """As for .gz: the crash is in the lost part, so a report of the head would say "no failure"
    (zstandard's own stream reader ends a cut frame in silence)."""
    blob = _compressed(fmt, CRASH.read_bytes())
    f = tmp_path / f"server.log.{fmt}"
    f.write_bytes(blob[: len(blob) // 2])
    p = run_cli("analyze", str(f))
    assert p.returncode == 2
    line = p.stderr.decode()
    assert line.count("\n") == 1 and "truncated or corrupt" in line and f"{tool} " in line, line


def test_zip_of_several_files_and_zip_from_a_pipe_are_refused(tmp_path):
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.log", "x\n")
        z.writestr("b.log", "y\n")
    f = tmp_path / "logs.zip"
    f.write_bytes(buf.getvalue())
    p = run_cli("analyze", str(f))
    assert p.returncode == 2 and b"zip archive of 2 files" in p.stderr
    p = run_cli("analyze", "-", stdin=_compressed("zip", CRASH.read_bytes()))
    assert p.returncode == 2 and b"cannot be read from a pipe" in p.stderr


def test_fleet_counts_a_compressed_crash_as_a_failure(tmp_path):
    d = tmp_path / "archive"
    d.mkdir()
    (d / "node1.log.xz").write_bytes(_compressed("xz", CRASH.read_bytes()))
    p = run_cli("fleet", str(d), "--format", "json")
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["summary"]["with_failure"] == 1


def test_stray_bom_before_a_utf8_log():
    """FF FE then UTF-8: decoded as UTF-16, the crash was lost ("no failure found", exit 0)."""
    p = run_cli("analyze", "-", "--format", "json", stdin=b"\xff\xfe" + CRASH.read_bytes())
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["failures"]


def _reads_as_the_crash(data: bytes) -> None:
    """`data` on stdin gives the crash log's failures, at the same lines."""
    p = run_cli("analyze", "-", "--format", "json", stdin=data)
    assert p.returncode == 1, p.stderr
    direct = json.loads(run_cli("analyze", str(CRASH), "--format", "json").stdout)
    doc = json.loads(p.stdout)
    assert doc["lines"] == direct["lines"]
    assert [f["line"] for f in doc["failures"]] == [f["line"] for f in direct["failures"]]


def test_utf16_head_then_utf8():
    """A PowerShell-written head, then a UTF-8 process appending to the same file."""
    lines = CRASH.read_bytes().splitlines(keepends=True)
    head = b"".join(lines[:5]).decode("utf-8").encode("utf-16")  # with its BOM
    _reads_as_the_crash(head + b"".join(lines[5:]))


def test_cr_only_line_ends():
    _reads_as_the_crash(CRASH.read_bytes().replace(b"\n", b"\r"))


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")
def test_analyze_of_a_fifo_without_a_writer_returns(tmp_path, monkeypatch):
    import contextlib
    import os
    import threading

    from triage.pipeline import read

    monkeypatch.setattr(read, "FIFO_WAIT", 0.3)
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def rescue() -> None:  # should the command block in open() after all, unblock it
        if not done.wait(20):
            with contextlib.suppress(OSError), open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):
                pass

    threading.Thread(target=rescue, daemon=True).start()
    try:
        p = run_cli("analyze", str(fifo))
    finally:
        done.set()
    assert p.returncode == 2
    assert b"no writer" in p.stderr and p.stderr.count(b"\n") == 1


def test_proc_self_mem_in_a_directory_is_that_files_error(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "server.log").write_bytes(CRASH.read_bytes())
    (d / "mem.log").symlink_to("/proc/self/mem")
    p = run_cli("analyze", str(d), "--format", "json", "-j", "1")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["failures"] and "mem.log" in " ".join(doc["summary"]["errors"])
    p = run_cli("analyze", "/proc/self/mem")
    assert p.returncode == 2 and b"internal error" not in p.stderr and p.stderr.count(b"\n") == 1, p.stderr


# -- which failure ended the process (item 5) -----------------------------------------------------


TS = "2025-06-24 22:26:47"
SERVING = (f"[{TS} TP0] Decode batch. #running-req: 7, #token: 2000, token usage: 0.01, "
           "gen throughput (token/s): 100.00, #queue-req: 0")
SCHEDULER_CRASH = [
    f"[{TS} TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2708, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 1951, in run_batch',
    "    out = self.tp_worker.forward_batch_generation(batch)",
    "KeyError: 'frobnicate-17'",
    "",
    f"[{TS}] Received sigquit from a child process. It usually means the child failed.",
]


@pytest.mark.parametrize("request_error", [
    [f"[{TS}] ERROR:    Exception in ASGI application", "Traceback (most recent call last):",
     '  File "/sgl/python/sglang/srt/entrypoints/http_server.py", line 300, in openai_v1_chat_completions',
     "    return await handler(request)",
     "ValueError: This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."],
    [f"[{TS}] Error in generate request: Traceback (most recent call last):",
     '  File "/sgl/python/sglang/srt/managers/tokenizer_manager.py", line 300, in generate_request',
     "    raise ValueError(msg)",
     "ValueError: The input (5000 tokens) is longer than the model's context length (4096 tokens)."],
], ids=["asgi", "generate"])
def test_a_request_error_then_serving_then_a_scheduler_crash(tmp_path, request_error):
    """The scheduler's traceback was read into the request's (its code lines went to the stream
    whose exception line came last), or the request error was taken for the crash."""
    log = tmp_path / "server.log"
    log.write_text("\n".join([f"[{TS}] server_args=ServerArgs(model_path='m', tp_size=1)",
                              f"[{TS}] The server is fired up and ready to roll!", SERVING,
                              *request_error, SERVING, *SCHEDULER_CRASH]) + "\n")
    p = run_cli("analyze", str(log), "--format", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    first, second = doc["failures"]
    assert first["exception"] == "KeyError" and first["fatal"]
    assert second["exception"] == "ValueError" and not second["fatal"]
    verdict = run_cli("analyze", str(log)).stdout.decode().split("**Verdict:**")[1].split("\n")[0]
    assert "KeyError" in verdict and "context length" not in verdict, verdict


# -- reports beside the logs; directories of non-logs (item 6) ------------------------------------


def test_a_report_written_beside_the_logs_is_not_read_back(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "node1.log").write_bytes(CRASH.read_bytes())
    (d / "node2.log").write_text("[2025-06-24 22:26:47] INFO: The server is fired up and ready to roll!\n")
    first = run_cli("analyze", str(d), "--format", "json")
    for fmt in ("markdown", "json"):
        p = run_cli("analyze", str(d), "-o", str(d / f"r.{fmt}"), "--format", fmt)
        assert p.returncode == 1, p.stderr
    again = run_cli("analyze", str(d), "--format", "json")
    assert json.loads(again.stdout)["summary"] == json.loads(first.stdout)["summary"]
    # the leaderboard too (its JSON is recognised by its fields, as the reports' above)
    run_cli("fleet", str(d), "-o", str(d / "board.md"))
    p = run_cli("fleet", str(d), "--format", "json")
    assert json.loads(p.stdout)["summary"]["read"] == 2, p.stdout


@pytest.mark.parametrize("command", ["analyze", "fleet"])
def test_a_directory_of_non_logs(tmp_path, command):
    """A README, a binary and an image: not "no failure found", exit 0, but one line saying that
    no file looked like a server log, how many were skipped and why, exit 2 (bad input)."""
    d = tmp_path / "stuff"
    d.mkdir()
    (d / "README.md").write_text("# Notes\n\nNothing to see here.\n")
    (d / "blob.bin").write_bytes(bytes(range(256)) * 64)
    (d / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    p = run_cli(command, str(d), "-j", "1")
    assert p.returncode == 2 and not p.stdout, (p.returncode, p.stdout[:300])
    line = p.stderr.decode()
    assert line.count("\n") == 1 and line.startswith("triage: error: "), line
    assert "no file looks like a server log; 3 files skipped (2 binary: blob.bin, logo.png; " in line, line
    assert "1 text with no timestamp, engine line or failure: README.md)" in line, line
    # --exit-zero does not hide bad input; the same line with a process pool (fleet's batches of one)
    assert run_cli(command, str(d), "--exit-zero").returncode == 2
    if command == "fleet":
        assert run_cli("fleet", str(d), "-j", "2", "--batch", "1").stderr.decode() == line
    # beside a healthy log: as before, no failure, exit 0
    (d / "server.log").write_text("[2025-06-24 22:26:47] INFO: The server is fired up and ready to roll!\n")
    p = run_cli(command, str(d), "--format", "json")
    assert p.returncode == 0, p.stderr
    if command == "fleet":
        assert json.loads(p.stdout)["summary"]["read"] == 4
        return
    notes = {Path(r["source"]).name: r["notes"] for r in json.loads(p.stdout)["reports"]}
    assert any("looks like a server log" in n for n in notes["README.md"])
    assert not any("looks like a server log" in n for n in notes["server.log"])
    # beside a crashed one: exit 1
    (d / "crash.log").write_bytes(CRASH.read_bytes())
    assert run_cli(command, str(d)).returncode == 1


# -- triage new on a failure only a generic signature names (item 7) ------------------------------


def test_new_accepts_a_failure_only_a_generic_signature_matched(tmp_path):
    import fakeserver

    log = tmp_path / "crash.log"
    log.write_text("\n".join([fakeserver.server_args([]), *fakeserver.HEAD, *fakeserver.UNKNOWN_CRASH]) + "\n")
    report = run_cli("analyze", str(log))
    assert report.returncode == 1 and "**Verdict:** unknown failure" in report.stdout.decode()
    p = run_cli("new", str(log))
    assert p.returncode == 0, p.stderr
    assert b"frobnication" in p.stdout


# -- run and watch: signals, full disk, timeouts, retry, status lines (items 2, 9, 10, 12, 15, 16) ---


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_run_server_killed_by_sigkill_while_loading(tmp_path):
    """A server SIGKILLed (the OOM killer) while loading: the report says so and triage exits
    137, as a shell would, instead of "no failure found" and 1."""
    log = tmp_path / "server.log"
    script = ("echo '[2025-06-24 22:26:47 TP0] Load weight begin. avail mem=137.09 GB'; "
              "echo '[2025-06-24 22:26:47 TP0] Loading safetensors checkpoint shards:  27% Completed | 45/163'; "
              "kill -9 $$")
    p = run_cli("run", "--log", str(log), "--grace", "0.2", "--", "sh", "-c", script)
    assert p.returncode == 137, p.stderr
    out = p.stdout.decode()
    assert "killed by SIGKILL (signal 9) while loading weights" in out, out
    assert "no failure found" not in out
    assert "killed by SIGKILL (signal 9)" in p.stderr.decode()
    # JSON: the exit event carries the raw status and the shell's code
    p = run_cli("run", "--log", str(log), "--grace", "0.2", "--format", "json", "--", "sh", "-c", script)
    assert p.returncode == 137
    last = json.loads(p.stdout.decode().splitlines()[-1])
    assert last["event"] == "exit" and last["status"] == -9 and last["exit_code"] == 137


@pytest.mark.parametrize("value", ["nan", "-5", "inf"])
def test_non_finite_or_negative_timeout_is_a_usage_error(tmp_path, value):
    log = tmp_path / "server.log"
    log.write_text("x\n")
    for argv in (["watch", str(log), f"--timeout={value}"], ["run", f"--timeout={value}", "--", "true"]):
        p = run_cli(*argv)
        assert p.returncode == 2 and b"--timeout" in p.stderr, p.stderr


FULL = Path("/dev/full")


class _FullDisk:
    """A log file on a disk that fills up: the first write lands, every later one fails ENOSPC."""

    def __init__(self, fh) -> None:  # noqa: ANN001
        self._fh, self.name, self._writes = fh, fh.name, 0

    def write(self, data: bytes) -> int:
        import errno

        self._writes += 1
        if self._writes > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._fh.write(data)

    def __getattr__(self, name: str):  # noqa: ANN204 - flush, close, fileno: the real file's
        return getattr(self._fh, name)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell")
def test_run_log_on_a_full_disk_stops_the_server(tmp_path, monkeypatch):
    """The tee thread died with a raw ENOSPC traceback and the server's exit was never seen."""
    import os
    import time

    import triage.commands.run as run

    real = run.open_stream
    monkeypatch.setattr(run, "open_stream", lambda *a, **k: _FullDisk(real(*a, **k)))
    pid_file, log = tmp_path / "pid", tmp_path / "server.log"
    started = time.monotonic()
    p = run_cli("run", "--log", str(log), "--", "sh", "-c",
                f"echo $$ > {pid_file}; echo starting; sleep 0.3; echo more; exec sleep 60")
    assert time.monotonic() - started < 30
    assert p.returncode == 2
    err = p.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err
    assert f"triage: error: --log {log}: cannot write (No space left on device); the server was stopped" in err, err
    pid = int(pid_file.read_text())
    stat = Path(f"/proc/{pid}/stat")
    if stat.exists():  # gone, or a zombie nobody reaped yet
        assert stat.read_text().split()[2] == "Z"
    else:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.skipif(not FULL.exists(), reason="needs /dev/full")
def test_watch_output_on_a_full_disk(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(CRASH.read_bytes())
    for fmt in ("markdown", "json"):
        p = run_cli("watch", str(log), "--timeout", "5", "--grace", "0.1", "-o", str(FULL), "--format", fmt)
        assert p.returncode == 2, p.stderr
        err = p.stderr.decode()
        assert "internal error" not in err and "--output /dev/full: cannot write (No space left on device)" in err, err


def test_stdout_on_a_full_disk_is_one_line(monkeypatch):
    """`triage analyze LOG > /dev/full`: the write error of stdout, not an internal error."""
    import errno

    import triage.commands.output as output

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output.Output, "write", full)
    p = run_cli("analyze", str(CRASH))
    assert p.returncode == 2
    assert p.stderr.decode() == "triage: error: cannot write: No space left on device\n"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="process states from /proc")
def test_retry_stops_the_failed_attempts_workers_before_the_relaunch(tmp_path):
    fake = Path(__file__).parent / "fakeserver.py"
    pids, left = tmp_path / "pids", tmp_path / "left"
    # each attempt starts a worker that outlives the server (as a scheduler process can), and
    # notes any worker of an earlier attempt still running when it starts
    script = (f'for p in $(cat {pids} 2>/dev/null); do s=$(cut -d" " -f3 /proc/$p/stat 2>/dev/null); '
              f'[ -n "$s" ] && [ "$s" != Z ] && echo "$p" >> {left}; done; '
              # (its output elsewhere: one holding the pipe makes triage wait 2 s for its last lines)
              f'sleep 120 >/dev/null 2>&1 & echo $! >> {pids}; exec "{sys.executable}" {fake} nsa --delay 0.002 "$@"')
    p = run_cli("run", "--retry", "1", "--until", "exit", "--log", str(tmp_path / "s.log"), "--grace", "0.5",
                "--timeout", "20", "--", "sh", "-c", script, "sh")
    assert p.returncode == 0, p.stderr
    assert "held on attempt 2" in p.stdout.decode()
    assert not left.exists(), f"workers of attempt 1 still ran at the relaunch: {left.read_text()}"
    for pid in pids.read_text().split():  # and none is left once triage is done (a zombie is gone)
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split()[2] == "Z", pid


def test_an_ascii_terminal(tmp_path):
    """A log with non-ASCII text, printed where stdout is ASCII: escapes, not UnicodeEncodeError."""
    import os
    import subprocess

    log = tmp_path / "server.log"
    log.write_text(CRASH.read_text(encoding="utf-8") + "RuntimeError: modèle introuvable ✗ 模型\n", encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "triage", "analyze", str(log)], capture_output=True, timeout=120,
                       env={**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": "ascii"})
    assert p.returncode == 1, p.stderr
    assert b"UnicodeEncodeError" not in p.stderr and b"internal error" not in p.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell")
def test_run_status_lines_start_their_own_line(tmp_path):
    p = run_cli("run", "--log", str(tmp_path / "s.log"), "--", "sh", "-c", "printf 'half a line'; exit 3")
    assert p.returncode == 3
    err = p.stderr.decode()
    assert "half a line\ntriage: " in err, err


# -- backtest corpus labels and --against (items 11, 13) ------------------------------------------


LABEL = """id: case-1
source: https://example.com/1
where: a test
engine: sglang
version: null
kind: crash
exception: ValueError
exception_type: ValueError
failure_class: test
expected_signature: null
workaround: {flags: [], remove_flags: [], env: [], note: none}
fixed_in: null
note: none
split: dev
"""
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True))


def _corpus(tmp_path: Path, label: str | None = LABEL) -> tuple[Path, Path]:
    root = tmp_path / "corpus"
    (root / "cases").mkdir(parents=True)
    (root / "cases" / "case-1.log").write_bytes(CRASH.read_bytes())
    yaml_path = root / "cases" / "case-1.yaml"
    if label is not None:
        yaml_path.write_text(label)
    return root, yaml_path


@pytest.mark.parametrize("kind", ["alias-bomb", "dev-zero", "fifo", "huge"])
def test_hostile_corpus_labels_are_refused(tmp_path, kind):
    import os
    import time

    root, label = _corpus(tmp_path, ALIAS_BOMB if kind == "alias-bomb" else None)
    if kind == "dev-zero":
        label.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(label)
    elif kind == "huge":
        label.write_bytes(LABEL.encode() + b"# " + b"x" * (2 * 1024 * 1024) + b"\n")
    started = time.monotonic()
    p = run_cli("catalogue", "backtest", str(root), "-j", "1")
    assert time.monotonic() - started < 20
    assert p.returncode == 2, p.stderr
    line = p.stderr.decode()
    assert line.count("\n") == 1 and "case-1.yaml" in line and "internal error" not in line, line


def test_against_cannot_inject_a_git_option(tmp_path):
    root, _ = _corpus(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    p = run_cli("catalogue", "backtest", str(root), "-j", "1", f"--against=--output={victim}")
    assert p.returncode == 2 and b"not a directory or a git revision" in p.stderr, p.stderr
    assert victim.read_text() == "keep me\n"


def test_against_a_directory_of_signatures_only(tmp_path):
    root, _ = _corpus(tmp_path)
    for i in range(2, 5):  # four cases: enough for the process pool
        (root / "cases" / f"case-{i}.log").write_bytes(CRASH.read_bytes())
        (root / "cases" / f"case-{i}.yaml").write_text(LABEL.replace("case-1", f"case-{i}"))
    sigs = tmp_path / "old" / "signatures"
    sigs.mkdir(parents=True)
    src = next((Path(__file__).resolve().parents[1] / "signatures").rglob("*.yaml"))
    (sigs / src.name).write_bytes(src.read_bytes())
    # two jobs: the process pool, whose initializer raising the loader's error was BrokenProcessPool
    p = run_cli("catalogue", "backtest", str(root), "-j", "2", "--against", str(tmp_path / "old"))
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1, err
    assert "BrokenProcessPool" not in err and "internal error" not in err, err


# -- env names from a catalogue (item 14) ---------------------------------------------------------


FROB_LOG = ("[2025-06-24 22:26:47 TP0] Load weight begin. avail mem=137.09 GB\n"
            "[2025-06-24 22:26:48 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/srv/app/frob.py", line 3, in run\n'
            "    frob()\n"
            "RuntimeError: frobnicator exploded at shard 3\n")


def _frob_catalogue(tmp_path: Path, env: str) -> Path:
    from hostile_catalogue import SIG

    cat = tmp_path / "cat"
    (cat / "signatures").mkdir(parents=True)
    (cat / "workarounds").mkdir()
    (cat / "signatures" / "frob.yaml").write_text(SIG.format(pattern="frobnicator exploded", example="at shard 3"))
    (cat / "workarounds" / "wk.yaml").write_text(
        "id: my-restart-frobnicator\nengine: any\ntitle: Preload a fixed frobnicator\n"
        f"env: {env}\ncost: A few seconds of downtime while it restarts.\nauto: true\n")
    return cat


def test_an_env_name_that_is_not_a_name_is_a_catalogue_error(tmp_path):
    cat = _frob_catalogue(tmp_path, '{"X; touch pwned #": "1"}')
    log = tmp_path / "crash.log"
    log.write_text(FROB_LOG)
    p = run_cli("run", "--retry", "1", "--dry-run", "--log", str(log), "-c", str(cat), "--", "python", "-m", "sglang.launch_server")
    assert p.returncode == 2
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "wk.yaml" in err and "not an environment variable name" in err, err


@pytest.mark.parametrize("name", ["LD_PRELOAD", "PYTHONPATH"])
def test_code_loading_variables_are_never_applied_automatically(tmp_path, name):
    cat = _frob_catalogue(tmp_path, f'{{"{name}": "/tmp/libfrob.so"}}')
    log = tmp_path / "crash.log"
    log.write_text(FROB_LOG)
    p = run_cli("run", "--retry", "1", "--dry-run", "--format", "json", "--log", str(log), "-c", str(cat),
                "--", "python", "-m", "sglang.launch_server")
    assert p.returncode == 1, p.stderr  # no change to make
    plan = json.loads(p.stdout)
    assert plan["steps"] == [] or all(s["change"] is None for s in plan["steps"]), plan
    reasons = " ".join(x["reason"] for x in plan["not_applied"])
    assert f"sets {name}, which decides what code the server runs" in reasons, plan


# -- other one-line errors: a deep config, a damaged cache (item 15) ------------------------------


def test_a_config_nested_too_deeply(tmp_path):
    cfg = tmp_path / "triage.toml"
    cfg.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    p = run_cli("--config", str(cfg), "analyze", str(CRASH))
    assert p.returncode == 2
    err = p.stderr.decode()
    assert err.count("\n") == 1 and "internal error" not in err and "triage.toml" in err, err


def test_a_cache_file_with_a_recomputed_digest_but_wrong_types(tmp_path):
    import hashlib

    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TRIAGE_NO_CACHE": None}
    first = run_cli("analyze", str(CRASH), "--format", "json", env=env)
    assert first.returncode == 1
    [cache] = (tmp_path / "xdg").rglob("catalogue-*.jsonl")
    data = cache.read_bytes()
    first_nl = data.index(b"\n")
    # values of the wrong type, of the same length (the index's offsets stay right): a switch
    # made a number, a number made a string
    rest = data[first_nl + 1 :].replace(b'"generic": false', b'"generic": 12345').replace(b'"auto": true', b'"auto": 1234')
    assert rest != data[first_nl + 1 :]
    head = json.loads(data[:first_nl])
    head["sha256"] = hashlib.sha256(rest).hexdigest()  # the digest recomputed: only the types are wrong
    cache.write_bytes(json.dumps(head).encode() + b"\n" + rest)
    from triage.catalogue import load

    load._READ.clear()
    p = run_cli("analyze", str(CRASH), "--format", "json", env=env)
    assert p.returncode == 1, p.stderr
    assert b"internal error" not in p.stderr
    assert json.loads(p.stdout)["findings"] == json.loads(first.stdout)["findings"]


# -- Markdown and redaction of log text (item 16) -------------------------------------------------


def test_mentions_and_urls_from_the_log_neither_ping_nor_link(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2025-06-24 22:26:47 TP0] Load weight begin. avail mem=137.09 GB\n"
                   "Traceback (most recent call last):\n"
                   '  File "/srv/app.py", line 3, in run\n'
                   "    go()\n"
                   "RuntimeError: ask @octocat or @org/team, see https://evil.example/x?a=1 and www.evil.example "
                   "(mail ops@example.com)\u200b\ufeff\n")
    p = run_cli("analyze", str(log))
    out = p.stdout.decode()
    assert "`@octocat`" in out and "`@org/team`" in out
    assert "`https://evil.example/x?a=1`" in out and "`www.evil.example`" in out
    assert "ops@example.com" in out and "`@example.com`" not in out  # an address is no mention
    import re

    prose = re.sub(r"(?ms)^(`{3,}).*?^\1", "", out)  # fenced evidence neither pings nor links
    assert " @octocat" not in prose and " https://evil" not in prose and " www.evil" not in prose
    assert "\u200b" not in out and "\ufeff" not in out


def test_a_redacted_value_keeps_the_colon_after_it(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2025-06-24 22:26:47 TP0] Load weight begin. avail mem=137.09 GB\n"
                   "Traceback (most recent call last):\n"
                   '  File "/srv/app.py", line 3, in run\n'
                   "    go()\n"
                   "FileNotFoundError: DB_PASSWORD_FILE=/run/secrets/db_pw: no such file, password=/run/pw.txt: gone, "
                   "--api-key /run/k: denied, reading /home/u/.aws/credentials: missing\n")
    p = run_cli("analyze", str(log), "--format", "json")
    msg = json.loads(p.stdout)["failures"][0]["message"]
    assert "DB_PASSWORD_FILE=[REDACTED]: no such file" in msg and "password=[REDACTED]: gone" in msg, msg
    assert "--api-key [REDACTED]: denied" in msg, msg
    assert "/run/secrets" not in msg and "/run/k" not in msg
    # a path ending in a secret's name is a file name, and what follows its colon no value
    assert "/home/u/.aws/credentials: missing" in msg, msg
