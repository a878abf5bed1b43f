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
from conftest import run_cli
from fleet_archive import SIGNATURES, make_archive

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'triage[ray]' (the test extra has it)")

from triage.commands.fleet import run as fleet_run  # noqa: E402
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
    # the command itself, in this process: --ray local joins the Ray this test started
    p = run_cli("fleet", str(archive.root), "--ray", "local", "--format", "json", "--no-redact", "--batch", "16")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc == local_doc
    assert doc["summary"] == {"files": 242, "read": 240, "failed": 1, "skipped": 1, "with_failure": 180, "groups": 6}
    assert archive.logs == 240 and len(doc["leaderboard"]) == 6
    assert {r["key"] for r in doc["leaderboard"] if r["known"]} == set(SIGNATURES.values())
    assert all(r["servers"] == 30 and r["logs"] == 30 for r in doc["leaderboard"])
    # and through the library API, with its own batch size: the same aggregates
    t = run_fleet(str(archive.root), FleetOptions(ray="local", batch=32))
    assert json.loads(json.dumps(leaderboard(t, str(archive.root), None))) == local_doc


def test_a_ray_worker_that_dies_is_retried_once_then_reported(archive, ray_session, monkeypatch):
    """A task whose worker process exits mid-batch loses the batch: each of its files is tried
    once more in a task of its own, the one that kills its worker again is reported."""
    deadly = str(archive.root / "node03" / "serve-2.log")

    def dying(files, job):  # defined here, so Ray ships it by value to its workers
        import os

        from triage.commands.fleet.worker import analyse_batch as real

        if any(lf.path == deadly for lf in files):
            os._exit(9)
        return real(files, job)

    def runner_for(address, jobs):
        r = RayRunner(address, jobs)
        r.task = ray.remote(num_cpus=1, max_retries=0)(dying)
        return r

    monkeypatch.setattr(fleet_run, "runner_for", runner_for)
    t = run_fleet(str(archive.root), FleetOptions(ray="local", batch=16))
    assert (t.read, t.failed, t.skipped) == (archive.logs - 1, 2, 1)
    assert set(t.errors) == {deadly, *archive.broken}
    assert t.errors[deadly] == "not analysed, twice: Ray task failed (WorkerCrashedError)"
    assert t.groups["system-segfault"].logs == 29  # the other 15 files of its batch counted


def test_a_failed_ray_task_is_reported_not_dropped(ray_session):
    runner = RayRunner("local")  # Ray is running already: joined, not started
    assert not runner.started
    (batch, outcome), = list(runner.map(iter([[None]]), Job()))  # a batch its worker cannot analyse
    assert batch == [None] and isinstance(outcome, str) and outcome.startswith("Ray task failed")
