"""A non-editable install finds the catalogue from any directory (it ships inside the wheel)."""

import subprocess
import sys

from conftest import FIXTURES, ROOT


def test_non_editable_install_carries_the_catalogue(tmp_path):
    target = tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--target", str(target), str(ROOT)],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    assert (target / "triage" / "catalogue" / "builtin" / "signatures").is_dir()
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = subprocess.run([sys.executable, "-m", "triage", "analyze", str(FIXTURES / "sglang-nsa-tp8.log")],
                       capture_output=True, text=True, cwd=elsewhere, env=env, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "sglang-nsa-page-table-1-flattened" in p.stdout
    where = subprocess.run([sys.executable, "-c", "from triage.catalogue.load import builtin_dirs; print(builtin_dirs()[0])"],
                           capture_output=True, text=True, cwd=elsewhere, env=env, timeout=60)
    assert where.stdout.strip().startswith(str(target)), where.stdout  # not the checkout's copy
    p = subprocess.run([sys.executable, "-m", "triage", "catalogue", "check", "-q"],
                       capture_output=True, text=True, cwd=elsewhere, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:]
