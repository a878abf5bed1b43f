"""Issue 32: every piece of advice checked against what the log shows (pipeline/fit.py), consequences
folded into their cause, redaction that leaves the catalogue's words alone, one grouping rule for
`analyze DIR` and `fleet`; and a report linter that holds the whole corpus to those rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from report_linter import violations

from triage.catalogue.flags import flag_index, flag_name
from triage.core.models import Report
from triage.pipeline.fit import NOT_APPLICABLE

# statuses under which a workaround is still put to the reader as something to do

SERVING_NCCL = """\
[2026-11-30 08:00:01] server_args=ServerArgs(model_path='/models/Llama-3.1-70B-Instruct', tp_size=8, mem_fraction_static=0.85, dist_timeout=None, enable_torch_compile=False, port=30000)
[2026-11-30 08:00:09 TP0] Load weight begin. avail mem=78.52 GB
[2026-11-30 08:01:41 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.95 GB, mem usage=17.57 GB.
[2026-11-30 08:02:20] The server is fired up and ready to roll!
[2026-11-30 13:41:02 TP0] Decode batch. #running-req: 40, #token: 81234, token usage: 0.23, gen throughput (token/s): 1450.12, #queue-req: 0
[rank3]:[E1130 13:51:07.928019586 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=81234, OpType=ALLREDUCE, NumelIn=1048576, NumelOut=1048576, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.
"""

CAPTURE_HINTS = """\
[2025-03-18 09:12:01] server_args=ServerArgs(model_path='/models/Qwen2.5-72B-Instruct', tp_size=2, mem_fraction_static=0.8, enable_torch_compile=False, disable_cuda_graph=False, cuda_graph_max_bs=160, port=30000)
[2025-03-18 09:13:42 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=14.70 GB
[2025-03-18 09:14:20 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 340, in capture
    ) = self.capture_one_batch_size(bs, forward)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 257, in __init__
    raise Exception(
Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.
Possible solutions:
1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)
2. set --cuda-graph-max-bs to a smaller value (e.g., 16)
3. disable torch compile by not using --enable-torch-compile
4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)
Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose
"""

UNKNOWN_SCHEDULER = """\
[2026-11-30 10:00:01] server_args=ServerArgs(model_path='/models/m', tp_size=1, port=30000)
[2026-11-30 10:05:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2410, in run_scheduler_process
    scheduler.event_loop_normal()
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 770, in event_loop_normal
    self.process_batch_result(batch, result)
ZeroDivisionError: integer division or modulo by zero
[2026-11-30 10:05:00] Received sigquit from a child process. It usually means the child failed.
"""

VLLM_WORKER_OOM = """\
INFO 11-30 09:41:05 [api_server.py:1395] vLLM API server version 0.9.1
INFO 11-30 09:41:05 [cli_args.py:325] non-default args: {'model': '/models/Qwen2.5-72B-Instruct', 'tensor_parallel_size': 4, 'gpu_memory_utilization': 0.95}
(VllmWorker rank=0 pid=2211) ERROR 11-30 09:42:31 [multiproc_executor.py:527] WorkerProc hit an exception.
(VllmWorker rank=0 pid=2211) ERROR 11-30 09:42:31 [multiproc_executor.py:527] Traceback (most recent call last):
(VllmWorker rank=0 pid=2211) ERROR 11-30 09:42:31 [multiproc_executor.py:527]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 205, in determine_available_memory
(VllmWorker rank=0 pid=2211) ERROR 11-30 09:42:31 [multiproc_executor.py:527]     self.model_runner.profile_run()
(VllmWorker rank=0 pid=2211) ERROR 11-30 09:42:31 [multiproc_executor.py:527] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 GiB is free.
ERROR 11-30 09:42:31 [core.py:515] EngineCore failed to start.
ERROR 11-30 09:42:31 [core.py:515] Traceback (most recent call last):
ERROR 11-30 09:42:31 [core.py:515]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/multiproc_executor.py", line 220, in collective_rpc
ERROR 11-30 09:42:31 [core.py:515]     raise RuntimeError(
ERROR 11-30 09:42:31 [core.py:515] RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.21 GiB is free.', please check the stack trace above for the root cause
Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 494, in _wait_for_engine_startup
    raise RuntimeError("Engine core initialization failed. "
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""

HEALTHY_LONG_REQUEST = """\
INFO 11-30 09:41:05 [api_server.py:1395] vLLM API server version 0.9.1
INFO 11-30 09:41:05 [cli_args.py:325] non-default args: {'model': '/models/m', 'max_model_len': 4096}
INFO 11-30 09:43:00 [launcher.py:36] Application startup complete.
ERROR 11-30 09:50:06 [serving_completion.py:116] ValueError: This model's maximum context length is 4096 tokens. However, you requested 8203 tokens (7691 in the messages, 512 in the completion). Please reduce the length of the messages or completion.
INFO:     10.0.0.7:51234 - "POST /v1/completions HTTP/1.1" 400 Bad Request
INFO 11-30 09:50:10 [loggers.py:118] Engine 000: Avg prompt throughput: 120.1 tokens/s, Avg generation throughput: 88.0 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.1%, Prefix cache hit rate: 0.0%
INFO:     10.0.0.7:51240 - "POST /v1/completions HTTP/1.1" 200 OK
"""


def _json(path: Path, *extra: str) -> tuple[int, dict]:
    p = run_cli("analyze", str(path), "--format", "json", *extra)
    return p.returncode, json.loads(p.stdout)


def _md(path: str) -> str:
    return run_cli("analyze", path).stdout.decode()


def _log(tmp_path: Path, text: str, name: str = "serve.log") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _all_workarounds(doc: dict) -> list[dict]:
    return [w for x in doc["findings"] for w in x["workarounds"]]


def _do_now(md: str) -> str:
    return next((ln for ln in md.splitlines() if ln.startswith("**Do now:**")), "")


# -- the cases of the issue, each through the command line --------------------------------------

def test_serving_nccl_timeout_is_not_told_to_raise_the_timeout(tmp_path):
    log = _log(tmp_path, SERVING_NCCL)
    _, doc = _json(log)
    assert doc["findings"][0]["signature"] == "nccl-watchdog-collective-timeout"
    w = next(w for w in _all_workarounds(doc) if w["id"] == "sglang-raise-dist-timeout")
    assert w["status"] == NOT_APPLICABLE and "serving" in w["note"]
    assert "--dist-timeout" not in _do_now(_md(str(log)))
    # an excerpt without start-up milestones: the load lines before the crash say it was serving
    excerpt = "\n".join(ln for ln in SERVING_NCCL.splitlines() if "Load weight" not in ln and "fired up" not in ln)
    _, doc = _json(_log(tmp_path, excerpt + "\n", "excerpt.log"))
    w = next(w for w in _all_workarounds(doc) if w["id"] == "sglang-raise-dist-timeout")
    assert w["status"] == NOT_APPLICABLE


def test_max_model_len_auto_is_not_offered_before_vllm_0_14():
    code, doc = _json(ROOT / "examples" / "vllm-kv-cache-too-small.log")
    assert doc["environment"]["version"] == "0.9.1"
    w = next(w for w in _all_workarounds(doc) if w["id"] == "vllm-max-model-len-auto")
    assert w["status"] == NOT_APPLICABLE and ">=0.14" in w["note"]
    assert "--max-model-len auto" not in _do_now(_md(str(ROOT / "examples" / "vllm-kv-cache-too-small.log")))


def test_engine_hints_are_checked_against_the_running_values(tmp_path):
    _, doc = _json(_log(tmp_path, CAPTURE_HINTS))
    hints = {w["action"].split(".", 1)[0]: w for w in doc["failures"][0]["hints"]}
    mem = hints["1"]  # "set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)" on a server at 0.8
    assert mem["flags"] == ["--mem-fraction-static 0.7"] and mem["status"] == "recommended"
    compile_hint = hints["3"]  # "disable torch compile" on a server where it is off
    assert compile_hint["status"] == "already-applied" and "enable_torch_compile=False" in compile_hint["note"]
    # the same words are printed by a CPU and a CUDA graph runner: not pinned on the first one listed
    assert "printed at line" in mem["note"] and "by sglang/srt/model_executor/cpu_graph_runner.py" not in mem["note"]
    for w in _all_workarounds(doc):
        if w["status"] == "recommended":
            assert "--mem-fraction-static 0.8" not in w["flags"]
    lower = next(w for w in _all_workarounds(doc) if w["id"] == "sglang-lower-mem-fraction-static")
    # 0.75 below the running 0.8: offered, never "already applied"
    assert lower["status"] == "recommended" and lower["flags"] == ["--mem-fraction-static 0.75"]
    md = _md(str(tmp_path / "serve.log"))
    assert "**Do now:** add `--mem-fraction-static 0.75`" in md
    assert "**Already applied:** without --enable-torch-compile" in md


def test_lower_value_is_never_already_applied_when_the_server_runs_higher(catalogue):
    from triage.core.models import Environment, Finding
    from triage.pipeline.recommend import _for_finding

    sig = next(s for s, spec in catalogue.signatures.items() if "sglang-lower-mem-fraction-static" in spec.spec.workarounds)
    x = Finding(signature=sig, title="t", confidence=0.9, severity="crash", engine="sglang")
    env = Environment(engine="sglang", settings={"mem_fraction_static": 0.8})
    recs = {r.id: r for r in _for_finding(x, catalogue, env, flag_index("sglang"), None)}
    low = recs["sglang-lower-mem-fraction-static"]
    assert low.flags == ["--mem-fraction-static 0.75"] and low.status == "recommended"


def test_unknown_scheduler_exception_is_not_told_to_scroll_up_to_itself(tmp_path):
    log = _log(tmp_path, UNKNOWN_SCHEDULER)
    _, doc = _json(log)
    w = next(w for w in _all_workarounds(doc) if w["id"] == "sglang-read-first-rank-error")
    assert w["status"] == NOT_APPLICABLE and "already shows (line 2, with failure 1)" in w["note"]
    assert "Scroll up" not in _do_now(_md(str(log)))


def test_vllm_worker_oom_is_one_failure_with_its_wrappers_folded_in(tmp_path):
    log = _log(tmp_path, VLLM_WORKER_OOM)
    _, doc = _json(log)
    assert len(doc["failures"]) == 1
    f = doc["failures"][0]
    assert "OutOfMemoryError" in f["exception"]
    assert any("Worker failed with error" in c["message"] for c in f["consequences"])
    assert doc["findings"][0]["signature"] == "torch-cuda-out-of-memory" and doc["findings"][0]["failure"] == 0
    md = _md(str(log))
    assert "(1 failure, known)" in md.splitlines()[0]
    # the many-log summary and the fleet board: one group, the OOM
    other = _log(tmp_path, VLLM_WORKER_OOM, "serve2.log")
    many = json.loads(run_cli("analyze", str(log), str(other), "--format", "json").stdout)
    assert [g["key"] for g in many["summary"]["groups"]] == ["torch-cuda-out-of-memory"]
    board = json.loads(run_cli("fleet", str(tmp_path), "--format", "json", "--jobs", "1").stdout)
    assert [r["key"] for r in board["leaderboard"]] == ["torch-cuda-out-of-memory"]


def test_catalogue_placeholders_and_ids_are_never_redacted(tmp_path, catalogue):
    text = catalogue.signatures["hub-gated-repo"].spec.examples.match[0]
    _, doc = _json(_log(tmp_path, text))
    w = next(w for w in _all_workarounds(doc) if w["id"] == "common-hf-token")
    assert w["env"] == ["HF_TOKEN=<your token>"]
    assert "HF_TOKEN=<your token>" in _md(str(tmp_path / "serve.log"))
    # a signature id shaped like a credential under a row's `key`
    fleet_dir = tmp_path / "fleet"
    fleet_dir.mkdir()
    _log(fleet_dir, catalogue.signatures["nccl-p2p-peer-access-unsupported"].spec.examples.match[0], "n1.log")
    board = json.loads(run_cli("fleet", str(fleet_dir), "--format", "json", "--jobs", "1").stdout)
    assert "nccl-p2p-peer-access-unsupported" in [r["key"] for r in board["leaderboard"]]
    assert "[REDACTED]" not in json.dumps([r["key"] for r in board["leaderboard"]])
    # a token in the log is still masked
    secret = "hf_" + "abcdEFGHijklMNOPqrstUVWXyz0123456789"
    _, doc = _json(_log(tmp_path, text + f"\nexport HF_TOKEN={secret}\n", "leak.log"))
    assert secret not in json.dumps(doc)


def test_healthy_server_gets_no_patched_command(tmp_path):
    code, doc = _json(_log(tmp_path, HEALTHY_LONG_REQUEST), "--command", "vllm serve /models/m --max-model-len 4096")
    assert code == 0 and doc["exit_code"] == 0
    assert doc["patched_command"] is None
    assert "Patched launch command" not in _md(str(tmp_path / "serve.log"))


def test_fleet_and_analyze_dir_file_each_log_under_the_same_group(tmp_path):
    from triage.commands.fleet.board import Tally
    from triage.commands.fleet.source import LogFile
    from triage.commands.fleet.worker import add_report
    from triage.commands.many import summarise

    logs = [ROOT / "tests" / "fixtures" / "sglang-chained-capture-k8s.log", _log(tmp_path, VLLM_WORKER_OOM),
            _log(tmp_path, UNKNOWN_SCHEDULER, "u.log"), _log(tmp_path, SERVING_NCCL, "n.log")]
    from triage.catalogue.load import load_catalogue
    from triage.pipeline.analyze import Options, analyze_file

    cat = load_catalogue()
    for log in logs:
        rep = analyze_file(str(log), cat, Options(workers=1))
        tally = Tally()
        add_report(tally, rep, LogFile(path=str(log), size=1, mtime=0.0, place="x"), None, None)
        assert set(tally.groups) == {g.key for g in summarise([rep]).groups}, log
    # the capture failure the shell then reports Killed: its cause, as `analyze` names it
    board = json.loads(run_cli("fleet", str(logs[0]), "--format", "json").stdout)
    assert [r["key"] for r in board["leaderboard"]] == ["sglang-torch-compile-stream-capturing"]


def test_already_applied_is_never_claimed_from_an_unresolved_value():
    _, doc = _json(ROOT / "examples" / "sglang-nsa-crash.log")
    assert doc["environment"]["settings"].get("kv_cache_dtype") == "auto"
    for w in _all_workarounds(doc):
        if "--kv-cache-dtype" in [flag_name(f) for f in w["flags"] + w["remove_flags"]]:
            assert w["status"] != "already-applied"


# -- the report linter (tests/report_linter.py): every bundled log in tests/test_golden.py, ----------
# -- and the cases of this file here ----------------------------------------------------------------

@pytest.mark.parametrize("text", [SERVING_NCCL, CAPTURE_HINTS, VLLM_WORKER_OOM, HEALTHY_LONG_REQUEST])
def test_linter_holds_on_the_cases_of_this_file(tmp_path, catalogue, text):
    from triage.pipeline.analyze import Options, analyze_file
    from triage.pipeline.redact import redact_report

    rep = analyze_file(str(_log(tmp_path, text)), catalogue, Options(workers=1))
    assert violations(rep, redact_report(rep), catalogue) == []


def test_catalogue_check_reads_the_new_fields(tmp_path):
    from pydantic import ValidationError

    from triage.catalogue.models import WorkaroundSpec
    from triage.commands.catalogue.check import _fit_problems

    base = {"id": "x-y", "engine": "vllm", "title": "A title", "flags": {"add": ["--max-model-len auto"]},
            "cost": "ten characters at least", "auto": True}
    with pytest.raises(ValidationError):
        WorkaroundSpec.model_validate({**base, "phases": ["booting"]})
    with pytest.raises(ValidationError):
        WorkaroundSpec.model_validate({**base, "versions": "new enough"})
    with pytest.raises(ValidationError):
        WorkaroundSpec.model_validate({**base, "points_at": "(unclosed"})

    class Cat:  # the two attributes _fit_problems reads
        workarounds = {"a-b": WorkaroundSpec.model_validate({**base, "id": "a-b", "engine": "docker", "flags": {},
                                                            "env": {"X": "1"}, "versions": ">=1"}),
                       "c-d": WorkaroundSpec.model_validate({**base, "id": "c-d", "phases": ["serving", "serving"]})}
        workaround_paths = {"a-b": "a.yaml", "c-d": "c.yaml"}

    problems = _fit_problems(Cat())  # type: ignore[arg-type]
    assert [p for p, _ in problems] == ["a.yaml", "c.yaml"]


def test_an_engine_hint_naming_two_flags_takes_each_flags_own_examples():
    from triage.core.models import Environment, Failure, Workaround
    from triage.pipeline.fit import judge

    text = ("2. if it is an OOM problem, set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7) "
            "or set --cuda-graph-max-bs-prefill to a smaller value (e.g., 2048)")
    env = Environment(engine="sglang", settings={"mem_fraction_static": 0.8, "cuda_graph_max_bs_prefill": 2048})
    rep = Report(source="x", environment=env, failures=[Failure(kind="traceback", exception="E", line=1)])
    h = Workaround(id="engine-hint-1", title="t", source="engine-hint", action=text,
                   flags=["--mem-fraction-static 0.8", "--cuda-graph-max-bs-prefill 2048"])
    judge(h, None, rep, rep.failures[0], flag_index("sglang"))
    # 0.7 for the fraction; the prefill bound has no example below 2048: the hint does not fit
    assert h.flags[0] == "--mem-fraction-static 0.7"
    assert h.status == NOT_APPLICABLE and "cuda_graph_max_bs_prefill" in (h.note or "")


def test_nccl_timeout_at_start_up_still_gets_the_longer_timeout(tmp_path):
    """The phase rule must not overreach: SeqNum=2 right after the weights loaded on one node is a
    slow rank, for which SGLang's maintainers advise --dist-timeout 3600."""
    log = "\n".join([
        SERVING_NCCL.splitlines()[0], SERVING_NCCL.splitlines()[1],
        "[rank1]:[E1130 08:11:38.928019586 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600049 "
        "milliseconds before timing out.", ""])
    path = _log(tmp_path, log)
    _, doc = _json(path)
    w = next(w for w in _all_workarounds(doc) if w["id"] == "sglang-raise-dist-timeout")
    assert w["status"] == "recommended"
    assert "--dist-timeout 3600" in _do_now(_md(str(path)))


def test_a_release_range_is_checked_against_the_releases_the_traceback_line_allows(tmp_path):
    # the example with its version lines gone and the frame at the line vLLM 0.9.1-0.9.2 raise
    # the KV-cache check from (vllm/v1/core/kv_cache_utils.py:572): `--max-model-len auto`
    # (0.14 on) is still not offered, and the report says why it believes the release
    text = (ROOT / "examples" / "vllm-kv-cache-too-small.log").read_text()
    text = "\n".join(ln for ln in text.splitlines() if "API server version" not in ln) + "\n"
    text = text.replace(" (v0.9.1)", "").replace("line 527, in check_enough", "line 572, in check_enough")
    log = _log(tmp_path, text)
    _, doc = _json(log)
    env = doc["environment"]
    assert (env["version"], env["versions_by_line"], env["versions_basis"]) == (
        None, "0.9.1-0.9.2", "vllm/v1/core/kv_cache_utils.py:572")
    w = next(w for w in _all_workarounds(doc) if w["id"] == "vllm-max-model-len-auto")
    assert w["status"] == NOT_APPLICABLE
    assert "needs vllm >=0.14; the traceback's line numbers place this server at vllm 0.9.1-0.9.2" in w["note"]
    md = _md(str(log))
    assert "| engine | vllm 0.9.1-0.9.2 by its traceback (no version printed" in md
    assert "--max-model-len auto" not in _do_now(md)
    # the same log at a line no release has: nothing is inferred, nothing claimed
    _, doc = _json(_log(tmp_path, text.replace("line 572,", "line 9999,"), "other.log"))
    assert doc["environment"]["versions_by_line"] is None
