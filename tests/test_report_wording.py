"""What the report and `triage show` say in words. The proper fix is answered for every way a
signature can state it (a release, a merged PR, an open thread, a reason none is coming, or only
the affected range); sentences end once; a long message is cut without breaking its escaping."""

from __future__ import annotations

import pytest
from conftest import run_cli

from triage.core.models import Finding
from triage.render.markdown import properfix


def _finding(**kw: str) -> Finding:
    return Finding(signature="s", title="t", confidence=0.9, severity="crash", engine="vllm", **kw)


@pytest.mark.parametrize(("fields", "expected"), [
    ({"fixed_in": "0.6.2"}, "**Proper fix:** upgrade to vLLM 0.6.2 or later."),
    # the release and the pull request that put the fix in it
    ({"fixed_in": "0.6.5", "fix_pr": "https://github.com/vllm-project/vllm/pull/11074"},
     "**Proper fix:** upgrade to vLLM 0.6.5 or later (PR #11074 <https://github.com/vllm-project/vllm/pull/11074>)."),
    ({"fixed_in": "0.6.2", "affects": ">=0.5,<0.6.2"},
     "**Proper fix:** upgrade to vLLM 0.6.2 or later (affected: `>=0.5,<0.6.2`)."),
    ({"fixed_in": "https://github.com/vllm-project/vllm/pull/1"},
     "**Proper fix:** upgrade to a release with <https://github.com/vllm-project/vllm/pull/1>."),
    ({"open_issue": "https://github.com/vllm-project/vllm/issues/2"},
     "**Proper fix:** not fixed upstream yet (<https://github.com/vllm-project/vllm/issues/2>); "
     "the workaround is what there is."),
    # a range with an upper bound names the first release without the bug
    ({"affects": "<0.11"}, "**Proper fix:** upgrade to vLLM 0.11 or later (affected: `<0.11`)."),
    ({"affects": ">=0.5.5,<0.11"}, "**Proper fix:** upgrade to vLLM 0.11 or later (affected: `>=0.5.5,<0.11`)."),
    # a lower bound alone: the catalogue knows of no fixing release, and says so
    ({"affects": ">=0.5.3"}, "**Proper fix:** no release that fixes it is recorded yet (affected: `>=0.5.3`); "
     "the workaround is what there is."),
    ({}, ""),
])
def test_every_way_of_stating_the_fix_is_answered(fields, expected):
    assert properfix(_finding(**fields)) == expected


def test_a_range_that_is_not_pep_440_is_shown_not_interpreted():
    assert properfix(_finding(affects="some builds")) == (
        "**Proper fix:** no release that fixes it is recorded yet (affected: `some builds`); "
        "the workaround is what there is.")


def test_the_bundled_example_states_its_proper_fix_on_the_first_screen():
    """The report used to say nothing about a proper fix for 23 signatures; the bundled example's
    bug is tracked in an open upstream issue, and the first screen says so."""
    p = run_cli("analyze", "examples/sglang-nsa-crash.log")
    first_screen = p.stdout.decode().split("## Timeline")[0]
    assert ("**Proper fix:** not fixed upstream yet (<https://github.com/sgl-project/sglang/issues/14691>)"
            in first_screen)


def test_show_prints_the_same_sentence_as_a_report():
    """`triage show` used to print only 'Affects: ... · Fixed in: not yet', nothing of an open
    thread or of why no fix is coming."""
    p = run_cli("show", "cuda-misaligned-address")
    assert "**Proper fix:** no upstream release fixes this: A symptom shared by many kernels" in p.stdout.decode()
    p = run_cli("show", "sglang-nsa-page-table-1-flattened")
    assert "**Proper fix:** not fixed upstream yet (<https://github.com/sgl-project/sglang/issues/14691>)" in p.stdout.decode()


def test_show_ends_a_workaround_whose_action_is_a_sentence_with_one_full_stop():
    """common-raise-host-memory's action ends with a full stop: `show` printed 'buffers..'."""
    p = run_cli("show", "system-oom-killer")
    line = next(ln for ln in p.stdout.decode().splitlines() if "`common-raise-host-memory`" in ln)
    assert line.endswith(".") and not line.endswith("..")


def test_a_long_unknown_message_is_cut_before_it_is_escaped(tmp_path):
    """The verdict cut the escaped message at 200 characters: a `<` there became a broken `&l`."""
    log = tmp_path / "server.log"
    message = "x" * 197 + "<class 'int'> and more text after the cut"
    log.write_text("Traceback (most recent call last):\n"
                   '  File "/srv/app/frob.py", line 3, in frob\n'
                   "    frob()\n"
                   f"FrobnicatorError: {message}\n")
    verdict = next(ln for ln in run_cli("analyze", str(log)).stdout.decode().splitlines() if ln.startswith("**Verdict:**"))
    assert "xxx&lt;c…," in verdict and "&l," not in verdict and "more text" not in verdict
