"""Issue 19, part 1: what a file type, an encoding, a catalogue, a signal or a huge log can do
to triage. Every case goes through the real command line, with inputs generated small here;
the behaviour at scale is measured by benchmarks/bench_hostile.py, not by timed tests.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gzip
import json
import os
import resource
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import run_cli

TRACEBACK = "Traceback (most recent call last)"
CRASH = (
    "[2025-01-01 00:00:00 TP0] server_args=ServerArgs(model_path='org/model', tp_size=1)\n"
    "[2025-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
    "    scheduler.event_loop()\n"
    "ZeroDivisionError: division by zero in the frobnicator\n"
)


def cli(*args: str, timeout: float = 60, stdin: bytes | None = None, ok: tuple[int, ...] = (0, 1, 2),
        env: dict[str, str] | None = None, limit_as: int | None = None,
        process: bool = False) -> subprocess.CompletedProcess:
    """`triage ...`: never a traceback, never a hang, a documented exit code.

    In this process (the entry point's own error handling, see conftest.run_cli), unless the
    case needs a process of its own: `limit_as` (an address-space cap, for inputs that would
    exhaust memory if a check regressed) or `process` (an input that would read or block for
    ever, where only a child can be ended by the timeout). A hang in process ends the run with
    every thread's stack, after a margin wide enough for a loaded machine."""
    env = {"TRIAGE_DEBUG": "", **(env or {})}
    if limit_as or process:
        def cap() -> None:
            if limit_as:
                resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

        p = subprocess.run([sys.executable, "-m", "triage", *args], input=stdin, capture_output=True,
                           timeout=timeout, env={**os.environ, **env}, preexec_fn=cap)
    else:
        faulthandler.dump_traceback_later(max(4 * timeout, 300), exit=True)
        try:
            p = run_cli(*args, stdin=stdin, env=env)
        finally:
            faulthandler.cancel_dump_traceback_later()
    return checked(p, ok)


def checked(p: subprocess.CompletedProcess, ok: tuple[int, ...] = (0, 1, 2)) -> subprocess.CompletedProcess:
    """The promise every run here keeps: no traceback, no internal error, a documented exit code."""
    err = p.stderr.decode("utf-8", "replace")
    assert TRACEBACK not in err and "internal error" not in err, err
    assert p.returncode in ok, (p.returncode, err)
    return p


@contextlib.contextmanager
def unblocked(fifo: Path, after: float = 20.0):  # noqa: ANN201
    """Run a command in process on a FIFO that no one writes to: if the command wrongly opens
    it (and would wait for ever), a writer opens it after `after` seconds so that the command
    returns and the test fails on its assertions instead of hanging the suite."""
    done = threading.Event()

    def rescue() -> None:
        if not done.wait(after):
            with contextlib.suppress(OSError), open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):
                pass

    t = threading.Thread(target=rescue, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join(5)


def error_line(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("triage: error: "), lines
    return lines[0]


def first_exception(p: subprocess.CompletedProcess) -> str:
    return json.loads(p.stdout)["failures"][0]["exception"]


@pytest.fixture
def log(tmp_path: Path) -> Path:
    f = tmp_path / "server.log"
    f.write_text(CRASH)
    return f


# -- non-seekable input --------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd")
def test_process_substitution(log):
    """`triage analyze <(cat log)`: /dev/fd/N is a pipe, read as a stream. The shell's
    substitution is a pipe's read end at /dev/fd/N; here the test holds both ends and a thread
    writes (a bash child and a second interpreter cost 1.5 s for the same path)."""
    read_end, write_end = os.pipe()

    def writer() -> None:
        with open(write_end, "wb") as fh:
            fh.write(log.read_bytes())

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        p = cli("analyze", f"/dev/fd/{read_end}", "--format", "json", ok=(1,))
    finally:
        t.join(30)
        os.close(read_end)
    assert first_exception(p) == "ZeroDivisionError"
    assert json.loads(p.stdout)["lines"] == 5


def test_dev_stdin_from_a_pipe(log):
    # a process of its own: /dev/stdin is file descriptor 0, which a test cannot swap in process
    p = cli("analyze", "/dev/stdin", "--format", "json", stdin=log.read_bytes(), ok=(1,), process=True)
    assert first_exception(p) == "ZeroDivisionError"
    assert json.loads(p.stdout)["lines"] == 5


def test_fifo_with_a_writer(tmp_path):
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    data = gzip.compress(CRASH.encode())  # gzip detection must not seek either

    def writer() -> None:
        with open(fifo, "wb") as fh:
            fh.write(data)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    p = cli("analyze", str(fifo), "--format", "json", ok=(1,))
    t.join(10)
    assert first_exception(p) == "ZeroDivisionError"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_character_device_is_refused(device):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    line = error_line(cli("analyze", device, timeout=30, process=device == "/dev/zero"))  # read for ever
    assert device in line and "device" in line


# -- UTF-16 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-16-crlf", "utf-16-gz"])
def test_utf16_log_is_decoded(tmp_path, encoding):
    """PowerShell's `>` writes UTF-16 with a BOM; other tools write it without one."""
    text = CRASH.replace("\n", "\r\n") if encoding.endswith("crlf") else CRASH
    data = text.encode(encoding.removesuffix("-crlf").removesuffix("-gz"))
    if encoding.endswith("-gz"):
        data = gzip.compress(data)
    f = tmp_path / "server.log"
    f.write_bytes(data)
    for args, stdin in (([str(f)], None), (["-"], data)):
        p = cli("analyze", *args, "--format", "json", stdin=stdin, ok=(1,))
        d = json.loads(p.stdout)
        assert d["failures"][0]["exception"] == "ZeroDivisionError"
        assert d["failures"][0]["line"] == 2
        assert "frobnicator" in d["failures"][0]["message"]
    assert f.read_bytes() == data


def test_utf8_with_nul_bytes_is_not_taken_for_utf16():
    from triage.pipeline.read import utf16_encoding

    assert utf16_encoding(CRASH.encode()) is None
    assert utf16_encoding(b"a\x00b" + CRASH.encode()) is None
    assert utf16_encoding(CRASH.encode("utf-16-le")) == "utf-16-le"
    assert utf16_encoding(b"\xff\xfe" + CRASH.encode("utf-16-le")) == "utf-16"


# -- hostile catalogue files ----------------------------------------------------------------------

from hostile_catalogue import SIG, WK  # noqa: E402


def make_cat(root: Path) -> tuple[Path, Path]:
    d = root / "cat"
    (d / "signatures").mkdir(parents=True)
    (d / "workarounds").mkdir()
    (d / "workarounds" / "restart.yaml").write_text(WK)
    return d, d / "signatures" / "frob.yaml"


# Several commands in one child under an address-space cap: the child's start-up (interpreter,
# imports, catalogue) is paid once, and a regression still exhausts only the child's memory.
CAPPED_CHILD = """
import base64, json, resource, sys
if int(sys.argv[2]):  # 0: no cap (a child only so that a timeout can end it)
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
sys.path.insert(0, sys.argv[1])
from conftest import run_cli
done = []
for argv in json.loads(sys.argv[3]):
    p = run_cli(*argv, env={"TRIAGE_DEBUG": ""})
    done.append([p.returncode, base64.b64encode(p.stdout).decode(), base64.b64encode(p.stderr).decode()])
print(json.dumps(done))
"""


def capped(commands: list[list[str]], limit_as: int) -> list[subprocess.CompletedProcess]:
    """Each command as `cli` would run it under `limit_as` (0: no cap), all in one child, which
    the timeout ends should one of them hang."""
    import base64

    here = str(Path(__file__).resolve().parent)
    child = subprocess.run([sys.executable, "-c", CAPPED_CHILD, here, str(limit_as), json.dumps(commands)],
                           capture_output=True, timeout=120)
    assert child.returncode == 0, child.stderr.decode(errors="replace")[-3000:]
    return [checked(subprocess.CompletedProcess(argv, code, base64.b64decode(stdout), base64.b64decode(stderr)))
            for argv, (code, stdout, stderr) in zip(commands, json.loads(child.stdout), strict=True)]


def both_refuse(cat: Path, log: Path, says: str, where: str, **kw) -> None:  # noqa: ANN003
    """`analyze` exits 2 with one file:line line, `catalogue check` reports it and exits 1."""
    analyze = ["analyze", str(log), "--catalogue", str(cat)]
    check_argv = ["catalogue", "check", str(cat), "-q"]
    if kw.get("limit_as") or kw.get("process"):  # one child for both commands
        p, check = capped([analyze, check_argv], kw.get("limit_as") or 0)
    else:
        p = cli(*analyze, timeout=60, **kw)
        check = cli(*check_argv, timeout=60, ok=(1,), **kw)
    refused(p, check, says, where)


def refused(p: subprocess.CompletedProcess, check: subprocess.CompletedProcess, says: str, where: str) -> None:
    line = error_line(p)
    assert says in line and where in line, line
    assert check.returncode == 1, check.stderr
    assert says in check.stdout.decode() and where in check.stdout.decode()


def test_catalogue_symlink_to_dev_zero(tmp_path, log):
    cat, sig = make_cat(tmp_path)
    sig.symlink_to("/dev/zero")
    both_refuse(cat, log, "not a regular file", "frob.yaml:1:", process=True)  # read for ever


def test_catalogue_fifo_named_yaml(tmp_path, log):
    """No writer ever opens it: the load must not wait for one."""
    cat, sig = make_cat(tmp_path)
    os.mkfifo(sig)
    with unblocked(sig):
        both_refuse(cat, log, "not a regular file", "frob.yaml:1:")


def test_catalogue_symlink_to_a_huge_file(tmp_path, log):
    cat, sig = make_cat(tmp_path)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (600 * 1024) + b"\n")
    sig.symlink_to(big)
    both_refuse(cat, log, "larger than a catalogue entry", "frob.yaml:1:")


EXPANDING = ["frobnicator exploded ((((a{100}){100}){100}){100})",
             "frobnicator exploded x{2000000}",
             "frobnicator exploded (?:(?:[ab]{50}|c){40}){60}",
             # spellings a reading of the source alone got wrong (each was estimated at 1 to 401
             # units and exhausted the 2 GB): V0's [[] is a one-character class, not a nested set
             "frobnicator exploded [[]((((a{100}){100}){100}){100})]",
             "frobnicator exploded [[=]((((a{100}){100}){100}){100})=]]",
             # a (?#...) comment does not end at an escaped parenthesis
             r"frobnicator exploded (?#\)[)((((a{100}){100}){100}){100})]",
             # verbose mode: the space between a group and its count is ignored
             "(?x)frobnicator\\ exploded ((((a{100}) {100}) {100}) {100})",
             "frobnicator exploded (?x:((((a{100}) {100}) {100}) {1 0 0}))"]


def test_pattern_that_expands_is_refused_without_exhausting_memory(tmp_path, log):
    """Compiling ((((a{100}){100}){100}){100}) took 23.6 GB: it must be refused before
    compiling, in a process capped at 2 GB of address space, however the pattern spells it.
    Every spelling, each in a catalogue of its own, in one capped child (one start-up: they were
    eight tests of 1.3 s CPU each); a failure names the pattern."""
    commands = []
    for i, pattern in enumerate(EXPANDING):
        cat, sig = make_cat(tmp_path / f"p{i}")
        sig.write_text(SIG.format(pattern=pattern, example="at step 3"))
        commands += [["analyze", str(log), "--catalogue", str(cat)], ["catalogue", "check", str(cat), "-q"]]
    done = capped(commands, 2 << 30)
    for pattern, p, check in zip(EXPANDING, done[::2], done[1::2], strict=True):
        try:
            refused(p, check, "expands to more than", "frob.yaml:9:")
        except AssertionError as e:
            raise AssertionError(f"{pattern!r}: {e}") from None


def test_pattern_nesting_too_deep_is_a_file_line_error(tmp_path, log):
    """regex's parser recurses once per group: 3,000 nested groups were an internal error."""
    cat, sig = make_cat(tmp_path)
    sig.write_text(SIG.format(pattern="frobnicator exploded " + "(" * 3000 + "a" + ")" * 3000, example="at step 3"))
    both_refuse(cat, log, "nests groups too deeply", "frob.yaml:9:")


def test_workaround_value_regex_is_sized_and_time_bounded(tmp_path):
    """A workaround's `value.from_message` is a catalogue regex too: it is refused when it would
    expand (in 2 GB, as above), and it is searched in the failure's lines under a timeout (a
    catastrophic pattern on 40 `a`s never returned)."""
    cat, sig = make_cat(tmp_path)
    sig.write_text(SIG.format(pattern=r"frobnicator exploded (\d+)", example="7"))
    wk = cat / "workarounds" / "restart.yaml"

    def value_rule(rx: str) -> None:
        wk.write_text(WK.replace("auto: false\n", f"auto: false\nflags: {{add: ['--frob-size']}}\n"
                                                   f"value: {{from_message: '{rx}'}}\n"))

    log = tmp_path / "server.log"
    log.write_text("RuntimeError: frobnicator exploded 7 " + "a" * 40 + "\n")
    value_rule("exploded ((((a{100}){100}){100}){100})(x)")
    line = error_line(cli("analyze", str(log), "--catalogue", str(cat), limit_as=2 << 30))
    assert "restart.yaml:" in line and "from_message" in line and "expands to more than" in line, line
    value_rule("(?:(?:a|aa)+)+b(x)")
    p = cli("analyze", str(log), "--catalogue", str(cat), "--format", "json", ok=(1,), timeout=30)
    assert json.loads(p.stdout)["findings"][0]["signature"] == "my-frobnicator-exploded"


def test_expansion_estimate():
    from triage.catalogue.expansion import MAX_UNITS, expanded_units

    assert expanded_units("abc") == 3
    assert expanded_units("(a{100}){100}") == 10_000
    assert expanded_units(r"[a{]{3}\p{L}{4}") == 7  # braces inside classes and escapes are not repeats
    assert expanded_units("a{x}") == 4  # not a counted repeat: literal braces
    assert expanded_units("((((a{100}){100}){100}){100})") > MAX_UNITS
    assert expanded_units("(" * 5000 + "a{99999}" + "){99999}" * 5000) > MAX_UNITS  # stops early


def test_builtin_patterns_are_far_below_the_limit(catalogue):
    from triage.catalogue.expansion import MAX_UNITS, expanded_units

    assert max(expanded_units(p) for s in catalogue.signatures.values() for p in s.spec.patterns) < MAX_UNITS // 10


# -- linear work on many distinct tracebacks ------------------------------------------------------


def _distinct_tracebacks(n: int) -> str:
    """n request tracebacks with their own frames and exceptions (names without digits: the
    scan folds digits away when it compares windows)."""
    def word(i: int) -> str:
        out = ""
        while True:
            out, i = "abcdefghijklmnopqrstuvwxyz"[i % 26] + out, i // 26
            if not i:
                return out

    out = ["[2025-01-01 00:00:00 TP0] server_args=ServerArgs(model_path='org/model', tp_size=1)\n"]
    for i in range(n):
        w = word(i)
        out.append(f"[2025-01-01 00:00:01 TP0] Exception in request {i}: Traceback (most recent call last):\n")
        for k in range(3):
            out.append(f'  File "/srv/app/mod_{w}_{word(k)}.py", line {k + 1}, in handler_{w}\n    step_{w}(r)\n')
        out.append(f"Value{w.title()}Error: request {w} could not be served\n")
        out.append("Killed\n" if i % 7 == 0 else f"[2025-01-01 00:00:02 TP0] Decode batch. #running-req: {i % 9}\n")
    return "".join(out) + CRASH


def _lines_run(text: str, catalogue) -> tuple[int, int]:  # noqa: ANN001
    """(lines of triage's own code executed while analysing `text`, failures found): a count of
    operations, not a timing, so the test means the same on any machine. Loops inside
    generator expressions and comprehensions count too, line by line."""
    from triage.pipeline import analyze as pipeline

    executed = 0

    def local(frame, event, _arg):  # noqa: ANN001, ANN202
        nonlocal executed
        if event == "line":
            executed += 1
        return local

    def trace(frame, event, _arg):  # noqa: ANN001, ANN202
        return local if "/triage/" in frame.f_code.co_filename else None

    sys.settrace(trace)
    try:
        report = pipeline.analyze_text(text, catalogue)
    finally:
        sys.settrace(None)
    return executed, len(report.failures)


def test_distinct_tracebacks_cost_linear_work(catalogue):
    """failures.py's dedup and traceback.py's consensus scan were quadratic (10k tracebacks took
    over 170 s): doubling the tracebacks must not much more than double the work."""
    small, n_small = _lines_run(_distinct_tracebacks(200), catalogue)
    large, n_large = _lines_run(_distinct_tracebacks(400), catalogue)
    assert n_small >= 200 and n_large >= 400
    assert large / small < 2.3, (small, large)


# -- every kind of kept line is capped --------------------------------------------------------------


def _word(i: int) -> str:
    out = ""
    while True:
        out, i = "abcdefghijklmnopqrstuvwxyz"[i % 26] + out, i // 26
        if not i:
            return out


def _cli_in_process(monkeypatch, capsys, *args: str) -> tuple[int, str]:  # noqa: ANN001
    from triage import cli as cli_mod

    monkeypatch.setattr(sys, "argv", ["triage", *args])
    with pytest.raises(SystemExit) as e:
        cli_mod.main()
    out, err = capsys.readouterr()
    assert TRACEBACK not in err and "internal error" not in err, err
    return int(e.value.code or 0), out


@pytest.mark.parametrize("shape", ["Killed process {w}\n", "[2025-01-01 00:00:00] ERROR worker {w}: failed\n",
                                   "[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent "
                                   "call last):\n  File \"/x/{w}.py\", line 1, in f_{w}\nValue{W}Error: bad\n"
                                   + "[2025-01-01 00:00:01 TP0] Decode batch. #running-req: 1\n" * 6])
def test_distinct_kept_lines_are_capped_and_the_report_says_so(tmp_path, monkeypatch, capsys, shape):
    """With the cap lowered to 2,000 lines, 6,000 distinct lines of each kind keep at most 300, the
    table of keys seen stops growing, and the report's notes say the cap was hit; the crash at
    the end is still found (the start and the end of the log are kept)."""
    from triage.pipeline import scan

    monkeypatch.setattr(scan, "MAX_KEPT", 2000)
    seen_sizes: list[int] = []
    real_count = scan._Keeper._count

    def counting(self, key):  # noqa: ANN001, ANN202
        seen_sizes.append(len(self.seen))
        return real_count(self, key)

    monkeypatch.setattr(scan._Keeper, "_count", counting)
    f = tmp_path / "many.log"
    f.write_text("".join(shape.format(w=_word(i), W=_word(i).title()) for i in range(6000)) + CRASH)
    code, out = _cli_in_process(monkeypatch, capsys, "analyze", str(f), "--format", "json", "-j", "1")
    d = json.loads(out)
    assert any("cap on kept lines hit" in n for n in d["notes"]), d["notes"]
    assert max(seen_sizes) <= 2000
    assert len(d["failures"]) < 2000
    assert code == 1
    assert any(x["exception"] == "ZeroDivisionError" for x in d["failures"])  # the end of the log is kept


def test_the_same_line_millions_of_times_is_counted_not_kept(tmp_path):
    """A run of identical lines (a 76 KB .gz of 50 MB of `Killed`, scaled down) keeps 16 copies."""
    f = tmp_path / "killed.log.gz"
    f.write_bytes(gzip.compress(b"Killed\n" * 100_000 + CRASH.encode()))
    p = cli("analyze", str(f), "--format", "json", "-j", "1", ok=(1,))
    d = json.loads(p.stdout)
    assert d["lines"] == 100_005
    assert d["failures"][-1]["exception"] == "ZeroDivisionError" or d["failures"][0]["exception"] == "ZeroDivisionError"


# -- watch: file types, timeouts, catching up -------------------------------------------------------


def test_watch_fifo_returns(tmp_path):
    """`triage watch FIFO --timeout 3` used to block in open() for ever: refused at once."""
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)
    with unblocked(fifo):
        line = error_line(cli("watch", str(fifo), "--timeout", "3", timeout=30))
    assert "FIFO" in line


def test_watch_device_returns():
    line = error_line(cli("watch", "/dev/zero", "--timeout", "3", timeout=30, process=True))  # read for ever
    assert "device" in line


def _startup_log(n_decode: int) -> str:
    head = ("[2025-01-01 00:00:00] server_args=ServerArgs(model_path='org/model', tp_size=1)\n"
            "[2025-01-01 00:00:01 TP0] Load weight begin. avail mem=79.00 GB\n"
            "[2025-01-01 00:00:09 TP0] Load weight end. type=LlamaForCausalLM, mem usage=15.00 GB.\n"
            "[2025-01-01 00:00:10 TP0] KV Cache is allocated. #tokens: 400000\n"
            "[2025-01-01 00:00:11 TP0] Capture cuda graph begin. This can take up to several minutes.\n"
            "[2025-01-01 00:00:20 TP0] Capture cuda graph end. Time elapsed: 9.00 s\n"
            "[2025-01-01 00:00:21] INFO:     Application startup complete.\n"
            "[2025-01-01 00:00:22] The server is fired up and ready to roll!\n")
    body = "".join(f"[2025-01-01 00:01:00 TP0] Decode batch. #running-req: {i % 40}, #token: {i}, "
                   "token usage: 0.10, gen throughput (token/s): 1000.00, #queue-req: 0\n" for i in range(n_decode))
    return head + body + CRASH.replace("server_args", "note: still server_args") + "[2025-01-01 00:09:00] done\n"


@pytest.mark.parametrize("catch_up", [True, False])
def test_watch_catch_up_sees_what_line_by_line_sees(tmp_path, monkeypatch, catch_up):
    """A backlog is read with the scanner and only its live lines are parsed; the phases, their
    line numbers, the failure block and the tail are the same as when every line is parsed."""
    from triage.commands import watch as watch_mod

    f = tmp_path / "server.log"
    # 3,000 lines: the threshold is lowered to 1 byte, so a small backlog takes the catch-up path
    # (line by line, 30,000 lines took 44 s of the suite)
    f.write_text(_startup_log(3_000))
    monkeypatch.setattr(watch_mod, "CATCH_UP", 1 if catch_up else 1 << 40)
    w = watch_mod.Watcher(str(f))
    events, total = [], 0
    while True:
        evs, n = w.poll()
        events += evs
        total += n
        if not n:
            break
    phases = [(e.phase, e.line) for e in events if isinstance(e, watch_mod.PhaseChange)]
    assert phases == [("loading weights", 2), ("allocating KV cache", 3), ("capturing CUDA graphs", 5),
                      ("warming up", 6), ("ready", 8)]
    assert total == w.line_no == 3_014
    assert w.block.start == 3_010 and w.block.closed
    assert list(w.tail)[-1].endswith("done") and len(w.tail) == 20


def test_watch_catches_up_on_a_burst(tmp_path):
    """The crash at the end of a 3 MB log written before watching began is reported with its
    line number (the catch-up is measured in benchmarks/bench_hostile.py --cases burst)."""
    f = tmp_path / "server.log"
    f.write_text(_startup_log(30_000))
    p = cli("watch", str(f), "--until", "exit", "--grace", "0.2", "--timeout", "60", "--format", "json",
            timeout=120, ok=(1,))
    failure = [json.loads(x) for x in p.stdout.decode().splitlines() if '"failure"' in x][-1]
    assert failure["failures"][0]["exception"] == "ZeroDivisionError"
    assert failure["failures"][0]["line"] == 30_010


def test_live_words_cover_every_milestone_and_failure_line():
    """Every fixture line that moves a phase or opens a failure block holds a live word, so the
    catch-up cannot skip it."""
    from triage.commands.phases import failure_marker, live_line_starts
    from triage.pipeline.parse.lines import parse_line
    from triage.pipeline.parse.timeline import CUDA_GRAPHS, LOADING_WEIGHTS, STARTING, WARMING_UP, next_phase

    fixtures = Path(__file__).parent / "fixtures"
    checked = 0
    for log in sorted(fixtures.glob("*.log")):
        data = log.read_bytes()
        live = set(live_line_starts(data))
        pos = 0
        for i, raw in enumerate(data.split(b"\n")):
            text = raw.decode("utf-8", "replace")
            ln = parse_line(i + 1, text)
            moves = any(next_phase(ph, ln.message, s) for ph in (STARTING, LOADING_WEIGHTS, CUDA_GRAPHS, WARMING_UP)
                        for s in (True, False))
            if moves or failure_marker(ln):
                checked += 1
                assert pos in live, (log.name, i + 1, text)
            pos += len(raw) + 1
    assert checked > 100


# -- run: the whole process group, and signals -------------------------------------------------------

# a server whose worker ignores SIGTERM (and SIGINT): the server itself dies of SIGTERM at once
STUBBORN = """
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    open(sys.argv[1], "w").write(str(os.getpid()))
    while True:
        time.sleep(0.1)
{server}
print("[2025-01-01 00:00:00] server started", flush=True)
while True:
    time.sleep(0.1)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its new parent) counts as gone
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    return True


def _gone(pid: int, within: float = 5.0) -> bool:
    """The worker is dead, allowing the kernel a moment to finish a SIGKILL sent just before
    the command returned (seen under xdist on a loaded machine: still 'S' a few ms later)."""
    import time

    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _run_in_process(tmp_path, monkeypatch, capsys, server: str, *opts: str,  # noqa: ANN001
                    signals: tuple[int, ...] = ()) -> tuple[int, int]:
    """`triage run` in this process (the stop grace lowered to 0.3 s, and the wait for the
    output that the stubborn worker keeps open, 2 s, too); `signals` are sent to it once the
    stubborn worker is up. Returns (exit code, the worker's pid)."""
    import signal as sig
    import time

    from triage.commands import run as run_mod

    monkeypatch.setattr(run_mod, "STOP_WAIT", 0.3)
    monkeypatch.setattr(run_mod, "OUTPUT_WAIT", 0.3)
    pidfile = tmp_path / "worker.pid"
    script = tmp_path / "server.py"
    script.write_text(STUBBORN.replace("{server}", server))

    def send() -> None:
        for _ in range(200):
            if pidfile.exists() and pidfile.read_text():
                break
            time.sleep(0.05)
        for s in signals:
            time.sleep(0.15)
            os.kill(os.getpid(), s)

    t = threading.Thread(target=send, daemon=True)
    t.start()
    old = sig.getsignal(sig.SIGINT)
    try:
        code, _ = _cli_in_process(monkeypatch, capsys, "run", "--log", str(tmp_path / "run.log"), *opts, "--",
                                  sys.executable, str(script), str(pidfile))
    finally:
        sig.signal(sig.SIGINT, old)
    t.join(15)
    return code, int(pidfile.read_text())


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_run_timeout_kills_a_worker_that_ignores_sigterm(tmp_path, monkeypatch, capsys):
    # the worker is up (its pid written) in ~0.1 s; the timeout fires once it is
    code, worker = _run_in_process(tmp_path, monkeypatch, capsys, "", "--timeout", "1")
    assert code == 3
    assert _gone(worker)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_sigterm_to_triage_kills_the_group_even_after_the_server_exited(tmp_path, monkeypatch, capsys):
    """The server dies of the forwarded SIGTERM at once; its worker ignores it and must still
    be killed after the grace period."""
    import signal as sig

    code, worker = _run_in_process(tmp_path, monkeypatch, capsys, "", signals=(sig.SIGTERM,))
    assert code == 128 + sig.SIGTERM
    assert _gone(worker)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_three_sigints_exit_130(tmp_path, monkeypatch, capsys):
    """A server that ignores SIGINT: the third Ctrl-C kills the group, and triage exits 130 as a
    shell reports an interrupted command (it used to exit 1)."""
    import signal as sig

    code, worker = _run_in_process(tmp_path, monkeypatch, capsys,
                                   "signal.signal(signal.SIGINT, signal.SIG_IGN)",
                                   signals=(sig.SIGINT, sig.SIGINT, sig.SIGINT))
    assert code == 130
    assert _gone(worker)


# -- -o: never follow, never replace what is not a file, never overwrite an input -----------------


def test_output_ignores_a_symlink_planted_at_the_temporary_name(tmp_path, log):
    """The temporary name was predictable (.r.md.triage-tmp): a symlink planted there made -o
    overwrite the input log. Now it is created exclusively under a random name."""
    before = log.read_bytes()
    plant = tmp_path / ".r.md.triage-tmp"
    plant.symlink_to(log)
    cli("analyze", str(log), "-o", str(tmp_path / "r.md"), ok=(1,))
    assert log.read_bytes() == before
    assert plant.is_symlink() and os.readlink(plant) == str(log)
    assert "# Triage" in (tmp_path / "r.md").read_text()
    assert not list(tmp_path.glob("*.triage-tmp")) or list(tmp_path.glob("*.triage-tmp")) == [plant]


def test_output_symlink_is_replaced_not_followed(tmp_path, log):
    other = tmp_path / "precious.txt"
    other.write_text("keep me\n")
    out = tmp_path / "r.md"
    out.symlink_to(other)
    cli("analyze", str(log), "-o", str(out), ok=(1,))
    assert other.read_text() == "keep me\n"
    assert not out.is_symlink() and "# Triage" in out.read_text()


@pytest.mark.parametrize("which", ["watch -o", "run -o", "run --log"])
def test_streamed_files_replace_a_planted_symlink(tmp_path, log, which):
    """Files written as it happens (watch/run -o, run's --log, whose default name
    triage-run-<timestamp>.log is predictable) were opened with a plain open(): a symlink
    planted at the name was followed and the file it points to overwritten."""
    other = tmp_path / "precious.txt"
    other.write_text("keep me\n")
    target = tmp_path / ("server-copy.log" if which == "run --log" else "events.md")
    target.symlink_to(other)
    if which == "watch -o":
        cli("watch", str(log), "--grace", "0.1", "--timeout", "30", "-o", str(target), ok=(1,))
    else:
        server = [sys.executable, "-c", f"import sys; sys.stdout.write(open({str(log)!r}).read()); sys.exit(1)"]
        run_log = target if which == "run --log" else tmp_path / "run.log"
        out = ["-o", str(target)] if which == "run -o" else []
        p = run_cli("run", "--log", str(run_log), "--grace", "0.3", "--timeout", "30", *out, "--", *server)
        assert p.returncode == 1, p.stderr
    assert other.read_text() == "keep me\n"
    assert not target.is_symlink()
    assert ("ZeroDivisionError" if which == "run --log" else "# Triage") in target.read_text()


def test_output_hard_link_to_the_input_is_refused(tmp_path, log):
    link = tmp_path / "hard.md"
    os.link(log, link)
    line = error_line(cli("analyze", str(log), "-o", str(link)))
    assert "refusing to overwrite" in line
    assert log.read_text() == CRASH


def test_output_to_a_fifo_stays_a_fifo(tmp_path, log):
    """`-o /dev/null` used to rename a regular file over the device node; a FIFO (safe to try
    in a test) shows the same: a non-regular output is written to, never replaced."""
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def reader() -> None:
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    cli("analyze", str(log), "-o", str(fifo), ok=(1,))
    t.join(10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got and got[0].startswith(b"# Triage")


def test_output_mode_follows_the_umask(tmp_path, log):
    out = tmp_path / "r.md"
    cli("analyze", str(log), "-o", str(out), ok=(1,))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


# -- the catalogue cache ---------------------------------------------------------------------------


def _cache_env(tmp_path: Path) -> dict[str, str]:
    return {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "TRIAGE_NO_CACHE": ""}


def _cache_doc(path: Path) -> dict:
    """A cache file (JSON Lines: header, index, one spec per line) as one document."""
    from triage.catalogue.cache import index

    found = index(path.read_bytes())
    assert found is not None, "not a cache file this triage wrote"
    doc, base = found
    data = path.read_bytes()[base:]
    return {"signatures": [{"path": p, "spec": json.loads(data[a:b])} for p, _, _, _, a, b in doc["signatures"]],
            "workarounds": [{"path": p, "spec": json.loads(data[a:b])} for p, _, a, b in doc["workarounds"]]}


def _edit_specs(path: Path, edit) -> None:  # noqa: ANN001
    """Change each spec line in place with `edit(kind, spec)`, as a hand edit would: the header's digest is left as it was."""
    head, index_line, *specs = path.read_bytes().split(b"\n")
    n = len(json.loads(index_line)["signatures"])
    out = []
    for i, line in enumerate(specs):
        if line:
            spec = json.loads(line)
            edit("signature" if i < n else "workaround", spec)
            line = json.dumps(spec).encode()
        out.append(line)
    path.write_bytes(b"\n".join([head, index_line, *out]))


def test_cache_is_json_rebuilt_into_the_same_catalogue(tmp_path, log, monkeypatch):
    from triage.catalogue.load import load_catalogue

    env = _cache_env(tmp_path)
    cli("analyze", str(log), env=env, ok=(1,))
    files = list((tmp_path / "xdg" / "triage").glob("catalogue-*"))
    assert len(files) == 1 and files[0].suffix == ".jsonl"
    assert all(json.loads(line) for line in files[0].read_text().splitlines())  # every line is JSON
    doc = _cache_doc(files[0])
    assert doc["signatures"] and doc["workarounds"]
    monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    cached = load_catalogue(cache=True)
    fresh = load_catalogue()
    assert {k: s.spec for k, s in cached.signatures.items()} == {k: s.spec for k, s in fresh.signatures.items()}
    assert cached.workarounds == fresh.workarounds and cached.workaround_paths == fresh.workaround_paths
    assert stat.S_IMODE(files[0].parent.stat().st_mode) == 0o700


def test_a_planted_pickle_never_runs(tmp_path, log):
    """The cache used to be a pickle: a file there ran code when loaded. Now only JSON is read
    and old pickles are deleted."""
    import pickle

    env = _cache_env(tmp_path)
    cli("analyze", str(log), env=env, ok=(1,))
    d = tmp_path / "xdg" / "triage"
    marker = tmp_path / "PWNED"

    class Boom:
        def __reduce__(self):  # noqa: ANN204
            return (os.system, (f"touch {marker}",))

    cached = next(d.glob("catalogue-*.jsonl"))
    evil = pickle.dumps(Boom())
    cached.with_suffix(".pickle").write_bytes(evil)
    cached.write_bytes(evil)  # the cache's name holds a pickle: a miss, rebuilt from YAML
    p = cli("analyze", str(log), "--format", "json", env=env, ok=(1,))
    assert first_exception(p) == "ZeroDivisionError"
    assert not marker.exists()
    assert not list(d.glob("*.pickle"))
    assert _cache_doc(cached)["signatures"]  # rewritten as JSON


@pytest.mark.parametrize("edit", ["confidence", "pattern", "verbose-pattern"])
def test_edited_cache_is_a_miss_not_a_crash(tmp_path, log, edit):
    env = _cache_env(tmp_path)
    cli("analyze", str(log), env=env, ok=(1,))
    cached = next((tmp_path / "xdg" / "triage").glob("catalogue-*.jsonl"))

    def change(kind: str, spec: dict) -> None:
        if kind != "signature":
            return
        if edit == "confidence":
            spec["confidence"] = "very"  # fails validation
        elif edit == "pattern":
            spec["patterns"] = ["((((a{100}){100}){100}){100})"]
        else:  # one only regex's own parser sees the size of: checked in full when it is compiled
            spec["patterns"] = ["(?x)((((a{100}) {100}) {100}) {100})"]

    _edit_specs(cached, change)
    # the catastrophic patterns under a 2 GB cap, in a child: compiling one would exhaust memory
    p = cli("analyze", str(log), "--format", "json", env=env, ok=(1,), limit_as=2 << 30 if edit == "pattern" else None)
    assert first_exception(p) == "ZeroDivisionError"
    assert json.loads(p.stdout)["findings"], "the entries were read again from their YAML"


def test_every_catalogue_change_misses_the_cache(tmp_path):
    """The cache key covers each YAML file the loader reads (nested, dot-named, through a
    symlink) by its size and mtime, and not a file the loader skips (under a dot-directory)."""
    from triage.catalogue.cache import cache_path

    root = tmp_path / "cat"
    (root / "signatures" / "sub").mkdir(parents=True)
    (root / "signatures" / ".hidden").mkdir()
    entry = root / "signatures" / "sub" / "a.yaml"
    entry.write_text("id: a\n")
    target = tmp_path / "elsewhere.yaml"
    target.write_text("id: b\n")
    (root / "signatures" / "link.yaml").symlink_to(target)
    keys = [cache_path([root])]

    def changed() -> bool:
        keys.append(cache_path([root]))
        return keys[-1] != keys[-2]

    (root / "signatures" / ".hidden" / "x.yaml").write_text("id: x\n")
    assert not changed()  # the loader never reads a dot-directory
    (root / "tests").mkdir()
    (root / "tests" / "label.yaml").write_text("id: l\n")
    assert not changed()  # nor, in a root with signatures/, anything beside signatures/ and workarounds/
    (root / "signatures" / ".dot.yaml").write_text("id: d\n")
    assert changed()
    entry.write_text("id: a2\n")
    assert changed()  # size
    os.utime(entry, ns=(1, 1))
    assert changed()  # mtime
    target.write_text("id: b, longer\n")
    assert changed()  # through the symlink
    (root / "signatures" / "sub" / "new.yml").write_text("id: n\n")
    assert changed()
    assert cache_path([root]) != cache_path([root, tmp_path / "other"])  # another set of roots


def test_an_extra_catalogue_is_cached_on_its_own(tmp_path, log, monkeypatch):
    """One cache file per catalogue directory: with --catalogue DIR the built-in catalogue is
    still read from its cache, and editing DIR re-reads DIR alone."""
    from triage.catalogue import load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    extra = tmp_path / "mine"
    (extra / "signatures").mkdir(parents=True)
    (extra / "workarounds").mkdir()
    (extra / "signatures" / "x.yaml").write_text(SIG.format(pattern="frobnicator exploded", example="now"))
    (extra / "workarounds" / "x.yaml").write_text(WK)
    builtin = load.load_catalogue(cache=True)
    read: list[list[Path]] = []
    real = load.load_roots

    def counting(roots, problems=None):  # noqa: ANN001, ANN202
        read.append(list(roots))
        return real(roots, problems)

    monkeypatch.setattr(load, "load_roots", counting)
    both = load.load_catalogue([str(extra)], cache=True)
    assert read == [[extra]]  # the built-in directory came from its cache
    assert set(both.signatures) == {*builtin.signatures, "my-frobnicator-exploded"}
    assert both.dirs == [*builtin.dirs, str(extra)]
    assert load.load_catalogue([str(extra)], cache=True).signatures.keys() == both.signatures.keys()
    assert read == [[extra]]  # and the extra one from its own, the second time
    assert len(list((tmp_path / "xdg" / "triage").glob("catalogue-*.jsonl"))) == 2


def test_a_process_reads_a_cache_file_once_until_it_changes(tmp_path, monkeypatch):
    """Commands run in one process (a watch, a program embedding the CLI) read the on-disk cache
    once; a cache file edited or replaced since is read again (so an edit is still a miss)."""
    from triage.catalogue import cache as disk
    from triage.catalogue import load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TRIAGE_NO_CACHE", raising=False)
    first = load.load_catalogue(cache=True)
    reads: list[Path] = []
    real = disk.read_cache

    def counting(path):  # noqa: ANN001, ANN202
        reads.append(path)
        return real(path)

    monkeypatch.setattr(disk, "read_cache", counting)
    again = load.load_catalogue(cache=True)
    assert reads == [] and again.signatures.keys() == first.signatures.keys()
    assert again.signatures is not first.signatures  # a catalogue of its own, entries shared
    cached = next((tmp_path / "xdg" / "triage").glob("catalogue-*.jsonl"))
    cached.write_text("{}")  # edited: a miss, rebuilt from the YAML
    assert load.load_catalogue(cache=True).signatures.keys() == first.signatures.keys()
    assert reads == [cached]
    assert _cache_doc(cached)["signatures"]


def test_cache_is_pruned(tmp_path, log):
    from triage.catalogue.cache import KEEP

    env = _cache_env(tmp_path)
    d = tmp_path / "xdg" / "triage"
    d.mkdir(parents=True, mode=0o700)
    for i in range(KEEP + 5):
        old = d / f"catalogue-old{i}.jsonl"
        old.write_text("{}")
        os.utime(old, (1_000_000 + i, 1_000_000 + i))
    (d / "catalogue-0123456789abcdef01234567.json").write_text("{}")  # an earlier version's file
    cli("analyze", str(log), env=env, ok=(1,))
    left = sorted(f.name for f in d.glob("catalogue-*"))
    assert len(left) == KEEP and all(f.endswith(".jsonl") for f in left)
    assert "catalogue-old0.jsonl" not in left


def test_cache_opt_out_and_library_write_nothing(tmp_path, log):
    env = {**_cache_env(tmp_path), "TRIAGE_NO_CACHE": "1"}
    cli("analyze", str(log), env=env, ok=(1,))
    assert not (tmp_path / "xdg").exists()
    import triage

    saved = dict(os.environ)
    os.environ.update(_cache_env(tmp_path))  # a directory this process has never cached into
    try:
        report = triage.analyze(str(log))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert report.failures[0].exception == "ZeroDivisionError"
    assert not (tmp_path / "xdg").exists()  # the library API writes nothing it was not asked for


def test_tests_do_not_use_the_users_cache():
    assert os.environ["XDG_CACHE_HOME"] != os.path.join(os.path.expanduser("~"), ".cache")
    assert "triage-tests-cache-" in os.environ["XDG_CACHE_HOME"]
