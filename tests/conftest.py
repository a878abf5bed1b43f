from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

ROOT = Path(__file__).resolve().parents[1]
TRACEBACK = "Traceback (most recent call last)"


# One worker per core, and one more: a tenth of the suite waits in real time (servers that
# `run` supervises, signals, timeouts, grace periods), and the extra worker runs tests while
# another waits. Measured back to back on the shared two cores on 2026-12-03 (evening), after
# issue 35's fourth round: three workers 51.9 and 54.5 s wall at 99-104 s CPU, two 59.6 and 57.5 s
# at 99-101 s. (Earlier the same day, with Ray and the venv install in the default run and the
# CPU-heavy tests not yet cut, a third worker cost 30% more CPU and was slower: 80 s against 60.)
MIN_CORES = 2
EXTRA_WORKERS = 1
MAX_WORKERS = 9


def workers() -> int:
    return min((os.cpu_count() or 1) + EXTRA_WORKERS, MAX_WORKERS)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The whole suite (`python -m pytest` with no paths) runs on one worker per core and one
    more (three on two cores) when pytest-xdist is installed (the `test` extra has it) and there
    are two cores or more. Without
    xdist, with -n given, with paths given (one file while developing: starting workers costs
    more than it saves) or inside a worker, this does nothing and the run is serial."""
    if (not config.pluginmanager.hasplugin("xdist") or getattr(config.option, "numprocesses", 0) is not None
            or hasattr(config, "workerinput") or config.args_source != pytest.Config.ArgsSource.TESTPATHS
            or (os.cpu_count() or 1) < MIN_CORES or config.option.collectonly):
        return
    config.option.numprocesses = workers()
    config.option.dist = "loadfile"  # a file's module fixtures (a 100 MB log, reports) are made once
    # files are handed out in the order of pytest_collection_modifyitems below (the longest
    # first), not xdist's default of the most tests first, which left the two slowest files
    # (one test each) to the end of the run, on one worker
    config.option.loadscopereorder = False


# The files that take longest (CPU and waiting, measured per test on 2026-12-03, evening, on three
# workers), in that order: handed out first, they overlap with the many short files instead
# of ending the run alone. test_install and test_fleet_ray (slow: skipped unless --slow or
# TRIAGE_SLOW=1) mostly wait on pip and Ray, so they go first when they run. Any file not
# listed follows in collection order.
LONGEST_FIRST = ("test_install.py", "test_fleet_ray.py", "test_robust.py", "test_conventions.py",
                 "test_secrets_everywhere.py", "test_catalogue.py", "test_nothing_lost.py", "test_hardening.py",
                 "test_scan.py", "test_golden.py", "test_retry.py", "test_secret_rules.py", "test_fleet.py",
                 "test_backtest.py", "test_gate_plans.py", "test_load_probe.py", "test_cli.py", "test_atlas.py",
                 "test_html_format.py", "test_prefill_window.py", "test_properties.py", "test_detection.py",
                 "test_installed_in_a_checkout.py", "test_watch.py", "test_bench_smoke.py", "test_corpus.py",
                 "test_side_effects.py", "test_startup.py")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the tests marked slow (Ray, a fresh venv, 100 MB inputs); TRIAGE_SLOW=1 does the same")


def slow_tests_run(config: pytest.Config) -> bool:
    """The slow tests run with --slow or TRIAGE_SLOW set (and not 0/false/no); a plain
    `python -m pytest` skips them and says so in its summary. CI=true no longer implies them
    (issue 35): Ray's start-up and the fresh-venv install alone took 20 s of CPU and 40-70 s of
    wall on two shared cores, more than the whole suite's 60 s, so CI runs the suite as a
    laptop does and runs them in a job of their own with TRIAGE_SLOW=1 (docs/testing.md)."""
    return bool(config.getoption("--slow")) or os.environ.get("TRIAGE_SLOW", "").lower() not in ("", "0", "false", "no")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not slow_tests_run(config):
        skip = pytest.mark.skip(reason="slow: run with --slow or TRIAGE_SLOW=1")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)
    if not hasattr(config, "workerinput"):
        return  # a serial run keeps the collection order
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's order is kept


_SAVED_CACHE_HOME: list[str | None] = []
_SHARED_CACHE = "TRIAGE_TESTS_CACHE_HOME"
_OWN_CACHE: list[str] = []


# Examples per property test (tests/test_properties.py: property_examples()): every one with
# the slow tests (--slow, TRIAGE_SLOW=1), a fifth of them in a plain `python -m pytest` (the
# same derandomized sequence, cut short: 50 cost 3.9 s of the suite's 60).
EXAMPLES_SLOW, EXAMPLES_LOCAL = 150, 30
_RUN: dict[str, bool] = {"slow": False}


def property_examples() -> int:
    return EXAMPLES_SLOW if _RUN["slow"] else EXAMPLES_LOCAL


_SAVED_BYTECODE: list[tuple[str, bool]] = []


def _bytecode_written() -> None:
    """With PYTHONDONTWRITEBYTECODE set (some CI images and sandboxes set it), every child
    `python -m triage` (~50 in a run), every xdist worker and every test module's assertion
    rewrite compiled from source again, on every run: +0.6 s of CPU per child, +3 s per
    worker's collection. The run and its children write their .pyc files where Python does by
    default (__pycache__, ignored by git), as benchmarks/bench_scan.py's warm-up already does;
    the variable is put back at the end."""
    if "PYTHONDONTWRITEBYTECODE" not in os.environ:
        return
    _SAVED_BYTECODE.append((os.environ.pop("PYTHONDONTWRITEBYTECODE"), sys.dont_write_bytecode))
    sys.dont_write_bytecode = False


def _bytecode_restored() -> None:
    if _SAVED_BYTECODE:
        os.environ["PYTHONDONTWRITEBYTECODE"], sys.dont_write_bytecode = _SAVED_BYTECODE.pop()


def pytest_configure(config: pytest.Config) -> None:
    """The catalogue cache of this run (and of the subprocesses it starts) lives in a temporary
    directory, set before any test module loads a catalogue: the tests never write into the
    user's ~/.cache, and a stale cache there cannot hide a change to the catalogue."""
    _RUN["slow"] = slow_tests_run(config)
    _bytecode_written()
    _SAVED_CACHE_HOME.append(os.environ.get("XDG_CACHE_HOME"))
    # xdist's workers take the controller's directory (they inherit its environment): the
    # built-in catalogue's cache and its Hyperscan database are built once per run, not once
    # per worker (~1.5 s of CPU each); triage writes both atomically, so workers may race
    shared = os.environ.get(_SHARED_CACHE) if hasattr(config, "workerinput") else None
    os.environ["XDG_CACHE_HOME"] = shared or tempfile.mkdtemp(prefix="triage-tests-cache-")
    if not shared:
        os.environ[_SHARED_CACHE] = os.environ["XDG_CACHE_HOME"]
        _OWN_CACHE.append(os.environ["XDG_CACHE_HOME"])


def pytest_unconfigure(config: pytest.Config) -> None:
    _bytecode_restored()
    if not _SAVED_CACHE_HOME:
        return
    here = os.environ.pop("XDG_CACHE_HOME", "")
    if here in _OWN_CACHE:  # a worker leaves the controller's directory to the controller
        _OWN_CACHE.remove(here)
        os.environ.pop(_SHARED_CACHE, None)
        shutil.rmtree(here, ignore_errors=True)
    before = _SAVED_CACHE_HOME.pop()
    if before is not None:
        os.environ["XDG_CACHE_HOME"] = before


def linear(cost: Callable[[str], float], small: str, big: str, factor: float = 8,
           slack: float = 0.05) -> tuple[float, float]:
    """(cost of small, cost of big) for a linearity check `big < factor * small + slack`
    (CPU seconds from `cost`): measured once each, and when the check would fail, once more
    each, keeping the faster (a loaded machine only ever adds time). The faster of two used
    to be taken every time; only a failing ratio needs the second measurement."""
    t_small, t_big = cost(small), cost(big)
    if not t_big < factor * t_small + slack:
        t_small, t_big = min(t_small, cost(small)), min(t_big, cost(big))
    return t_small, t_big


@pytest.fixture(scope="session")
def catalogue():
    from triage.catalogue.load import load_catalogue

    return load_catalogue()


def run_cli(*args: str, stdin: bytes | Path | None = None, cwd: Path | str | None = None,
            env: Mapping[str, str | None] | None = None, stdin_closed: bool = False,
            stdout_fd: int | None = None) -> subprocess.CompletedProcess:
    """`triage ARGS` run in this process, as the console entry point runs it (same error handling
    and exit codes), with bytes in and out like `subprocess.run(..., capture_output=True)`.

    A subprocess costs ~1.4 s (interpreter, imports, catalogue); this costs the command's own
    work. `env` is set on top of this process's environment for the call (None unsets a name).
    Tests of the installed entry point, signals and child processes use `run_process`.
    `stdin` as a Path: the shell's `< FILE` (stdin is that regular file); `stdin_closed`: the
    shell's `<&-` (Python then has no sys.stdin). `stdout_fd`: stdout is written to that file
    descriptor (a pseudo-terminal's, for what triage prints to a terminal), not captured."""
    from triage.cli import run_main

    out, err = io.BytesIO(), io.BytesIO()
    if isinstance(stdin, Path):
        stdin_stream: io.TextIOWrapper | None = io.TextIOWrapper(open(stdin, "rb"), encoding="utf-8")  # noqa: SIM115
    else:
        stdin_stream = None if stdin_closed else io.TextIOWrapper(io.BufferedReader(io.BytesIO(stdin or b"")), encoding="utf-8")
    # what a pipe gives a real process: UTF-8, strict on stdout, backslashreplace on stderr
    stdout_raw = out if stdout_fd is None else io.FileIO(stdout_fd, "w", closefd=False)
    streams = (stdin_stream,
               io.TextIOWrapper(stdout_raw, encoding="utf-8", write_through=True),
               io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True))
    saved_streams, saved_cwd, saved_env = (sys.stdin, sys.stdout, sys.stderr), os.getcwd(), dict(os.environ)
    try:
        sys.stdin, sys.stdout, sys.stderr = streams
        if cwd is not None:
            os.chdir(cwd)
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        code = run_main(list(args), prog_name="triage")
        sys.stdout.flush()
        sys.stderr.flush()
        stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        if stdin_stream is not None:
            stdin_stream.close()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["triage", *args], code, stdout, stderr)


def run_process(*args: str, stdin: bytes | None = None, cwd: Path | str | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m triage ARGS` in a new process: only for what needs one (the module entry
    point, signals, a fresh interpreter's memory or start-up)."""
    return subprocess.run([sys.executable, "-m", "triage", *args], input=stdin, capture_output=True,
                          cwd=cwd, timeout=timeout)


def analyze_json(path: Path | str, *extra: str) -> tuple[int, dict]:
    p = run_cli("analyze", str(path), "--format", "json", *extra)
    return p.returncode, json.loads(p.stdout)


@pytest.fixture
def fixture_path():
    return lambda name: FIXTURES / name
