"""`analyze --format issue`: the failure as the body of an upstream bug report, in the sections of
the engine's template, with the traceback folded, what triage found and what was tried, and the
threads that may be the same; log text only in code, so nothing in it pings or links."""

from __future__ import annotations

from conftest import FIXTURES, run_cli

EXAMPLES = FIXTURES.parent.parent / "examples"

UNKNOWN_VLLM = """\
INFO 06-24 10:01:12 [api_server.py:1043] vLLM API server version 0.9.1
INFO 06-24 10:01:12 [cli_args.py:325] non-default args: {'model': 'org/model-x', 'tensor_parallel_size': 2}
(VllmWorker rank=0 pid=8811) ERROR 06-24 10:15:03 [multiproc_executor.py:527] WorkerProc hit an exception.
(VllmWorker rank=0 pid=8811) ERROR 06-24 10:15:03 [multiproc_executor.py:527] Traceback (most recent call last):
(VllmWorker rank=0 pid=8811) ERROR 06-24 10:15:03 [multiproc_executor.py:527]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 1425, in execute_model
(VllmWorker rank=0 pid=8811) ERROR 06-24 10:15:03 [multiproc_executor.py:527]     self._frobnicate(batch)
(VllmWorker rank=0 pid=8811) ERROR 06-24 10:15:03 [multiproc_executor.py:527] ValueError: frobnication of @octocat failed, see https://example.com/x
ERROR 06-24 10:15:03 [core.py:586] EngineCore encountered a fatal error.
"""


def _issue(path) -> str:
    p = run_cli("analyze", str(path), "--format", "issue")
    assert p.returncode == 1, p.stderr
    return p.stdout.decode()


def test_a_known_sglang_bug_follows_sglangs_template():
    body = _issue(EXAMPLES / "sglang-nsa-crash.log")
    assert body.startswith("<!-- Title: [Bug] AttributeError: 'PrefillMetadata' object has no attribute")
    heads = [ln for ln in body.splitlines() if ln.startswith("### ")]
    assert heads == ["### Checklist", "### Describe the bug", "### Reproduction", "### Environment"]
    assert "<details>" in body and "AttributeError: 'PrefillMetadata'" in body.split("<details>")[1]
    assert "`sglang-nsa-page-table-1-flattened`" in body
    assert "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3.2-Exp" in body
    assert "Possibly the same as:" in body and "https://github.com/sgl-project/sglang/issues/14691" in body
    assert "Not tried yet: --disable-radix-cache" in body


def test_an_unknown_vllm_failure_follows_vllms_template_and_pings_nobody(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(UNKNOWN_VLLM)
    body = _issue(log)
    assert body.startswith("<!-- Title: [Bug]: ValueError: frobnication of @octocat")
    heads = [ln for ln in body.splitlines() if ln.startswith("### ")]
    assert heads == ["### Your current environment", "### 🐛 Describe the bug"]
    assert "No known failure matches." in body or "Only a generic wrapper matched" in body
    # the message's @mention and URL appear only inside code (a fenced block or a code span)
    outside = []
    fenced = False
    for ln in body.splitlines():
        if ln.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and not ln.startswith("<!--"):
            outside.append(ln.replace("`@octocat`", "").replace("`https://example.com/x`", ""))
    assert "@octocat" not in "\n".join(outside) and "https://example.com/x" not in "\n".join(outside)
    assert "vllm serve" in body and "(From the server log. The full environment: `python collect_env.py`.)" in body


def test_issue_describes_one_log():
    p = run_cli("analyze", str(EXAMPLES / "sglang-nsa-crash.log"), str(EXAMPLES / "vllm-kv-cache-too-small.log"),
                "--format", "issue")
    assert p.returncode == 2 and "single LOG" in p.stderr.decode()
    p = run_cli("fleet", str(EXAMPLES), "--format", "issue")
    assert p.returncode == 2
