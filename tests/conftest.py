from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

# The tests (and every `triage` they start) keep the catalogue cache in a directory of their
# own, never in the user's ~/.cache.
os.environ["XDG_CACHE_HOME"] = _CACHE = tempfile.mkdtemp(prefix="triage-tests-cache-")
atexit.register(shutil.rmtree, _CACHE, True)
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def catalogue():
    from triage.catalogue.load import load_catalogue

    return load_catalogue()


def run_cli(*args: str, stdin: bytes | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "triage", *args], input=stdin, capture_output=True,
                          cwd=cwd, timeout=120)


def analyze_json(path: Path | str, *extra: str) -> tuple[int, dict]:
    p = run_cli("analyze", str(path), "--format", "json", *extra)
    return p.returncode, json.loads(p.stdout)


@pytest.fixture
def fixture_path():
    return lambda name: FIXTURES / name
