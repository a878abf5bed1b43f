"""What the catalogue docs promise. An entry's engine is stated once, in `engine:`: the
folder only organises the files (`catalogue check` reports one that disagrees) and the id prefix
means nothing. `when` aliases are the documented ones; `conflicts:` is gone."""

from __future__ import annotations

from pathlib import Path

from triage.catalogue.load import Catalogue
from triage.catalogue.models import FlagChange, WorkaroundSpec
from triage.commands.catalogue.check import check
from triage.core.models import Environment, Finding, Report, Workaround
from triage.pipeline.recommend import patched_command

WORKAROUND = """id: {id}
engine: {engine}
auto: false
title: Run decode without CUDA graphs
{change}
cost: Decode launches its kernels one by one; decode throughput drops.
"""
FLAGS = 'flags: {add: ["--disable-cuda-graph"]}'
ENV = 'env: {CUDA_LAUNCH_BLOCKING: "1"}'


def _catalogue(root: Path, folder: str, engine: str, change: str = FLAGS) -> Path:
    d = root / "workarounds" / folder
    d.mkdir(parents=True)
    (d / "x.yaml").write_text(WORKAROUND.format(id="x-no-cuda-graph", engine=engine, change=change), encoding="utf-8")
    (root / "signatures").mkdir()
    return root


def test_check_reports_a_folder_that_disagrees_with_the_engine(tmp_path):
    n, text = check([str(_catalogue(tmp_path, "vllm", "sglang"))], [], verbose=False)
    assert n == 1
    assert "x-no-cuda-graph: workaround for engine 'sglang' is in folder vllm/; move it to workarounds/sglang/" in text


def test_check_takes_common_for_any_engine(tmp_path):
    n, text = check([str(_catalogue(tmp_path, "common", "any", ENV))], [], verbose=False)
    assert n == 0, text


def test_builtin_catalogue_folders_agree_with_engines():
    from triage.catalogue.load import load_catalogue
    from triage.commands.catalogue.check import folder_problems

    assert folder_problems(load_catalogue()) == []


def _report(engine: str) -> Report:
    rec = Workaround(id="vllm-named-for-another-engine", title="t", flags=["--disable-cuda-graph"])
    finding = Finding(signature="s", title="t", confidence=0.9, severity="crash", engine=engine, workarounds=[rec])
    env = Environment(engine=engine, launch_command="python -m sglang.launch_server --model-path m")
    return Report(source="x", environment=env, findings=[finding])


def _cat(engine: str) -> Catalogue:
    spec = WorkaroundSpec(id="vllm-named-for-another-engine", engine=engine, title="No CUDA graphs",
                          flags=FlagChange(add=["--disable-cuda-graph"]), cost="decode throughput drops")
    return Catalogue(workarounds={spec.id: spec})


def test_the_patched_command_follows_the_engine_field_not_the_id():
    # the id says vllm, the entry says sglang: an sglang server's command is patched
    assert patched_command(_report("sglang"), _cat("sglang")) == (
        "python -m sglang.launch_server --model-path m --disable-cuda-graph")
    # the entry is for vllm: an sglang server's command is left alone, whatever the id says
    assert patched_command(_report("sglang"), _cat("vllm")) is None


def test_when_aliases_are_the_documented_ones():
    import re

    from triage.pipeline.match import SETTING_ALIASES

    docs = (Path(__file__).resolve().parents[1] / "docs" / "catalogue.md").read_text(encoding="utf-8")
    table = {m[1]: [a.strip(" `") for a in m[2].split(",")]
             for m in re.finditer(r"^\| `(\w+)` \| (.+?) \|$", docs, re.M)}
    assert table == {k: v[1:] for k, v in SETTING_ALIASES.items()}


def test_conflicts_is_not_a_field():
    """`conflicts:` was accepted and never read; the schema now refuses it (flag conflicts
    between offered workarounds are found without it)."""
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        WorkaroundSpec.model_validate({"id": "a-b", "engine": "sglang", "title": "abc", "env": {"A": "1"},
                                       "cost": "ten characters", "conflicts": []})
