"""Failure detection from the shape of the text, one test per shape, each through the CLI's JSON.

Every fixture under fixtures/shapes/ is an excerpt exactly as posted in the public thread named
beside its test (all from the corpus's dev split). The paste-artifact tests take one of those
excerpts and add what pasting it into an issue, a chat or a ticket adds.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from triage.cli import app

SHAPES = Path(__file__).parent / "fixtures" / "shapes"
runner = CliRunner()


def analyze(path: Path) -> tuple[int, dict]:
    res = runner.invoke(app, ["analyze", str(path), "--format", "json"])
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, json.loads(res.stdout)


def analyze_text(tmp_path: Path, text: str, name: str = "paste.log") -> tuple[int, dict]:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8"))
    return analyze(p)


def first(doc: dict) -> dict:
    assert doc["failures"], "no failure found"
    return doc["failures"][0]


# -- a bare exception line, no traceback around it ------------------------------------------------

def test_bare_exception_in_repr_form():
    # https://github.com/vllm-project/vllm/issues/9290: `OutOfMemoryError('CUDA out of memory ...')`
    code, doc = analyze(SHAPES / "bare-exception-repr.log")
    assert code == 1
    assert any(f["exception"] == "OutOfMemoryError" for f in doc["failures"])


def test_bare_exception_line_alone(tmp_path):
    # the last line of https://github.com/sgl-project/sglang/pull/12031's paste, alone
    line = (SHAPES / "quoted-ci-timestamps.log").read_text().splitlines()[6]
    code, doc = analyze_text(tmp_path, line + "\n")
    assert code == 1
    assert first(doc)["exception"] == "KeyError"
    assert "lm_head.weight" in first(doc)["message"]


def test_exception_named_inside_an_error_line(tmp_path):
    # https://github.com/triton-inference-server/server/issues/6578 (glog E-level line)
    text = ("E1115 02:58:51.162611 1 backend_model.cc:634] ERROR: Failed to create instance: "
            "TypeError: 'NoneType' object is not subscriptable\n")
    code, doc = analyze_text(tmp_path, text)
    assert code == 1 and first(doc)["exception"] == "TypeError"


# -- traceback fragments behind a worker prefix, no header, no final line -----------------------

@pytest.mark.parametrize("name, thread", [
    ("ray-worker-headless.log", "https://github.com/vllm-project/vllm/issues/4618"),
    ("vllmworker-headless.log", "https://github.com/vllm-project/vllm/issues/19906"),
    ("worker-tp-headless.log", "https://github.com/vllm-project/vllm/issues/26297"),
    ("enginecore-headless.log", "https://github.com/vllm-project/vllm/issues/27508"),
])
def test_headless_fragment_behind_worker_prefix(name, thread):
    code, doc = analyze(SHAPES / name)
    assert code == 1, thread
    f = first(doc)
    assert f["kind"] == "traceback"
    assert f["exception"] == "(traceback cut off)"
    assert f["frames"], "the innermost frame must be reported"
    assert doc["environment"]["engine"] == "vllm"


def test_faulthandler_fragment():
    # https://github.com/sgl-project/sglang/issues/3906: the paste starts inside faulthandler's dump
    code, doc = analyze(SHAPES / "faulthandler-fragment.log")
    assert code == 1
    f = first(doc)
    assert f["exception"] == "Fatal Python error"
    assert any("scheduler.py" in fr["file"] for fr in f["frames"])


# -- engine error lines that are not Python ------------------------------------------------------

def test_tensorrt_error_code_lines():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/1077: [TRT] [E] ... Error Code 9 / [TRT-LLM] [E]
    code, doc = analyze(SHAPES / "trt-error-code.log")
    assert code == 1
    assert first(doc)["kind"] == "engine-error"
    assert "Error Code 9" in first(doc)["message"]
    assert doc["environment"]["engine"] == "trtllm"


def test_turbomind_error_inside_cxx_abort():
    # https://github.com/InternLM/lmdeploy/issues/1813: what():  [TM][ERROR] CUDA runtime error
    code, doc = analyze(SHAPES / "turbomind-what.log")
    assert code == 1
    assert any("illegal memory access" in f["message"] for f in doc["failures"])
    assert doc["environment"]["engine"] == "lmdeploy"


def test_cxx_assertion_failed(tmp_path):
    # https://github.com/NVIDIA/TensorRT-LLM/issues/1826
    text = ("[TensorRT-LLM][ERROR] Assertion failed: Failed: MPI error /home/jenkins/agent/workspace/LLM/main/"
            "L0_PostMerge/tensorrt_llm/cpp/tensorrt_llm/common/mpiUtils.cpp:211 '6'\n")
    code, doc = analyze_text(tmp_path, text)
    assert code == 1 and "Assertion failed" in first(doc)["message"]


# -- failures announced inside a sentence --------------------------------------------------------

def test_exception_in_worker_sentence():
    # https://github.com/vllm-project/vllm/issues/12189: "Exception in worker ... while processing method"
    code, doc = analyze(SHAPES / "exception-in-worker.log")
    assert code == 1
    assert "init_device" in json.dumps(doc["failures"][0])


def test_future_exception_sentence():
    # https://github.com/vllm-project/vllm/issues/8016: future: <Future finished exception=AssertionError(...)>
    code, doc = analyze(SHAPES / "future-exception.log")
    assert code == 1
    assert "AssertionError" in {f["exception"] for f in doc["failures"]}


def test_with_exception_sentence(tmp_path):
    # the sentence form: "... failed for request X with exception ValueError(...)"
    text = ("ERROR 03-02 10:11:12 [async_llm.py:420] Request chatcmpl-7f failed for request chatcmpl-7f "
            "with exception ValueError('prompt is too long')\n")
    code, doc = analyze_text(tmp_path, text)
    assert first(doc)["exception"] == "ValueError"


# -- text mangled by the paste -------------------------------------------------------------------

def test_stray_backtick_glued_to_first_line():
    # https://github.com/vllm-project/vllm/issues/19070: the code fence is glued to the first line
    code, doc = analyze(SHAPES / "stray-backtick.log")
    assert code == 1
    assert first(doc)["line"] == 1  # the announcing line keeps its number
    assert any("DeadError" in f["exception"] for f in doc["failures"])


def test_quote_prefix_and_ci_timestamps():
    # https://github.com/sgl-project/sglang/pull/12031: `> [2025-11-06T02:10:00.702Z]   File ...`
    code, doc = analyze(SHAPES / "quoted-ci-timestamps.log")
    assert code == 1
    assert first(doc)["exception"] == "KeyError"


def test_crlf_and_python_logging_prefix():
    # https://github.com/vllm-project/vllm/issues/11366: CRLF endings, `2024-12-19 21:40:35 ERROR 56542 [x.py:64]`
    code, doc = analyze(SHAPES / "crlf-pylog.log")
    assert code == 1
    assert first(doc)["exception"] == "RuntimeError"


def test_box_drawing_gutter():
    # https://github.com/vllm-project/vllm/issues/6976: a rich console's `│ ` gutter
    code, doc = analyze(SHAPES / "box-gutter.log")
    assert code == 1 and first(doc)["exception"] == "RuntimeError"


def _excerpt() -> str:
    # https://github.com/vllm-project/vllm/issues/9290 (the repr line is the failure)
    return (SHAPES / "bare-exception-repr.log").read_text()


def test_markdown_bold_details_tags_ansi_and_tabs(tmp_path):
    text = _excerpt().splitlines()
    mangled = ["<details><summary>full log</summary>", ""]
    mangled += [f"**{text[0]}**", *("\t" + ln if ln.startswith("  ") else ln for ln in text[1:])]
    mangled += ["</details>"]
    mangled[2] = "\x1b[31m" + mangled[2] + "\x1b[0m"
    code, doc = analyze_text(tmp_path, "\r\n".join(mangled) + "\r\n")
    assert code == 1
    assert any(f["exception"] == "OutOfMemoryError" for f in doc["failures"])


def test_hard_wrapped_lines_rejoined(tmp_path):
    # https://github.com/vllm-project/vllm/issues/4618, wrapped at 100 columns the way a ticket
    # system does it, frames cut mid-path
    text = (SHAPES / "ray-worker-headless.log").read_text()
    wrapped = "\n".join(part for ln in text.splitlines() for part in textwrap.wrap(
        ln, 100, break_long_words=True, break_on_hyphens=False, drop_whitespace=False) or [""]) + "\n"
    assert max(len(x) for x in wrapped.splitlines()) == 100
    code, doc = analyze_text(tmp_path, wrapped)
    assert code == 1
    f = first(doc)
    assert any(fr["file"].endswith("custom_all_reduce.py") for fr in f["frames"])
    assert f["line"] == 1


# -- severity: request-level errors the server survived ------------------------------------------

SERVING = "INFO:     10.0.0.7:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n"


def test_request_error_then_serving_exits_zero(tmp_path):
    # a jinja2 template error for one request (the shape of vllm-project/vllm#15018's 400s),
    # followed by requests answered 200: the server survived it
    text = ("INFO 03-18 10:00:00 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000\n"
            "INFO:     Application startup complete.\n"
            "ERROR 03-18 10:00:05 [serving_chat.py:200] Error in preprocessing prompt inputs\n"
            "ERROR 03-18 10:00:05 [serving_chat.py:200] Traceback (most recent call last):\n"
            'ERROR 03-18 10:00:05 [serving_chat.py:200]   File "/usr/lib/python3/site-packages/vllm/entrypoints/'
            'openai/serving_chat.py", line 183, in create_chat_completion\n'
            "ERROR 03-18 10:00:05 [serving_chat.py:200]     request_prompts, engine_prompts = await self._preprocess_chat(\n"
            "ERROR 03-18 10:00:05 [serving_chat.py:200] jinja2.exceptions.TemplateError: Conversation roles must "
            "alternate user/assistant/user/assistant/...\n"
            "INFO:     10.0.0.7:51230 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request\n"
            + SERVING * 3)
    code, doc = analyze_text(tmp_path, text)
    assert code == 0
    assert doc["failures"] and not doc["failures"][0]["fatal"]
    assert "serving" in doc["failures"][0]["severity_reason"]


def test_process_failure_is_failure_one(tmp_path):
    # request errors first, then the crash that ended the process: the crash is failure 1
    survived = ("ERROR 03-18 10:00:05 [serving_chat.py:200] Error in chat completion stream generator.\n"
                "ERROR 03-18 10:00:05 [serving_chat.py:200] ValueError: bad request\n" + SERVING * 2)
    crash = (SHAPES / "enginecore-headless.log").read_text()
    code, doc = analyze_text(tmp_path, "INFO:     Application startup complete.\n" + survived + crash)
    assert code == 1
    assert doc["failures"][0]["fatal"]
    assert doc["failures"][0]["line"] > 3
    assert any(not f["fatal"] for f in doc["failures"])


# -- precision: one vllm frame does not make an SGLang log a vLLM log ------------------------------

def test_sglang_traceback_through_a_vllm_frame(tmp_path):
    # SGLang imports vLLM kernels in some releases (https://github.com/sgl-project/sglang/issues/2460)
    text = (
        "[2025-02-10 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process\n'
        "    scheduler.event_loop_overlap()\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 780, in forward_decode\n'
        "    return self.model.forward(\n"
        '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/activation.py", line 31, in forward\n'
        "    out = torch.empty(output_shape, dtype=x.dtype, device=x.device)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 1.02 GiB is free.\n")
    code, doc = analyze_text(tmp_path, text)
    assert doc["environment"]["engine"] == "sglang"
    top = doc["findings"][0]
    assert top["signature"] == "torch-cuda-out-of-memory", [f["signature"] for f in doc["findings"]]
    assert all(f["incomplete"] for f in doc["findings"] if f["signature"].startswith("vllm-"))


def test_launch_line_cut_mid_quote_is_normal_input(tmp_path):
    # a log cut inside the launch command leaves an unbalanced quote: the patched command is
    # still built from it (this raised "No closing quotation" before)
    log = Path(__file__).resolve().parents[1] / "examples" / "sglang-nsa-crash.log"
    cut = 'python -m sglang.launch_server --model-path "deepseek-ai/DeepSeek-V3.2-Exp --tp 8\n'
    code, doc = analyze_text(tmp_path, cut + log.read_text())
    assert code == 1
    assert doc["patched_command"] and "--disable-radix-cache" in doc["patched_command"]


def test_the_error_that_killed_the_engine_is_failure_one():
    # https://github.com/vllm-project/vllm/issues/4070: EngineCore prints the cause (a ValueError
    # about a request), then the API server prints EngineDeadError: the cause is process-level
    code, doc = analyze(SHAPES / "enginecore-cause-then-dead.log")
    assert code == 1
    f = first(doc)
    assert f["exception"] == "ValueError" and f["fatal"]
    assert "engine died" in f["severity_reason"] or "before the server was ready" in f["severity_reason"]


def test_chained_traceback_cut_in_its_last_part_keeps_those_frames():
    # https://github.com/sgl-project/sglang/issues/5389: a CalledProcessError, then "During
    # handling ..." a second traceback through cuda_graph_runner.py that the paste cuts off
    code, doc = analyze(SHAPES / "chain-cut-in-second-part.log")
    f = first(doc)
    assert f["exception"].endswith("CalledProcessError")
    assert any("cuda_graph_runner.py" in fr["file"] for fr in f["frames"])
    assert doc["findings"][0]["signature"] == "sglang-cuda-graph-capture-failed"
