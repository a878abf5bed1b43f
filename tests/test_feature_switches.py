"""The feature map: turning off the optional feature a failing stack runs through.

Each real-stack case is an excerpt of a public thread (the URL beside it), kept verbatim in
tests/fixtures/features/ (trimmed to the failure). The map itself (triage/catalogue/data/features)
is checked here the way `triage catalogue check` checks it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli

from triage.catalogue.features import FeatureSpec, feature_map, load_feature_file
from triage.catalogue.flags import flag_index
from triage.catalogue.load import load_catalogue
from triage.commands.catalogue.check import _switch_flag_problem, feature_problems
from triage.commands.retry.models import Launch
from triage.commands.retry.plan import Plan
from triage.core.errors import CatalogueError
from triage.pipeline.analyze import Options, analyze_text
from triage.pipeline.switches import feature_state

FIX = Path(__file__).parent / "fixtures" / "features"


@pytest.fixture(scope="module")
def cat():  # noqa: ANN201
    return load_catalogue()


def report(cat, name: str, version: str | None = None, extra: str = ""):  # noqa: ANN001, ANN201
    text = extra + (FIX / name).read_text(encoding="utf-8")
    return analyze_text(text, cat, name=name, options=Options(version=version))


def fatal(r):  # noqa: ANN001, ANN201
    [f] = [f for f in r.failures if f.fatal and f.features] or [None]
    assert f is not None, [(x.exception, x.fatal, [fr.file for fr in x.frames]) for x in r.failures]
    return f


# (fixture, thread, feature, the switch's flags/env, a fragment of the implicating frame or line)
REAL = [
    ("sglang-1117.log", "https://github.com/sgl-project/sglang/issues/1117", "sglang-cuda-graph",
     ["--disable-cuda-graph"], "cuda_graph_runner.py"),
    ("sglang-3906.log", "https://github.com/sgl-project/sglang/issues/3906", "sglang-overlap-schedule",
     ["--disable-overlap-schedule"], "tp_worker_overlap_thread.py:171 in resolve_batch_result"),
    ("sglang-23391.log", "https://github.com/sgl-project/sglang/pull/23391", "sglang-radix-cache",
     ["--disable-radix-cache"], "unified_radix_cache.py:892 in _cascade_evict"),
    ("sglang-33660.log", "https://github.com/sgl-project/sglang/issues/33660", "sglang-speculative",
     ["--speculative-algorithm"], "speculative/eagle_worker_v2.py"),
    ("sglang-transformerlab-api-381.log", "https://github.com/transformerlab/transformerlab-api/pull/381",
     "sglang-flashinfer-attention", ["--attention-backend triton"], "flashinfer/jit/"),
    ("vllm-3053.log", "https://github.com/vllm-project/vllm/issues/3053", "vllm-cuda-graph",
     ["--enforce-eager"], "vllm/worker/model_runner.py:782 in capture"),
    ("vllm-19186.log", "https://github.com/vllm-project/vllm/issues/19186", "vllm-torch-compile",
     ["--enforce-eager"], "vllm/compilation/backends.py:681"),
    ("vllm-41863.log", "https://github.com/vllm-project/vllm/pull/41863", "vllm-kv-connector",
     ["--kv-transfer-config"], "kv_transfer/kv_connector/utils.py:442"),
    ("vllm-4618.log", "https://github.com/vllm-project/vllm/issues/4618", "vllm-custom-all-reduce",
     ["--disable-custom-all-reduce"], "custom_all_reduce.py"),
    ("vllm-8189.log", "https://github.com/vllm-project/vllm/issues/8189", "vllm-flash-attn",
     ["--attention-backend FLASHINFER"], "vllm_flash_attn/flash_attn_interface.py:230"),
    ("vllm-8189.log", "https://github.com/vllm-project/vllm/issues/8189", "vllm-flashinfer-attention",
     ["--attention-backend FLASH_ATTN"], "attention/backends/flashinfer.py:1115 in forward"),
    ("vllm-17904.log", "https://github.com/vllm-project/vllm/issues/17904", "vllm-multi-step",
     ["--num-scheduler-steps"], "multi_step_model_runner.py:508 in execute_model"),
    ("vllm-9369.log", "https://github.com/vllm-project/vllm/issues/9369", "nccl-nvls",
     ["NCCL_NVLS_ENABLE=0"], "transport/nvls.cc:246 NCCL WARN"),
    ("nccl-1838.log", "https://github.com/NVIDIA/nccl/issues/1838", "nccl-shm",
     ["NCCL_SHM_DISABLE=1"], "transport/shm.cc:590"),
    ("nccl-1838.log", "https://github.com/NVIDIA/nccl/issues/1838", "nccl-cumem-host",
     ["NCCL_CUMEM_HOST_ENABLE=0"], "transport/shm.cc:590"),
]


@pytest.mark.parametrize(("name", "thread", "feature", "change", "where"), REAL,
                         ids=[f"{r[2]}" for r in REAL])
def test_a_real_stack_through_a_feature_offers_its_switch(cat, name, thread, feature, change, where):
    """The thread's stack runs through the feature: turning it off is offered, with the frame
    (or NCCL's line) that implicates it, and marked as derived."""
    f = fatal(report(cat, name))
    [row] = [x for x in f.features if x.feature == feature]
    assert row.state == "unconfirmed" and "could not confirm it is on" in row.reason  # no config printed
    [w] = [w for w in f.switches if w.feature == feature]
    assert w.source == "feature-switch" and w.frame is not None and where in w.frame, (thread, w.frame)
    assert change == [*w.flags, *w.remove_flags, *w.env] or set(change) <= {*w.flags, *w.remove_flags, *w.env}
    assert w.cost and ("derived from the stack" in (w.note or "") or "derived from the failure's own line" in (w.note or ""))


def test_fifteen_features_are_covered_by_real_stacks():
    assert len({r[2] for r in REAL}) >= 15


def test_innermost_feature_first(cat):
    """vllm#8189: FlashInfer's backend calls vLLM's FlashAttention kernel for prefill; the kernel's
    frame is the innermost, so FlashAttention is the first feature named."""
    f = fatal(report(cat, "vllm-8189.log"))
    assert [x.feature for x in f.features][:2] == ["vllm-flash-attn", "vllm-flashinfer-attention"]


def test_a_loop_frame_counts_only_where_the_exception_was_raised(cat):
    """sglang#33660: the scheduler's event_loop_overlap runs the batch that failed inside
    speculative decoding; the loop is not the cause and the overlap scheduler is not offered."""
    f = fatal(report(cat, "sglang-33660.log"))
    assert "sglang-overlap-schedule" not in [x.feature for x in f.features]


# vllm#3688's printed launch arguments (vLLM 0.3.x): the server ran with enforce_eager=True
NAMESPACE_3688 = (
    "INFO 03-28 21:38:07 api_server.py:148] args: Namespace(host=None, port=8000, model='/TinyLlama-1.1B-Chat-v0.6', "
    "tokenizer=None, dtype='half', kv_cache_dtype='auto', max_model_len=None, worker_use_ray=False, "
    "pipeline_parallel_size=1, tensor_parallel_size=2, block_size=16, enable_prefix_caching=False, "
    "gpu_memory_utilization=0.9, max_num_seqs=256, quantization=None, enforce_eager=True, "
    "max_context_len_to_capture=8192, disable_custom_all_reduce=False, tokenizer_pool_size=0)\n")


def test_a_feature_already_off_is_said_and_not_offered(cat):
    """The vllm#3053 capture stack under the launch arguments vllm#3688 printed (enforce_eager=True,
    from https://github.com/vllm-project/vllm/issues/3688): CUDA graphs are already off by the
    printed configuration, so --enforce-eager is listed as already off, not offered again."""
    r = report(cat, "vllm-3053.log", extra=NAMESPACE_3688)
    assert r.environment.settings.get("enforce_eager") in (True, "True")
    f = fatal(r)
    [row] = [x for x in f.features if x.feature == "vllm-cuda-graph"]
    assert row.state == "off" and "enforce_eager=True" in row.reason and "not offered" in row.reason
    assert not [w for w in f.switches if w.feature == "vllm-cuda-graph"]
    assert not any("--enforce-eager" in w.flags and w.source == "feature-switch"
                   for x in r.findings for w in x.workarounds)


def test_a_printed_setting_confirms_the_feature_is_on(cat):
    """vllm#3688's own arguments: disable_custom_all_reduce=False, so the custom all-reduce of the
    vllm#4618 stack is confirmed on rather than assumed."""
    f = fatal(report(cat, "vllm-4618.log", extra=NAMESPACE_3688))
    [row] = [x for x in f.features if x.feature == "vllm-custom-all-reduce"]
    assert row.state == "on" and row.reason == "disable_custom_all_reduce=False"


def test_the_switch_is_spelled_for_the_logs_release(cat):
    """SGLang's FlashInfer attention was turned off with --disable-flashinfer up to 0.3.0 and with
    --attention-backend triton from 0.3.1 (flags/sglang.json: --disable-flashinfer 0.1.18-0.4.1,
    --attention-backend from 0.3.1). transformerlab-api#381's stack, at either release."""
    old = fatal(report(cat, "sglang-transformerlab-api-381.log", version="0.2.15"))
    new = fatal(report(cat, "sglang-transformerlab-api-381.log", version="0.4.6"))
    [w_old] = [w for w in old.switches if w.feature == "sglang-flashinfer-attention"]
    [w_new] = [w for w in new.switches if w.feature == "sglang-flashinfer-attention"]
    assert w_old.flags == ["--disable-flashinfer"] and w_new.flags == ["--attention-backend triton"]
    unknown = fatal(report(cat, "sglang-transformerlab-api-381.log"))
    [w] = [w for w in unknown.switches if w.feature == "sglang-flashinfer-attention"]
    assert w.flags == ["--attention-backend triton"]
    assert "the log does not print the engine version (older releases >=0.1.18,<0.3.1: add --disable-flashinfer)" in (w.note or "")
    # vLLM moved the backend choice from an environment variable to a flag in 0.14.0 (envs.py reads
    # VLLM_ATTENTION_BACKEND up to 0.14.1; --attention-backend from 0.14.0): vllm#8189's stack
    v0 = fatal(report(cat, "vllm-8189.log", version="0.6.0"))
    [w] = [w for w in v0.switches if w.feature == "vllm-flashinfer-attention"]
    assert w.env == ["VLLM_ATTENTION_BACKEND=FLASH_ATTN"] and not w.flags


def test_a_switch_the_release_does_not_have_is_not_offered(cat):
    """vllm#17904's multi-step stack, at a release without multi-step scheduling
    (--num-scheduler-steps was removed in 0.11.0): listed with the reason, not offered."""
    f = fatal(report(cat, "vllm-17904.log", version="0.11.0"))
    [row] = [x for x in f.features if x.feature == "vllm-multi-step"]
    assert row.state == "no-switch" and "0.11.0" in row.reason
    assert not f.switches


def test_a_stack_through_no_optional_feature_gets_nothing(cat):
    """vllm#5244 (https://github.com/vllm-project/vllm/issues/5244): a model that needs
    --trust-remote-code; the stack runs through vLLM's config loading and transformers, no optional
    feature: no feature, no switch, nothing invented."""
    r = report(cat, "vllm-5244.log")
    assert r.fatal_failures and all(not f.features and not f.switches for f in r.failures)
    assert not any(w.source == "feature-switch" for x in r.findings for w in x.workarounds)


def test_derived_switches_rank_below_a_specific_signature_and_above_a_generic_one(cat):
    # nccl#1838: a specific NCCL signature explains it; its catalogue workarounds come first
    r = report(cat, "nccl-1838.log")
    specific = [x for x in r.findings if not x.generic and x.failure is not None]
    assert specific
    for x in specific:
        sources = [w.source for w in x.workarounds]
        if "feature-switch" in sources:
            first = sources.index("feature-switch")
            assert "catalogue" not in sources[first:], sources
    # sglang#9832: only the generic "Capture cuda graph failed" matches; the stack's switch leads
    r = report(cat, "sglang-9832.log")
    top = r.findings[0]
    assert top.generic
    assert top.workarounds[0].flags == ["--disable-cuda-graph"]
    assert "the failing stack runs through it" in (top.workarounds[0].note or "")


def test_the_json_report_carries_the_source_and_the_frame(tmp_path):
    p = run_cli("analyze", str(FIX / "vllm-17904.log"), "--format", "json")
    doc = json.loads(p.stdout)
    [f] = [f for f in doc["reports"][0]["failures"] if f["switches"]]
    [w] = f["switches"]
    assert w["source"] == "feature-switch" and w["feature"] == "vllm-multi-step"
    assert w["frame"].endswith("multi_step_model_runner.py:508 in execute_model")
    assert f["features"][0]["state"] == "unconfirmed"


def test_the_markdown_report_offers_the_switch_for_an_unknown_failure(cat):
    p = run_cli("analyze", str(FIX / "vllm-17904.log"))
    out = p.stdout.decode()
    assert "**Do now:** remove `--num-scheduler-steps`. Derived from the stack" in out
    assert "Optional features on this stack" in out and "multi-step scheduling" in out


def test_run_retry_applies_a_derived_switch_and_says_so(cat):
    """An unknown failure (vllm#17904) whose stack runs through multi-step scheduling: the plan
    removes --num-scheduler-steps, marked as derived from the stack."""
    r = report(cat, "vllm-17904.log")
    base = Launch(argv=["vllm", "serve", "m", "--num-scheduler-steps", "8"])
    d = Plan(base, cat, {}).next(r)
    assert d.change is not None and d.change.source == "feature-switch"
    assert d.launch is not None and "--num-scheduler-steps" not in d.launch.argv
    assert "derived from the stack" in d.change.describe()


def test_run_retry_never_applies_a_switch_the_map_marks_manual(cat):
    """sglang#33660's speculative decoding: turning it off is not applied unattended."""
    r = report(cat, "sglang-33660.log")
    d = Plan(Launch(argv=["python", "-m", "sglang.launch_server"]), cat, {}).next(r)
    assert d.change is None or d.change.workaround != "sglang-speculative-off"
    assert any(s.workaround == "sglang-speculative-off" and "does not mark safe" in s.reason for s in d.skipped)


# ---- the map itself ----------------------------------------------------------------------------

def test_the_shipped_map_passes_its_checks():
    n, problems = feature_problems()
    assert problems == []
    fmap = feature_map()
    assert len(fmap["sglang"]) + len(fmap["vllm"]) >= 40
    assert sum(len(v) for k, v in fmap.items() if k not in ("sglang", "vllm")) >= 10
    assert n == sum(len(v) for v in fmap.values())


def test_a_switch_outside_its_flags_history_is_reported():
    sg = flag_index("sglang")
    assert sg is not None
    assert "removed in 0.4.2" in (_switch_flag_problem(sg, "--disable-flashinfer", ">=0.1.18") or "")
    assert "first appeared in 0.3.1" in (_switch_flag_problem(sg, "--attention-backend triton", ">=0.2.0") or "")
    assert _switch_flag_problem(sg, "--attention-backend triton", ">=0.3.1") is None
    assert "does not exist" in (_switch_flag_problem(sg, "--disable-everything", None) or "")


def test_a_bad_entry_is_named_by_file_and_line(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("engine: sglang\nsource: test\nfeatures:\n  - id: x-feature\n    title: t\n    engine: sglang\n"
                 "    frames: [sglang/srt/x.py]\n    switch:\n      - {flags: [disable-x]}\n    cost: c\n"
                 "    references: [r]\n", encoding="utf-8")
    with pytest.raises(CatalogueError, match=r"x\.yaml:9: field 'features\.0\.switch\.0\.flags'"):
        load_feature_file(p)


def test_a_feature_needs_evidence_and_an_action_switch_is_never_automatic():
    base = {"id": "x-y", "title": "t", "engine": "trtllm", "cost": "c", "references": ["r"]}
    with pytest.raises(ValueError, match="needs frames"):
        FeatureSpec.model_validate({**base, "switch": [{"env": {"A": "0"}}]})
    with pytest.raises(ValueError, match="never applied unattended"):
        FeatureSpec.model_validate({**base, "frames": ["a/b.py"], "switch": [{"action": "edit the YAML"}]})


def test_state_reads_printed_values_and_aliases():
    [feat] = [f for f in feature_map()["sglang"] if f.id == "sglang-flashinfer-attention"]
    assert feature_state(feat, {"attention_backend": "triton"})[0] == "off"
    assert feature_state(feat, {"attention_backend": "flashinfer"})[0] == "on"
    assert feature_state(feat, {"attn_backend": "flashinfer"})[0] == "on"
    assert feature_state(feat, {"attention_backend": None})[0] == "unconfirmed"


def test_any_setting_that_says_off_wins():
    """SGLang 0.5.14+ prints both disable_cuda_graph and cuda_graph_backend_decode."""
    [feat] = [f for f in feature_map()["sglang"] if f.id == "sglang-cuda-graph"]
    assert feature_state(feat, {"disable_cuda_graph": False, "cuda_graph_backend_decode": "disabled"})[0] == "off"
    assert feature_state(feat, {"disable_cuda_graph": False, "cuda_graph_backend_decode": "full"}) == \
        ("on", "disable_cuda_graph=False")


def test_a_deprecated_spelling_says_what_replaces_it(cat):
    """sglang#1117's capture stack on 0.5.14, where --disable-cuda-graph is deprecated but accepted."""
    f = fatal(report(cat, "sglang-1117.log", version="0.5.14"))
    [w] = [w for w in f.switches if w.feature == "sglang-cuda-graph"]
    assert w.flags == ["--disable-cuda-graph"] and "deprecated since 0.5.14" in (w.note or "")


def test_a_default_on_feature_is_on_in_that_release(cat):
    """sglang#3906's overlap-scheduler stack at 0.4.3: the overlap scheduler is on by default from
    0.3.6 (server_args.py disable_overlap_schedule: bool = False), so it is on, not merely assumed."""
    f = fatal(report(cat, "sglang-3906.log", version="0.4.3"))
    [row] = [x for x in f.features if x.feature == "sglang-overlap-schedule"]
    assert row.state == "on" and "on by default in 0.4.3" in row.reason
