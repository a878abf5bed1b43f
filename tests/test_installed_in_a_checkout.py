"""An installed triage (`pip install .` copies the catalogue into the package) run inside a
clone of triage takes the clone's catalogue (issue 35): an edit there shows, `catalogue check`
checks it and `catalogue backtest --against HEAD` compares it with the clone's HEAD, as the
README's examples say. Elsewhere the installed copy's own catalogue. The installed copy is
played in process by pointing the catalogue loader's file into a package directory outside
any checkout (tests/test_install.py installs a real one)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

import triage.catalogue.load as load

SIG = "signatures/sglang/alloc-req-slots-oom.yaml"


def _catalogue(dest: Path) -> None:
    """The workarounds and SGLang's signatures: a valid catalogue, a fifth of the files to read."""
    shutil.copytree(ROOT / "workarounds", dest / "workarounds")
    shutil.copytree(ROOT / "signatures" / "sglang", dest / "signatures" / "sglang")


@pytest.fixture
def installed(tmp_path, monkeypatch) -> Path:
    """A package directory outside any checkout, with the catalogue copied in as the build does."""
    pkg = tmp_path / "site-packages" / "triage" / "catalogue"
    (pkg / "builtin").mkdir(parents=True)
    _catalogue(pkg / "builtin")
    monkeypatch.setattr(load, "__file__", str(pkg / "load.py"))
    return pkg


@pytest.fixture
def clone(tmp_path) -> Path:
    """A clone of triage: its catalogue and pyproject.toml, committed."""
    co = tmp_path / "clone"
    co.mkdir()
    _catalogue(co)
    shutil.copy(ROOT / "pyproject.toml", co)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "-C", str(co)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "catalogue"], check=True)
    return co


def test_an_installed_copy_inside_a_clone_takes_the_clones_catalogue(installed, clone, tmp_path):
    assert load.builtin_dirs(cwd=tmp_path) == [installed / "builtin"]  # outside: the copy in the package
    sig = clone / SIG
    sig.write_text(sig.read_text().replace("title: '", "title: 'EDITED ", 1))
    inside = clone / "signatures"
    assert load.builtin_dirs(cwd=inside) == [clone] and load.checkout_instead(cwd=inside) == clone

    p = run_cli("show", "sglang-alloc-req-slots-oom", cwd=inside)
    assert p.returncode == 0 and b"EDITED" in p.stdout, p.stderr
    assert f"using the catalogue of the checkout at {clone}".encode() in p.stderr
    assert b"EDITED" not in run_cli("show", "sglang-alloc-req-slots-oom", cwd=tmp_path).stdout

    corpus = tmp_path / "corpus" / "cases"
    corpus.mkdir(parents=True)
    for case in ("lmdeploy-1422", "lmdeploy-1813"):
        for ext in (".yaml", ".log"):
            shutil.copy(ROOT / "tests" / "corpus" / "cases" / (case + ext), corpus)
    p = run_cli("catalogue", "backtest", str(corpus.parent), "--against", "HEAD", "-j", "1", "-q", cwd=clone)
    assert p.returncode in (0, 1) and b"Against HEAD" in p.stdout, p.stderr
    p = run_cli("catalogue", "backtest", str(corpus.parent), "--against", "HEAD", "-j", "1", cwd=tmp_path)
    assert p.returncode == 2 and b"not in a git checkout" in p.stderr


def test_a_checkout_is_a_triage_one():
    assert load.checkout_around(ROOT / "triage" / "pipeline") == ROOT
    assert load.checkout_around(Path("/")) is None
