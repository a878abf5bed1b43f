"""`triage fleet` on Ray gives the same leaderboard as on the local process pool.

One local Ray instance (2 CPUs, no dashboard) for the module. Skipped only where Ray cannot
be imported; `pip install '.[test]'` installs it.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
from fleet_archive import make_archive

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'triage[ray]' (the test extra has it)")

from triage.commands.fleet.render import leaderboard  # noqa: E402
from triage.commands.fleet.run import FleetOptions, run_fleet  # noqa: E402
from triage.commands.fleet.runners import RayRunner  # noqa: E402
from triage.commands.fleet.worker import Job  # noqa: E402


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return make_archive(tmp_path_factory.mktemp("fleet-ray") / "archive", servers=30, per_server=8)


@pytest.fixture(scope="module")
def ray_session(archive):
    # the local-pool run goes on in its own process while Ray starts (most of Ray's start-up
    # is waiting for its processes), and it forks its pool without Ray's threads around
    local = subprocess.Popen([sys.executable, "-m", "triage", "fleet", str(archive.root), "--format", "json",
                              "--jobs", "2", "--no-redact"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    out, err = local.communicate(timeout=120)
    assert local.returncode == 1, err
    yield json.loads(out)
    ray.shutdown()


def test_ray_and_local_pool_give_identical_leaderboards(archive, ray_session):
    local_doc = ray_session
    t = run_fleet(str(archive.root), FleetOptions(ray="local", batch=32))
    doc = json.loads(json.dumps(leaderboard(t, str(archive.root), None)))
    assert doc == local_doc
    assert doc["summary"]["read"] == archive.logs == 240 and doc["summary"]["failed"] == 1
    assert len(doc["leaderboard"]) == 6


def test_a_failed_ray_task_is_reported_not_dropped(ray_session):
    runner = RayRunner("local")  # Ray is running already: joined, not started
    assert not runner.started
    (batch, outcome), = list(runner.map(iter([[None]]), Job()))  # a batch its worker cannot analyse
    assert batch == [None] and isinstance(outcome, str) and outcome.startswith("Ray task failed")
