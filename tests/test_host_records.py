"""`analyze LOG --with FILE`: the kernel log, nvidia-smi, Kubernetes and Slurm records of the same
incident on the server log's timeline, and the failure blamed on the host when a host event
explains it. The four incidents of tests/fixtures/host/ run through the CLI in Markdown and JSON:
an Xid 79 under a NCCL timeout (the dead rank's GPU found through NCCL's bus ids), an
uncorrectable ECC error (Xid 48) under a CUDA error (the rank's GPU through CUDA_VISIBLE_DEVICES
and nvidia-smi -q), a container OOMKilled while loading (the server log alone shows no error), and
old or unrelated Xids that must not be blamed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES, run_cli

from triage.catalogue.xid import catalogue, lookup
from triage.pipeline.host.clock import parse_offset
from triage.pipeline.host.kernel import nccl_bus, norm_bus
from triage.pipeline.host.source import sniff

HOST = FIXTURES / "host"


def _run(case: str, *extra: str, fmt: str = "markdown") -> tuple[int, str]:
    d = HOST / case
    args = ["analyze", str(d / "server.log")]
    for f in sorted(d.iterdir()):
        if f.name != "server.log":
            args += ["--with", str(f)]
    p = run_cli(*args, "--format", fmt, *extra)
    return p.returncode, p.stdout.decode()


def _json(case: str, *extra: str) -> dict:
    code, out = _run(case, *extra, fmt="json")
    doc = json.loads(out)
    assert doc["exit_code"] == code
    return doc


def test_xid79_under_a_nccl_timeout_blames_the_gpu_found_through_its_bus_id():
    code, md = _run("xid79-nccl")
    assert code == 1
    first = md.split("## Timeline")[0]
    assert "host fault: Xid 79" in first.splitlines()[0]
    assert "The hardware is the cause" in first and "Xid 79" in first
    assert "GPU 2 / rank2 / 0000:3b:00.0" in first  # rank2's bus id from NCCL's init line, GPU index from nvidia-smi
    assert "10 min before the failure" in first
    assert "**Do now:** drain the node and reboot it" in first
    assert "--dist-timeout" not in first  # the server-side advice is not "Do now"
    assert "*(not-applicable)*" in md
    doc = _json("xid79-nccl")
    host = doc["host"]
    assert [s["kind"] for s in host["sources"]] == ["kernel", "nvidia-smi-csv"]
    cause = host["events"][host["attribution"]["cause"]]
    assert (cause["kind"], cause["xid"], cause["gpu"], cause["bus_id"]) == ("xid", 79, 2, "0000:3b:00.0")
    assert cause["source"].endswith("dmesg-T.txt") and cause["line"] == 6 and cause["blamed"]
    assert host["attribution"]["ranks"] == {"rank0": 0, "rank1": 1, "rank2": 2, "rank3": 3}
    assert host["attribution"]["failing_ranks"] == ["rank0", "rank1", "rank3"]
    assert doc["patched_command"] is None
    recs = [w["status"] for f in doc["findings"] for w in f["workarounds"]]
    assert recs and "recommended" not in recs


def test_an_ecc_xid_under_a_cuda_error_blames_the_rank_gpu_through_cuda_visible_devices():
    code, md = _run("ecc-cuda")
    assert code == 1
    first = md.split("## Timeline")[0]
    assert "Xid 48 (ROBUST_CHANNEL_GPU_ECC_DBE) on GPU 3 / rank1 / 0000:5d:00.0, 1 s before the failure" in first
    assert "reset the GPU" in first and "RMA" in first
    assert "**Then investigate:**" not in first  # the same action twice is said once
    doc = _json("ecc-cuda")
    host = doc["host"]
    assert host["attribution"]["ranks"] == {"rank1": 3}
    assert any("CUDA_VISIBLE_DEVICES=2,3" in h for h in host["attribution"]["how"])
    events = {(e["kind"], e["xid"]): e for e in host["events"]}
    assert events[("xid", 48)]["blamed"]
    assert not events[("xid", 45)]["blamed"] and "application" in events[("xid", 45)]["note"]
    assert events[("row-remap", None)]["gpu"] == 3  # nvidia-smi -q: rows pending remap on that GPU
    assert events[("xid", 48)]["time"].endswith("06-24 10:15:02")  # the journal's yearless date, year from nvidia-smi
    assert events[("xid", 48)]["time"].startswith("2025")


def test_a_container_oomkilled_while_loading_is_a_failure_though_the_log_shows_none():
    alone = run_cli("analyze", str(HOST / "oomkilled-loading" / "server.log"), "-q")
    assert alone.returncode == 0  # the server log alone: no failure
    code, md = _run("oomkilled-loading")
    assert code == 1
    first = md.split("## Timeline")[0]
    assert "no error in the server log" in first.splitlines()[0]
    assert "killed for using more host memory" in first and "21 s after the log's last line" in first
    assert "resources.limits.memory, now 256Gi" in first
    doc = _json("oomkilled-loading")
    cause = doc["host"]["events"][doc["host"]["attribution"]["cause"]]
    assert (cause["kind"], cause["line"], cause["time"]) == ("oom-killed", 18, "2025-06-24 22:31:12")
    assert doc["host"]["sources"][0]["clock"].startswith("UTC")
    assert doc["host"]["failure_time_from"] == "the log's last timestamp (line 36)"


def test_an_old_xid_and_one_on_another_gpu_are_listed_not_blamed():
    code, md = _run("unrelated-xid")
    assert code == 1  # the NCCL timeout itself
    first = md.split("## Timeline")[0]
    assert "host fault" not in first and "hardware is the cause" not in first
    assert "**Do now:** add `--disable-custom-all-reduce`" in first  # the server-side advice stands
    assert "No host event is blamed" in md
    doc = _json("unrelated-xid")
    host = doc["host"]
    assert host["attribution"]["cause"] is None
    notes = {(e["xid"], e["line"]): e["note"] for e in host["events"]}
    assert "too early" in notes[(48, 1)]
    assert notes[(79, 3)] == "on a GPU this failure does not involve"
    assert "application" in notes[(13, 4)]
    assert not any(e["blamed"] for e in host["events"])


def test_a_bundle_directory_is_read_as_one_incident(tmp_path):
    d = tmp_path / "incident"
    shutil.copytree(HOST / "xid79-nccl", d)
    p = run_cli("analyze", str(d), "--format", "json")
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and len(doc["reports"]) == 1
    assert doc["host"]["events"][doc["host"]["attribution"]["cause"]]["xid"] == 79
    (d / "second.log").write_text((d / "server.log").read_text())  # two server logs: not one incident
    p = run_cli("analyze", str(d), "--format", "json")
    assert len(json.loads(p.stdout)["reports"]) == 4 and "host" not in json.loads(p.stdout)


def test_an_unknown_record_is_a_one_line_error_exit_2(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("we restarted the pod twice\nthen it worked\n")
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), "--with", str(notes))
    assert p.returncode == 2
    err = p.stderr.decode().strip()
    assert len(err.splitlines()) == 1 and "not a record triage reads" in err and "Traceback" not in err
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), "--with", str(tmp_path / "missing"))
    assert p.returncode == 2 and "no such file" in p.stderr.decode()
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), str(HOST / "ecc-cuda" / "server.log"),
                "--with", str(HOST / "xid79-nccl" / "dmesg-T.txt"))
    assert p.returncode == 2 and "single LOG" in p.stderr.decode()
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), "--host-offset", "soon",
                "--with", str(HOST / "xid79-nccl" / "dmesg-T.txt"))
    assert p.returncode == 2 and "--host-offset soon" in p.stderr.decode()


def test_host_offset_moves_naive_host_times_onto_the_log_clock():
    # the host two hours ahead: the Xid at 22:28 host time happened at 20:28 on the log's clock,
    # two hours before the failure, outside the window
    doc = _json("xid79-nccl", "--host-offset", "+02:00")
    xid = next(e for e in doc["host"]["events"] if e["xid"] == 79)
    assert xid["time"] == "2025-06-24 20:28:35" and not xid["blamed"] and "too early" in xid["note"]
    assert "+02:00 ahead" in doc["host"]["sources"][0]["clock"]
    assert parse_offset("-0530").total_seconds() == -5.5 * 3600 and parse_offset("2").total_seconds() == 7200


def test_raw_dmesg_needs_a_boot_time_and_syslog_gives_it(tmp_path):
    raw = tmp_path / "dmesg.txt"
    raw.write_text("[ 5120.221845] NVRM: Xid (PCI:0000:3b:00): 79, pid=4994, name=python3, GPU has fallen off the bus.\n")
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), "--with", str(raw), "--format", "json")
    doc = json.loads(p.stdout)
    src = doc["host"]["sources"][0]
    assert src["clock"] is None and "dmesg -T" in src["clock_note"]
    assert doc["host"]["attribution"]["cause"] is None
    # syslog prints the wall time and the uptime on one line: boot = 22:28:35 - 5120.22 s
    syslog = tmp_path / "syslog"
    syslog.write_text("Jun 24 22:28:35 gpu-node-7 kernel: [ 5120.221845] NVRM: Xid (PCI:0000:3b:00): 79, pid=4994, "
                      "name=python3, GPU has fallen off the bus.\n")
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), "--with", str(raw), "--with", str(syslog),
                "--with", str(HOST / "xid79-nccl" / "nvidia-smi.csv"), "--format", "json")
    doc = json.loads(p.stdout)
    placed = [e for e in doc["host"]["events"] if e["source"].endswith("dmesg.txt")]
    assert placed[0]["time"] == "2025-06-24 22:28:35" and "boot at" in doc["host"]["sources"][0]["clock"]


KINDS = {
    "kernel": ["[Tue Jun 24 22:28:35 2025] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=python3, GPU has fallen off the bus."],
    "kernel-journal": ["Jun 24 10:15:02 node kernel: NVRM: Xid (PCI:0000:5d:00): 48, pid=1, name=python3, DBE"],
    "kernel-iso": ["2025-06-24T10:15:02+0000 node kernel: pcieport 0000:00:03.1: AER: Uncorrected (Fatal) error received: 0000:3b:00.0"],
    "nvidia-smi-table": ["+-----------------------------------------------------------------------------------------+",
                         "| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |",
                         "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |"],
    "nvidia-smi-csv": ["index, pci.bus_id, name", "0, 00000000:18:00.0, NVIDIA H100 80GB HBM3"],
    "kubectl-events": ["LAST SEEN   TYPE      REASON      OBJECT           MESSAGE",
                       "2m          Warning   BackOff     pod/sglang-0     Back-off restarting failed container"],
    "pod-json": ['{"kind": "Pod", "status": {"containerStatuses": [{"name": "server", "lastState": {"terminated": '
                 '{"reason": "OOMKilled", "exitCode": 137, "finishedAt": "2025-06-24T22:31:12Z"}}}]}}'],
    "slurm-output": ["loading weights", "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the "
                     "step tasks have been OOM Killed."],
    "sacct": ["JobID           JobName      State ExitCode                 End",
              "------------ ---------- ---------- -------- -------------------",
              "4242             sglang OUT_OF_ME+    0:125 2025-06-24T22:31:12"],
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_record_kind_is_named_from_its_content(name):
    assert sniff(KINDS[name]) == name.split("-journal")[0].split("-iso")[0]


def test_a_server_log_or_a_readme_is_no_host_record():
    assert sniff((HOST / "xid79-nccl" / "server.log").read_text().splitlines()) is None
    assert sniff(["# Runbook", "", "Restart the pod when it hangs."]) is None


def test_slurm_and_pod_json_records_blame_their_kills(tmp_path):
    for name in ("slurm-output", "pod-json", "sacct"):
        f = tmp_path / name
        f.write_text("\n".join(KINDS[name]) + "\n")
        p = run_cli("analyze", str(HOST / "oomkilled-loading" / "server.log"), "--with", str(f), "--format", "json")
        doc = json.loads(p.stdout)
        kinds = [e["kind"] for e in doc["host"]["events"]]
        assert kinds and kinds[0] in ("slurm-oom", "oom-killed"), (name, kinds)
        if name != "slurm-output":  # the job output's line has no time: listed, not blamed
            assert p.returncode == 1 and doc["host"]["attribution"]["cause"] == 0, name


def test_the_xid_catalogue_is_nvidias_whole_table():
    xids = catalogue()
    assert len(xids) >= 170 and set(range(1, 173)) <= set(xids)
    assert lookup(79).mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" and lookup(79).immediate == "RESTART_BM"
    assert lookup(48).hardware and lookup(79).hardware and lookup(95).hardware and lookup(74).hardware
    assert not any(lookup(c).hardware for c in (13, 31, 43, 45))  # the application's own faults
    assert all(x.gpus or x.description.startswith(("Unused", "DLA")) for x in xids.values())


def test_bus_ids_are_spelled_one_way():
    assert norm_bus("00000000:3B:00.0") == norm_bus("0000:3b:00") == norm_bus("3b:00.0") == "0000:3b:00.0"
    assert nccl_bus("3b000") == "0000:3b:00.0" and nccl_bus("1a1000") == "0001:a1:00.0"


def test_host_text_is_redacted(tmp_path):
    k = tmp_path / "dmesg-T.txt"
    k.write_text(Path(HOST / "xid79-nccl" / "dmesg-T.txt").read_text().replace(
        "name=python3, GPU", "name=python3 --api-key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD, GPU"))
    p = run_cli("analyze", str(HOST / "xid79-nccl" / "server.log"), "--with", str(k), "--format", "json")
    assert b"sk-proj-abcdefghij" not in p.stdout and p.returncode == 1


def test_older_slurm_and_dmesg_spellings_are_read():
    from triage.pipeline.host.kernel import read_kernel
    from triage.pipeline.host.orchestrator import read_slurm

    ev = read_slurm(["slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***",
                     "slurmstepd: error: Detected 2 oom-kill event(s) in step 3756240.batch cgroup.",
                     "srun: error: node107: task 0: Out Of Memory"])
    assert [e.kind for e in ev] == ["slurm-timeout", "slurm-oom", "slurm-oom"]
    assert ev[0].wall is not None and ev[0].wall.hour == 17
    iso = "2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (python3) total-vm:87033376kB"
    rel = "[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0"
    assert sniff([iso]) == sniff([rel]) == "kernel"
    k = read_kernel([iso, rel])
    assert (k[0].kind, k[0].pid, k[0].wall.utcoffset().total_seconds()) == ("oom-kill", 1440763, 7200)
    assert (k[1].kind, k[1].fatal, k[1].uptime, k[1].wall) == ("pcie-aer", False, None, None)  # relative: unplaced


def test_fleet_reads_each_nodes_bundle_and_counts_a_host_fault_under_its_cause(tmp_path):
    shutil.copytree(HOST / "xid79-nccl", tmp_path / "node1")
    shutil.copytree(HOST / "unrelated-xid", tmp_path / "node2")
    p = run_cli("fleet", str(tmp_path), "--format", "json")
    doc = json.loads(p.stdout)
    rows = {r["key"]: r for r in doc["leaderboard"]}
    assert doc["summary"]["files"] == 2  # the records are not logs of their own
    assert rows["host: Xid 79"]["logs"] == 1 and "drain the node" in json.dumps(rows["host: Xid 79"])
    assert rows["nccl-watchdog-collective-timeout"]["logs"] == 1  # node2's old Xids are not blamed


def test_a_fifo_beside_the_logs_is_never_opened_to_sniff_it(tmp_path):
    import os

    d = tmp_path / "node"
    shutil.copytree(HOST / "xid79-nccl", d)
    os.mkfifo(d / "pipe")
    from triage.pipeline.host.source import sniff_file

    assert sniff_file(str(d / "pipe")) is None  # returns at once: no writer would ever come
    p = run_cli("fleet", str(tmp_path), "--format", "json")
    assert p.returncode in (0, 1) and json.loads(p.stdout)["summary"]["files"] >= 1
