"""The source atlas as shipped: its format, and failures located in the engines' released source.

The messages here are real: each was read from the released packages named beside it (the
atlas itself is built from them by scripts/build_atlas.py), and each log is written the way
the engine prints the exception."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from triage.catalogue import atlas as atlas_mod
from triage.catalogue.atlas import FORMAT, Atlas, shipped

# SGLang moved this check out of server_args.py (0.5.15-0.5.18) into arg_groups/overrides.py
# (0.5.19 on); the message kept its wording and its two f-string holes.
SSM = ("AssertionError: For SSM models, either chunk_size or page_size must be divisible by the other, "
       "got chunk_size=2048, page_size=48")


def _log(tmp_path, *lines: str, name: str = "server.log"):
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def _raised(path: str, *extra: str) -> list[dict]:
    r = run_cli("analyze", path, "--format", "json", *extra)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    return [x for f in doc["failures"] for x in f["raised_at"]]


def test_the_shipped_atlas_matches_this_format_and_covers_the_engines():
    a = shipped()
    assert a is not None
    assert a.header["format"] == FORMAT
    assert a.packages["sglang"].versions[0] == "0.3.0"
    assert a.packages["vllm"].versions[0] == "0.4.0"
    assert {"sglang", "vllm", "lmdeploy", "flashinfer", "xgrammar", "transformers", "huggingface_hub",
            "triton"} == set(a.packages)
    assert a.packages["sglang"].engine and not a.packages["transformers"].engine
    # the Triton compiler is a library (its name is also the Triton Inference Server's engine id)
    assert not a.packages["triton"].engine and a.packages["triton"].versions[0] == "2.1.0"


def test_a_file_of_another_format_is_refused(tmp_path):
    bad = tmp_path / "atlas.bin"
    atlas_mod.write(bad, {}, [{}] * atlas_mod.SHARDS, [])
    raw = bad.read_bytes()
    bad.write_bytes(b"NOT-AN-ATLAS\n" + raw[len(atlas_mod.MAGIC):])
    with pytest.raises(ValueError, match="not a triage source atlas"):
        Atlas.open(bad)


@pytest.mark.parametrize(("version", "file"), [
    ("0.5.16", "sglang/srt/server_args.py"),
    ("0.5.20", "sglang/srt/arg_groups/overrides.py"),
])
def test_a_message_that_moved_between_files_is_located_in_the_release_the_log_names(tmp_path, version, file):
    log = _log(tmp_path, f"[2026-01-05 10:00:00] sglang version {version}", SSM)
    sites = _raised(log)
    assert [s["file"] for s in sites] == [file]
    s = sites[0]
    assert s["package"] == "sglang" and s["in_version"] is True and s["release"] == version
    assert s["link"].startswith(f"https://github.com/sgl-project/sglang/blob/v{version}/python/{file}#L")
    assert s["template"].startswith("For SSM models, either chunk_size or page_size must be divisible")


def test_engine_version_picks_the_site_when_the_log_does_not_print_it(tmp_path):
    log = _log(tmp_path, "[2026-01-05 10:00:00] Scheduler hit an exception", SSM)
    assert [s["file"] for s in _raised(log, "--engine-version", "0.5.17")] == ["sglang/srt/server_args.py"]
    # no version at all: both sites, the newest release first, with the releases of each
    both = _raised(log)
    assert [s["file"] for s in both] == ["sglang/srt/arg_groups/overrides.py", "sglang/srt/server_args.py"]
    assert all(s["in_version"] is None for s in both)
    assert both[1]["versions"] == "0.5.15-0.5.18"


def test_a_message_with_holes_matches_its_filled_in_form_and_names_the_settings_it_reads(tmp_path):
    # sglang/srt/managers/schedule_batch.py, ScheduleBatch.alloc_req_slots (0.4.3.post3 on)
    line = ("RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for "
            "`--max-running-requests`. self.req_to_token_pool.available_size()=0, num_reqs=1")
    sites = _raised(_log(tmp_path, "sglang version 0.5.1", line))
    assert sites and sites[0]["file"] == "sglang/srt/managers/schedule_batch.py"
    assert sites[0]["function"].endswith("alloc_req_slots")
    assert "--max-running-requests" in sites[0]["flags"]


def test_a_message_no_release_raises_is_not_located(tmp_path):
    # the same opening words as the SSM check, but no release ever printed this sentence
    log = _log(tmp_path, "sglang version 0.5.20",
               "AssertionError: For SSM models, the chunk size 2048 cannot be used with this attention backend")
    assert _raised(log) == []


def test_a_traceback_whose_stack_holds_no_site_is_not_located(tmp_path):
    # Python's own AttributeError text: sglang raises the same words in multimodal_gen's
    # __getattr__, but this stack never went there
    log = _log(tmp_path, "sglang version 0.5.20", "Traceback (most recent call last):",
               '  File "/usr/lib/python3/dist-packages/sglang/srt/layers/attention/nsa/forward_mha.py", line 443, in forward_mha_extend',
               "    page_table = metadata.page_table_1_flattened",
               "AttributeError: 'PrefillMetadata' object has no attribute 'page_table_1_flattened'")
    assert _raised(log) == []


def test_the_markdown_report_says_where_and_links_the_line(tmp_path):
    log = _log(tmp_path, "sglang version 0.5.16", SSM)
    out = run_cli("analyze", log).stdout.decode()
    assert "**Raised at:** `sglang/srt/server_args.py · " in out
    assert " · SGLang 0.5.15-0.5.18`, [line " in out
    assert "(<https://github.com/sgl-project/sglang/blob/v0.5.16/python/sglang/srt/server_args.py#L" in out


# `catalogue check` against the atlas: a reworded engine message, and `affects` claiming releases
# without the message. SGLang has printed "alloc_req_slots runs out of memory. ..." from
# 0.4.3.post3 on (sglang/srt/managers/schedule_batch.py).
ALLOC_SIG = """\
id: user-alloc-req-slots
title: The request slots ran out
engine: sglang
severity: crash
keywords: [alloc_req_slots]
patterns:
  - '{pattern}'
{affects}explanation: |
  The request-to-token pool has one slot per running request; a burst over it fails the batch.
workarounds: [sglang-lower-max-running-requests]
references: [https://github.com/sgl-project/sglang/issues/1]
open_issue: https://github.com/sgl-project/sglang/issues/1
examples:
  match:
    - "RuntimeError: {example}"
  no_match:
    - "RuntimeError: alloc_req_slots was called twice"
"""


def _check(tmp_path, pattern: str, example: str, affects: str = "") -> str:
    d = tmp_path / "cat" / "signatures"
    d.mkdir(parents=True)
    (d / "alloc.yaml").write_text(ALLOC_SIG.format(pattern=pattern, example=example, affects=affects))
    return run_cli("catalogue", "check", str(tmp_path / "cat")).stdout.decode()


def test_check_warns_when_a_pattern_matches_no_release_and_names_the_nearest_message(tmp_path):
    out = _check(tmp_path, r"alloc_req_slots ran out of memory", "alloc_req_slots ran out of memory")
    assert "warn " in out and "user-alloc-req-slots: no pattern matches a message sglang raises in any release" in out
    assert "nearest: 'alloc_req_slots runs out of memory." in out
    assert "sglang/srt/managers/schedule_batch.py" in out
    assert "0 problems, 1 source-atlas warning" in out  # a warning, not a failure


def test_check_warns_when_affects_claims_releases_without_the_message(tmp_path):
    out = _check(tmp_path, r"alloc_req_slots runs out of memory", "alloc_req_slots runs out of memory.",
                 affects="affects: '>=0.3.0'\n")
    assert "affects '>=0.3.0' claims 0.3.0-0.4.3.post2, where no release raises" in out
    # the same entry with the message's real range is clean
    clean = _check(tmp_path / "2", r"alloc_req_slots runs out of memory", "alloc_req_slots runs out of memory.",
                   affects="affects: '>=0.4.3.post3'\n")
    assert "warn " not in clean and "0 problems" in clean


def test_new_fills_affects_and_a_reference_from_the_atlas(tmp_path):
    log = _log(tmp_path, "sglang version 0.5.16", SSM)
    out = run_cli("new", log).stdout.decode()
    assert 'frames: ["server_args.py:mamba_cache_chunk_size"]' in out
    # the message's releases, not only this site's: it moved to arg_groups/overrides.py in 0.5.19
    assert 'affects: ">=0.5.15"' in out
    assert "asserting max(chunk_size, page_size) % min(chunk_size, page_size) == 0" in out
    assert "  - https://github.com/sgl-project/sglang/blob/v0.5.16/python/sglang/srt/server_args.py#L" in out


def test_a_message_quoted_inside_a_wrapper_is_located_without_the_wrappers_stack(tmp_path):
    # vLLM 0.4.1-0.5.5, vllm/engine/output_processor/multi_step.py: asyncio prints the assert
    # inside its Future's repr, under the traceback of the code that awaited it
    log = _log(tmp_path, "INFO 08-21 10:00:00 api_server.py:212] vLLM API server version 0.5.4",
               "Traceback (most recent call last):",
               '  File "/usr/local/lib/python3.10/dist-packages/vllm/engine/async_llm_engine.py", line 56, in _log_task_completion',
               "    return_value = task.result()",
               "AssertionError: future: <Future finished exception=AssertionError('expected running sequences')>")
    sites = _raised(log)
    assert [(s["file"], s["in_version"]) for s in sites] == [("vllm/engine/output_processor/multi_step.py", True)]


def test_a_number_hole_next_to_a_unit_and_the_release_that_raised_it(tmp_path):
    # vLLM's KV-cache check, as 0.9.1 prints it (vllm/v1/core/kv_cache_utils.py, 0.9.1-0.12.0):
    # `{needed_memory / GiB_bytes:.2f} GiB`, a typed hole followed by a space and a unit
    msg = ("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache "
           "is needed, which is larger than the available KV cache memory (9.66 GiB). Based on the available "
           "memory, the estimated maximum model length is 79136. Try increasing `gpu_memory_utilization` or "
           "decreasing `max_model_len` when initializing the engine.")
    log = _log(tmp_path, "INFO 05-12 10:11:05 [api_server.py:1287] vLLM API server version 0.9.1", msg)
    sites = _raised(log)
    assert [(s["file"], s["function"], s["versions"], s["in_version"], s["partial"]) for s in sites] == [
        ("vllm/v1/core/kv_cache_utils.py", "check_enough_kv_cache_memory", "0.9.1-0.12.0", True, False)]
    assert sites[0]["condition"] == "needed_memory > available_memory"


# vLLM's configs are pydantic dataclasses from 0.10 on: a ValueError raised in a validator reaches
# the log as "1 validation error for X" with the engine's own message on the next line
# (vllm/config/scheduler.py, SchedulerConfig.verify_max_model_len, 0.11.1 on)
PYDANTIC = ("  Value error, max_num_batched_tokens (8192) is smaller than max_model_len (128000). This effectively "
            "limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
            "Please increase max_num_batched_tokens or decrease max_model_len. [type=value_error, "
            "input_value=ArgsKwargs((), {'runner_type': 'generate'}), input_type=ArgsKwargs]")


def test_a_message_inside_a_pydantic_validation_error_is_located(tmp_path):
    log = _log(tmp_path, "INFO 11-02 10:00:00 [api_server.py:1800] vLLM API server version 0.12.0",
               "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig", PYDANTIC,
               "    For further information visit https://errors.pydantic.dev/2.11/v/value_error")
    sites = _raised(log)
    assert [(s["file"], s["function"], s["in_version"], s["partial"]) for s in sites] == [
        ("vllm/config/scheduler.py", "SchedulerConfig.verify_max_model_len", True, False)]
    assert sites[0]["template"].startswith("max_num_batched_tokens ({}) is smaller than max_model_len ({})")
    # the same head with no item below it says nothing of where it came from
    bare = _log(tmp_path, "pydantic_core._pydantic_core.ValidationError: 1 validation error for SchedulerConfig",
                "INFO 11-02 10:00:01 [launcher.py:40] Shutting down", name="bare.log")
    assert _raised(bare) == []


# vLLM 0.22.0-0.32.0, vllm/v1/core/kv_cache_utils.py: the message as a paste that stops mid-word
KV_CUT = "(EngineCore pid=316) ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach"


def test_a_message_the_log_cuts_off_mid_word_is_located_only_at_the_end_of_the_log(tmp_path):
    sites = _raised(_log(tmp_path, "vLLM API server version 0.25.0", KV_CUT))
    assert [(s["file"], s["function"], s["partial"]) for s in sites] == [
        ("vllm/v1/core/kv_cache_utils.py", "_check_enough_kv_cache_memory", True)]
    # the same line with the log going on after it is a whole message, and no release prints it
    assert _raised(_log(tmp_path, "vLLM API server version 0.25.0", KV_CUT, "INFO shutting down",
                        name="whole.log")) == []


def test_a_cut_off_message_is_not_located_in_a_template_it_only_shares_a_short_start_with(tmp_path):
    # "max_num_batched_tokens (" opens two of SchedulerConfig's messages; the line's own words
    # after the number pick the right one, and another message with that opening is not taken
    line = "ValueError: max_num_batched_tokens (8192) is smaller than max_model_len (1280"
    sites = _raised(_log(tmp_path, "vLLM API server version 0.12.0", line))
    assert sites and all("is smaller than max_model_len" in s["template"] for s in sites)
    other = "ValueError: max_num_batched_tokens (8192) is not a multiple of the block si"
    assert _raised(_log(tmp_path, "vLLM API server version 0.12.0", other, name="other.log")) == []


def test_a_message_printed_as_a_tuple_of_strings_is_located_by_its_first_part(tmp_path):
    # vLLM 0.5.3-0.28.0 (compressed_tensors.py and quark.py) raise RuntimeError("...for ", f"the
    # current GPU. Min capability: {x}. ", ...): commas for pluses, so Python prints the tuple
    line = ("RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 80. ', "
            "'Current capability: 75.')")
    sites = _raised(_log(tmp_path, "vLLM API server version 0.9.2", line))
    assert {s["file"].rsplit("/", 1)[-1] for s in sites} == {"compressed_tensors.py", "quark.py"}
    assert all(s["in_version"] for s in sites)


def test_pythons_own_message_is_located_only_on_the_traceback_that_raised_it(tmp_path):
    # SGLang's multimodal_gen configs raise "'X' object has no attribute 'y'" by hand in a
    # __getattr__; a bare AttributeError line in an SGLang log did not come from there
    line = "AttributeError: 'Scheduler' object has no attribute 'token_to_kv_pool'"
    assert _raised(_log(tmp_path, "[2025-01-01 00:00:00] server_args=ServerArgs(model_path='m')", line)) == []


# SGLang 0.5.14, sglang/srt/server_args.py, ServerArgs._validate_mamba_extra_buffer: a bare
# assert, so the log's only words are the frame's code line and "AssertionError"
MAMBA = ["[2026-01-05 10:00:00] sglang version 0.5.14", "Traceback (most recent call last):",
         '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 4377, in {func}',
         "    assert self.mamba_track_interval % self.page_size == 0", "AssertionError"]


def test_a_bare_assert_is_located_by_the_frame_that_failed_and_names_the_flags_its_condition_reads(tmp_path):
    log = _log(tmp_path, *[x.format(func="_validate_mamba_extra_buffer") for x in MAMBA])
    sites = _raised(log)
    assert [(s["file"], s["function"], s["in_version"]) for s in sites] == [
        ("sglang/srt/server_args.py", "ServerArgs._validate_mamba_extra_buffer", True)]
    assert sites[0]["condition"] == "self.mamba_track_interval % self.page_size == 0"
    assert {"--mamba-track-interval", "--page-size"} <= set(sites[0]["flags"])
    assert sites[0]["template"] == "assert self.mamba_track_interval % self.page_size == 0"
    # the same code line in a function that never had it is not that assert
    other = _log(tmp_path, *[x.format(func="_handle_other_things") for x in MAMBA], name="other.log")
    assert _raised(other) == []


def test_an_assert_quoted_as_the_message_is_located_by_its_code(tmp_path):
    # SGLang 0.5.3 on (nsa_indexer.py, later dsa_indexer.py): the report pasted the assert line
    log = _log(tmp_path, "[2026-01-05 10:00:00] sglang version 0.5.3",
               "AssertionError: assert logits.shape[0] == len(seq_lens_expanded)")
    assert [s["file"] for s in _raised(log)] == ["sglang/srt/layers/attention/nsa/nsa_indexer.py"]


def test_new_names_a_bare_assert_by_its_code_line(tmp_path):
    log = _log(tmp_path, *[x.format(func="_validate_mamba_extra_buffer") for x in MAMBA])
    out = run_cli("new", log).stdout.decode()
    assert 'title: "AssertionError: assert self.mamba_track_interval % self.page_size' in out
    assert "  - 'assert self\\.mamba_track_interval % self\\.page_size" in out
    assert 'affects: ">=0.5.14,<=0.5.14"' in out
    report = run_cli("analyze", log).stdout.decode()
    assert ("The assertion is SGLang's own: `assert self.mamba_track_interval % self.page_size == 0` in "
            "`sglang/srt/server_args.py`") in report


def test_the_tracebacks_line_number_tells_the_releases_when_the_log_names_none(tmp_path):
    # vLLM's bare `assert seq_group.generator is not None` in sampler.py's _multinomial stood at
    # line 627 in 0.6.2-0.6.3 only (0.5.5-0.10.2 have it elsewhere in the file)
    frame = ('ERROR 09-25 18:52:23 engine.py:157]   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/'
             'layers/sampler.py", line {n}, in _multinomial')
    body = ["ERROR 09-25 18:52:23 engine.py:157]     assert seq_group.generator is not None",
            "ERROR 09-25 18:52:23 engine.py:157] AssertionError"]
    head = "ERROR 09-25 18:52:23 engine.py:157] Traceback (most recent call last):"
    site = _raised(_log(tmp_path, head, frame.format(n=627), *body))[0]
    assert (site["line_versions"], site["release"], site["line"]) == ("0.6.2-0.6.3", "0.6.3", 627)
    out = run_cli("analyze", _log(tmp_path, head, frame.format(n=627), *body, name="md.log")).stdout.decode()
    assert "(the traceback's line 627 is this raise's line in vLLM 0.6.2-0.6.3)" in out
    # a line no release has it at says nothing (a build from source, or an older Python's numbering)
    other = _raised(_log(tmp_path, head, frame.format(n=9999), *body, name="other.log"))[0]
    assert other["line_versions"] is None and other["release"] == "0.10.2"


def test_text_holes_apart_by_white_space_are_one_hole():
    """`%s %s` compiles to one `.*?`: the same lines match (a line has no newline, so `.*?\\s*.*?`
    and `.*?` accept the same text), and a line that does not match is not tried at every split
    between the two holes (six such holes took 0.4 s per message in `catalogue check`)."""
    import re

    from triage.catalogue.atlas import HOLE, pattern_source

    s = HOLE + "s"
    text = f"{s} {s} must be {s} {s}, got {s} {s}."
    assert pattern_source(text).count(".*?") == 3
    assert pattern_source(f"{s}: {s} {HOLE}d {s}").count(".*?") == 3  # not across literal text or a number
    naive = "".join(".*?" if seg == s else atlas_mod._loose(seg) for seg in atlas_mod.segments(text))
    for line in ("x y must be 4 5, got 6 7.", "xy must be 45, got 67.", "a b c must be d e, got f g h.",
                 "x y must be 4 5, got 6 7", "must be , got .", "x y must  be 4 5, got 6 7. and more"):
        assert bool(re.fullmatch(pattern_source(text), line)) == bool(re.fullmatch(naive, line)), line


# Triton, the kernel compiler (a library: its messages count in every engine's log). OutOfResources
# builds its message in the class (triton/runtime/errors.py: `__init__` builds self.message in
# 2.1-2.3, `__str__` returns it from 3.0) and CompiledKernel._init_handles raises it as
# `OutOfResources(self.metadata.shared, max_shared, "shared memory")` (triton/compiler/compiler.py,
# every release read; `raise_(OutOfResources(...))` from 3.5).
OOR = ("triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: {}, Hardware limit: {}. "
       "Reducing block sizes or `num_stages` may help.")


def test_a_triton_message_built_in_its_exception_class_is_located_at_the_raise_that_fills_it_in(tmp_path):
    """The last lines of the traceback in https://github.com/sgl-project/sglang/issues/2384 (SGLang
    on MI300), as the thread shows them."""
    log = _log(tmp_path,
               "    self._init_handles()",
               '  File "/opt/conda/envs/py_3.9/lib/python3.9/site-packages/triton/compiler/compiler.py", line 385, in _init_handles',
               '    raise OutOfResources(self.metadata.shared, max_shared, "shared memory")',
               "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: "
               "65536. Reducing block sizes or `num_stages` may help.")
    sites = _raised(log)
    assert [(s["package"], s["file"], s["function"], s["versions"], s["exception"]) for s in sites] == [
        ("triton", "triton/compiler/compiler.py", "CompiledKernel._init_handles", "2.1.0-3.9.0", "OutOfResources")]
    s = sites[0]
    # the raise's own text filled in: "shared memory" is literal, the sizes are holes
    assert s["template"] == ("out of resource: shared memory, Required: {}, Hardware limit: {}. "
                             "Reducing block sizes or `num_stages` may help.")
    assert s["condition"] == "self.metadata.shared > max_shared"
    # ROCm's build numbers the line otherwise: no PyPI release raises it at line 385
    assert s["line_versions"] is None and s["in_version"] is None
    assert s["link"].startswith("https://github.com/triton-lang/triton/blob/v3.9.0/python/triton/compiler/compiler.py#L")
    # `triage new` links the line, but Triton's releases are not the engine's: no `affects` from them
    out = run_cli("new", log, "--failure", "1").stdout.decode()
    assert "  - https://github.com/triton-lang/triton/blob/v3.9.0/python/triton/compiler/compiler.py#L" in out
    assert "\naffects:" not in out and "2.1.0" not in out.split("# source atlas:")[0]


def test_the_tracebacks_line_in_triton_tells_its_release_and_the_engines_version_does_not(tmp_path):
    """The traceback's last lines from https://github.com/Yuliang-Liu/MonkeyOCR/issues/86: line 374
    of compiler.py raises it in Triton 3.0.0-3.1.0 only. The log's vLLM version is vLLM's: it picks
    no Triton release."""
    lines = ('File "/usr/local/lib/python3.11/dist-packages/triton/compiler/compiler.py", line 374, in _init_handles',
             '    raise OutOfResources(self.metadata.shared, max_shared, "shared memory")',
             "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 126978, Hardware limit: "
             "101376. Reducing block sizes or `num_stages` may help.")
    site = _raised(_log(tmp_path, "INFO 01-28 03:20:00 api_server.py:712] vLLM API server version 0.7.0", *lines))[0]
    assert (site["function"], site["line"], site["line_versions"], site["release"]) == (
        "CompiledKernel._init_handles", 374, "3.0.0-3.1.0", "3.1.0")
    assert site["in_version"] is None  # vLLM 0.7.0 is no Triton release
    # the Triton Inference Server's engine id is `triton` too: its version (2.45.0) is the server's,
    # and picks no release of the compiler (it would pick 2.3.1, whose line is 248)
    from triage.core.models import Environment, Failure, Frame
    from triage.pipeline.locate import locate_failure

    f = Failure(kind="traceback", exception="triton.runtime.errors.OutOfResources", message=lines[2].split(": ", 1)[1],
                line=1, frames=[Frame(file="/usr/local/lib/python3.11/dist-packages/triton/compiler/compiler.py",
                                      line=374, function="_init_handles")])
    site = locate_failure(f, Environment(engine="triton", version="2.45.0"), shipped())[0]
    assert (site.in_version, site.line_versions, site.release) == (None, "3.0.0-3.1.0", "3.1.0")


def test_the_triton_message_without_a_traceback_and_a_near_miss(tmp_path):
    # the exception line as https://github.com/vllm-project/vllm/pull/11584 quotes it (Pascal, vLLM)
    line = OOR.format(65536, 49152)
    sites = _raised(_log(tmp_path, "INFO 12-28 10:00:00 api_server.py:651] vLLM API server version 0.6.5", line))
    assert [(s["file"], s["function"]) for s in sites] == [("triton/compiler/compiler.py", "CompiledKernel._init_handles")]
    # the class's own text with another tail: no release prints it
    near = "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 65536, Hardware limit: 49152."
    assert _raised(_log(tmp_path, near, "INFO 12-28 10:00:01 launcher.py:40] Shutting down", name="near.log")) == []


def test_a_triton_message_from_its_runtime_and_a_backend_file_links_to_the_repository_folder(tmp_path):
    """`RuntimeError: Failed to find C compiler...` as https://github.com/thu-ml/SageAttention/issues/7
    shows it (a Windows path: its line 52 is no PyPI release's), and `libcuda.so cannot found!` as
    https://github.com/unslothai/unsloth/issues/679 shows it: 3.0 on raise it in the NVIDIA backend's
    driver.py, which the wheel has at triton/backends/nvidia/ and the repository at
    third_party/nvidia/backend/."""
    log = _log(tmp_path,
               '  File "D:\\CogVideoX\\CogVideo\\venv\\lib\\site-packages\\triton\\runtime\\build.py", line 52, in _build',
               '    raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")',
               "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.")
    sites = _raised(log)
    assert [(s["file"], s["function"], s["versions"]) for s in sites] == [("triton/runtime/build.py", "_build", "3.0.0-3.3.1")]
    assert sites[0]["line_versions"] is None
    log = _log(tmp_path, "AssertionError: libcuda.so cannot found!",
               "Possible files are located at ['/lib/x86_64-linux-gnu/libcuda.so.1'].Please create a symlink of "
               "libcuda.so to any of the file.", "", name="libcuda.log")
    by_file = {s["file"]: s for s in _raised(log)}
    assert {"triton/backends/nvidia/driver.py", "triton/common/build.py"} <= set(by_file)
    assert by_file["triton/backends/nvidia/driver.py"]["link"].startswith(
        "https://github.com/triton-lang/triton/blob/v3.9.0/third_party/nvidia/backend/driver.py#L")
    assert "/python/triton/common/build.py#L" in by_file["triton/common/build.py"]["link"]
