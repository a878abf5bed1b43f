"""`triage fleet` on Ray gives the same leaderboard as on the local process pool.

One local Ray instance (2 CPUs, no dashboard) for the module, in a child process: a process
that has run Ray keeps Ray's gRPC threads after ray.shutdown(), and a later test forking a
pool from it (many, fleet, a parallel scan) can deadlock in the child (it did, once this file
stopped being the last one its xdist worker ran). The child runs the command itself
(`triage fleet --ray local`, joining the child's Ray), the library call, a batch whose worker
dies, and a batch its worker cannot analyse; the local-pool run is a second child that runs
while Ray starts. Skipped only where Ray cannot be imported; `pip install '.[test]'` installs it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest
from fleet_archive import SIGNATURES, make_archive

# found, not imported: importing Ray cost every worker a second when collecting tests that a
# plain run skips (the tests run Ray in a child)
pytestmark = [pytest.mark.slow,  # Ray's start-up: most of the suite's CPU (tests/conftest.py: --slow, TRIAGE_SLOW=1)
              pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                 reason="Ray is not installed: pip install 'triage[ray]' (the test extra has it)")]

ON_RAY = textwrap.dedent("""
    import json, logging, sys
    import ray
    from triage.cli import run_main
    from triage.commands.fleet import run as fleet_run
    from triage.commands.fleet.render import leaderboard
    from triage.commands.fleet.run import FleetOptions, run_fleet
    from triage.commands.fleet.runners import RayRunner
    from triage.commands.fleet.worker import Job

    root, out, deadly, result = sys.argv[1:5]


    def dying(files, job):  # defined in __main__, so Ray ships it by value to its workers
        import os

        from triage.commands.fleet.worker import analyse_batch as real

        if any(lf.path == deadly for lf in files):
            os._exit(9)
        return real(files, job)


    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    try:
        # the command itself: --ray local joins the Ray started above
        code = run_main(["fleet", root, "--ray", "local", "--format", "json", "--no-redact", "--batch", "16", "-o", out])
        # the library API, with its own batch size
        lib = json.loads(json.dumps(leaderboard(run_fleet(root, FleetOptions(ray="local", batch=32)), root, None)))
        # a batch its worker cannot analyse comes back as a failure, not dropped
        runner = RayRunner("local")  # Ray is running already: joined, not started
        (batch, outcome), = list(runner.map(iter([[None]]), Job()))
        # a worker that dies mid-batch: its files are retried one task each, the deadly one reported

        def runner_for(address, jobs):
            r = RayRunner(address, jobs)
            r.task = ray.remote(num_cpus=1, max_retries=0)(dying)
            return r

        fleet_run.runner_for = runner_for
        t = run_fleet(root, FleetOptions(ray="local", batch=16))
        died = {"read": t.read, "failed": t.failed, "skipped": t.skipped, "errors": t.errors,
                "segfault_logs": t.groups["system-segfault"].logs}
        with open(result, "w") as fh:  # not stdout: Ray's raylet prints there too, at any time
            json.dump({"code": code, "library": lib, "joined": not runner.started, "batch": batch,
                       "outcome": outcome, "died": died}, fh)
    finally:
        ray.shutdown()
""")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    # 8 servers of every kind: enough for two 16-log batches per server group and the deadly file
    # (node03); 30 made every Ray run (four of them) analyse 960 logs on a busy machine
    return make_archive(tmp_path_factory.mktemp("fleet-ray") / "archive", servers=8, per_server=8)


@pytest.fixture(scope="module")
def runs(archive, tmp_path_factory) -> tuple[dict, dict, dict, str]:
    """(the local pool's JSON leaderboard, the command's on Ray, what the Ray child printed, the deadly file)."""
    local = subprocess.Popen([sys.executable, "-m", "triage", "fleet", str(archive.root), "--format", "json",
                              "--jobs", "2", "--no-redact"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = tmp_path_factory.mktemp("fleet-ray-out") / "board.json"
    result = out.with_name("result.json")
    deadly = str(archive.root / "node03" / "serve-2.log")
    on_ray = subprocess.run([sys.executable, "-c", ON_RAY, str(archive.root), str(out), deadly, str(result)],
                            capture_output=True, timeout=300)
    stdout, err = local.communicate(timeout=120)
    assert local.returncode == 1, err
    assert on_ray.returncode == 0, on_ray.stderr.decode(errors="replace")[-3000:]
    return json.loads(stdout), json.loads(out.read_text()), json.loads(result.read_text()), deadly


def test_ray_and_local_pool_give_identical_leaderboards(archive, runs):
    local_doc, doc, ray_run, _ = runs
    assert ray_run["code"] == 1
    assert doc == local_doc
    n = archive.servers
    assert doc["summary"] == {"files": 8 * n + 2, "read": 8 * n, "failed": 1, "skipped": 1, "with_failure": 6 * n,
                              "groups": 6}
    assert archive.logs == 8 * n and len(doc["leaderboard"]) == 6
    assert {r["key"] for r in doc["leaderboard"] if r["known"]} == set(SIGNATURES.values())
    assert all(r["servers"] == n and r["logs"] == n for r in doc["leaderboard"])
    assert ray_run["library"] == local_doc  # through the library API, with its own batch size


def test_a_ray_worker_that_dies_is_retried_once_then_reported(archive, runs):
    """A task whose worker process exits mid-batch loses the batch: each of its files is tried
    once more in a task of its own, the one that kills its worker again is reported."""
    _, _, ray_run, deadly = runs
    died = ray_run["died"]
    assert (died["read"], died["failed"], died["skipped"]) == (archive.logs - 1, 2, 1)
    assert set(died["errors"]) == {deadly, *archive.broken}
    assert died["errors"][deadly] == "not analysed, twice: Ray task failed (WorkerCrashedError)"
    assert died["segfault_logs"] == archive.servers - 1  # the other 15 files of its batch counted


def test_a_failed_ray_task_is_reported_not_dropped(runs):
    ray_run = runs[2]
    assert ray_run["joined"]
    assert ray_run["batch"] == [None] and isinstance(ray_run["outcome"], str)
    assert ray_run["outcome"].startswith("Ray task failed")
