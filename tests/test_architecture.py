"""The import contract of docs/architecture.md, checked on the source (function-level and
TYPE_CHECKING imports included):

    cli.py, triage/__init__.py   may import anything
    commands/                    core, catalogue, pipeline, render, commands
    render/                      core, render              (renders only what the Report holds)
    pipeline/                    core, catalogue, pipeline (and a stage only earlier stages)
    catalogue/                   core, catalogue           (no stage: check/show are commands)
    core/                        core

and inside pipeline/ the stages run read -> scan -> parse -> match -> hints -> recommend ->
redact; a stage never imports a later one. analyze.py, which calls them in that order, may
import them all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "triage"

TOP = "top"
LAYERS = {  # package -> its layer; the longest matching prefix wins
    "triage.core": "core",
    "triage.catalogue": "catalogue",
    "triage.pipeline": "pipeline",
    "triage.render": "render",
    "triage.commands": "commands",
}
MAY_IMPORT = {
    "core": {"core"},
    "catalogue": {"core", "catalogue"},
    "pipeline": {"core", "catalogue", "pipeline"},
    "render": {"core", "render"},
    "commands": {"core", "catalogue", "pipeline", "render", "commands"},
    TOP: {"core", "catalogue", "pipeline", "render", "commands", TOP},
}
TOP_MODULES = {"triage", "triage.__main__", "triage.cli"}
STAGES = {  # pipeline module -> its position in the run
    "triage.pipeline.read": 0,
    "triage.pipeline.scan": 1,
    "triage.pipeline.hsdb": 1,  # the scan's compiled keyword database, kept on disk
    "triage.pipeline.prefill": 1,
    "triage.pipeline.loadseries": 1,  # the HTML chart's load series, folded by the scan  # the prefix cache's window: summed by the scan, or read back
    "triage.pipeline.parse": 2,  # its modules import each other: one stage
    "triage.pipeline.match": 3,
    "triage.pipeline.hints": 4,
    "triage.pipeline.locate": 4,  # the source atlas's sites, once the failures are final
    "triage.pipeline.fit": 5,  # every advice source checked against the log (recommend calls it)
    "triage.pipeline.recommend": 5,
    "triage.pipeline.switches": 5,
    "triage.pipeline.host": 5,  # the incident's host records, correlated with the finished report  # the feature map's derived workarounds, ranked by recommend
    "triage.pipeline.chart": 6,  # the HTML chart's axis: the series, phases, failures, host events placed
    "triage.pipeline.redact": 6,
    "triage.pipeline.secret_rules": 6,  # the rule table redact applies
    "triage.pipeline.gitleaks_rules": 6,  # gitleaks' rules, generated, part of that table
    "triage.pipeline.analyze": 7,  # the orchestration: every stage
}


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _within(mod: str, prefix: str) -> bool:
    return mod == prefix or mod.startswith(prefix + ".")


def layer(mod: str) -> str | None:
    if mod in TOP_MODULES:
        return TOP
    found = [p for p in LAYERS if _within(mod, p)]
    return LAYERS[max(found, key=len)] if found else None


def stage(mod: str) -> int | None:
    return next((pos for name, pos in STAGES.items() if _within(mod, name)), None)


def imports(path: Path) -> set[str]:
    """Every triage module (or module.name) the file imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (the contract reads absolute ones)"
            if node.module:
                # `from triage.x import y`: y may be a module (triage.x.y) or a name in triage.x
                out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if _within(m, "triage")}


def _target_layer(imported: str) -> str | None:
    # `triage.core.models.Report` is in core; `triage.pipeline` (the package) in pipeline
    return layer(imported) if imported not in ("triage.__version__",) else TOP


MODULES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=_module)
def test_every_module_is_in_a_layer(path):
    mod = _module(path)
    assert layer(mod) is not None, f"{mod} is in no layer: put it in core/, catalogue/, pipeline/, render/ or commands/"


@pytest.mark.parametrize("path", MODULES, ids=_module)
def test_imports_point_down(path):
    mod = _module(path)
    here = layer(mod)
    wrong = sorted(i for i in imports(path) if (there := _target_layer(i)) is not None and there not in MAY_IMPORT[here])
    assert not wrong, f"{mod} ({here}) may import only {sorted(MAY_IMPORT[here])}, but imports {wrong}"


@pytest.mark.parametrize("path", [p for p in MODULES if stage(_module(p)) is not None], ids=_module)
def test_no_stage_imports_a_later_stage(path):
    mod = _module(path)
    here = stage(mod)
    assert here is not None
    later = sorted(i for i in imports(path) if (s := stage(i)) is not None and s > here)
    assert not later, f"{mod} (stage {here}) imports later stages: {later}"


def test_every_pipeline_module_is_a_stage():
    loose = [m for p in MODULES if layer(m := _module(p)) == "pipeline" and m != "triage.pipeline" and stage(m) is None]
    assert not loose, f"pipeline modules with no place in the stage order: {loose}"


def test_the_contract_catches_a_violation(tmp_path):
    """The checks above can fail: an upward import and a backward stage import are seen."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from triage.render.markdown import render_markdown\n    from triage.pipeline.recommend import x\n")
    found = imports(bad)
    assert "triage.render.markdown.render_markdown" in found
    assert _target_layer("triage.render.markdown.render_markdown") not in MAY_IMPORT["pipeline"]
    assert stage("triage.pipeline.recommend.x") > stage("triage.pipeline.scan")
