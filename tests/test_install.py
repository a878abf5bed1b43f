"""What a packager does: build the sdist, install it (not the checkout) into a fresh venv,
and run the installed `triage` from elsewhere. The catalogue must travel inside the sdist."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
import venv
from pathlib import Path

import pytest
from conftest import ROOT


@pytest.mark.slow  # a build and an install into a fresh venv (tests/conftest.py: --slow, TRIAGE_SLOW=1)
def test_sdist_builds_installs_into_a_fresh_venv_and_runs(tmp_path: Path) -> None:
    pytest.importorskip("build")
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(dist), str(ROOT)],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    # the licence: an SPDX expression, not the table setuptools deprecates, and its text shipped
    log = built.stdout + built.stderr
    assert "TOML table is deprecated" not in log and "License classifiers are deprecated" not in log, log[-2000:]
    (sdist,) = dist.glob("triage-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
        pkg_info = tar.extractfile(next(n for n in names if n.endswith("/PKG-INFO"))).read().decode()  # type: ignore[union-attr]
    assert any("/signatures/sglang/" in n for n in names) and any("/workarounds/" in n for n in names)
    assert any(n.endswith("/LICENSE") for n in names) and "License-Expression: Apache-2.0" in pkg_info

    # A fresh venv without pip; the dependencies (and the build backend) come from the running
    # interpreter's site-packages through a .pth line, so nothing is fetched from an index.
    # The editable checkout is not reachable that way: a .pth inside an added directory is not run.
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(fresh)
    py = fresh / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "deps.pth").write_text("\n".join(sorted(deps)) + "\n", encoding="utf-8")
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--no-index", str(sdist)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert inst.returncode == 0, inst.stderr[-2000:]

    (meta,) = site.glob("triage-*.dist-info")
    assert "Apache License" in (meta / "licenses" / "LICENSE").read_text()
    triage = fresh / "bin" / "triage"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PATH": f"{fresh / 'bin'}:/usr/bin:/bin", "TRIAGE_NO_CACHE": "1", "HOME": str(tmp_path)}
    where = subprocess.run([str(py), "-c", "import triage.catalogue.load as m, triage; print(triage.__file__); print(m.builtin_dirs()[0])"],
                           capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    assert all(line.startswith(str(fresh)) for line in where.stdout.split()), where.stdout + where.stderr
    p = subprocess.run([str(triage), "analyze", str(ROOT / "examples" / "sglang-nsa-crash.log")],
                       capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "sglang-nsa" in p.stdout
    p = subprocess.run([str(triage), "catalogue", "check", "-q"], capture_output=True, text=True,
                       cwd=elsewhere, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    v = subprocess.run([str(triage), "--version"], capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    assert v.returncode == 0 and v.stdout.startswith("triage "), v.stdout + v.stderr
