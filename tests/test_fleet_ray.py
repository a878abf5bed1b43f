"""`triage fleet` on Ray gives the same leaderboard as on the local process pool.

One local Ray instance (2 CPUs, no dashboard) for the module, in a child process: a process
that has run Ray keeps Ray's gRPC threads after ray.shutdown(), and a later test forking a
pool from it (many, fleet, a parallel scan) can deadlock in the child (it did, once this file
stopped being the last one its xdist worker ran). The local-pool run is a second child that
runs while Ray starts. Skipped only where Ray cannot be imported; `pip install '.[test]'`
installs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from fleet_archive import make_archive

pytest.importorskip("ray", reason="Ray is not installed: pip install 'triage[ray]' (the test extra has it)")

# Ray started as a notebook or a test would, then: the leaderboard of a Ray run, and what a
# batch that its worker cannot analyse comes back as
ON_RAY = textwrap.dedent("""
    import json, logging, sys
    import ray
    from triage.commands.fleet.render import leaderboard
    from triage.commands.fleet.run import FleetOptions, run_fleet
    from triage.commands.fleet.runners import RayRunner
    from triage.commands.fleet.worker import Job

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        t = run_fleet(sys.argv[1], FleetOptions(ray="local", batch=32))
        doc = leaderboard(t, sys.argv[1], None)
        runner = RayRunner("local")  # Ray is running already: joined, not started
        (batch, outcome), = list(runner.map(iter([[None]]), Job()))
        print(json.dumps({"leaderboard": doc, "joined": not runner.started, "batch": batch, "outcome": outcome}))
    finally:
        ray.shutdown()
""")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return make_archive(tmp_path_factory.mktemp("fleet-ray") / "archive", servers=30, per_server=8)


@pytest.fixture(scope="module")
def runs(archive) -> tuple[dict, dict]:
    """(the local pool's JSON leaderboard, what the Ray child printed)."""
    local = subprocess.Popen([sys.executable, "-m", "triage", "fleet", str(archive.root), "--format", "json",
                              "--jobs", "2", "--no-redact"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    on_ray = subprocess.run([sys.executable, "-c", ON_RAY, str(archive.root)], capture_output=True, timeout=300)
    out, err = local.communicate(timeout=120)
    assert local.returncode == 1, err
    assert on_ray.returncode == 0, on_ray.stderr.decode(errors="replace")[-3000:]
    return json.loads(out), json.loads(on_ray.stdout)


def test_ray_and_local_pool_give_identical_leaderboards(archive, runs):
    local_doc, ray_run = runs
    doc = ray_run["leaderboard"]
    assert doc == local_doc
    assert doc["summary"]["read"] == archive.logs == 240 and doc["summary"]["failed"] == 1
    assert len(doc["leaderboard"]) == 6


def test_a_failed_ray_task_is_reported_not_dropped(runs):
    _, ray_run = runs
    assert ray_run["joined"]
    assert ray_run["batch"] == [None] and isinstance(ray_run["outcome"], str)
    assert ray_run["outcome"].startswith("Ray task failed")
