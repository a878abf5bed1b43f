from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
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
