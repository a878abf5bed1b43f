"""The pipeline is a straight line: read -> scan -> parse -> match -> recommend -> render.
No stage imports a stage that runs after it (function-level imports included), and the
shared layer (models, errors, the catalogue's data) imports no stage at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "triage"

# module -> position in the pipeline; modules not listed are commands on top, free to import any stage
STAGES = {
    "triage.pipeline.read": 0,
    "triage.pipeline.scan": 1,
    "triage.pipeline.parse": 2,  # and every triage.pipeline.parse.* module
    "triage.pipeline.hints": 2,
    "triage.pipeline.match": 3,
    "triage.pipeline.recommend": 4,
    "triage.pipeline.redact": 5,
    "triage.render": 6,  # and triage.render.*
}
SHARED = ("triage.core.models", "triage.core.errors", "triage.core.fingerprint", "triage.core.vocabulary", "triage.catalogue.models",
          "triage.catalogue.load", "triage.catalogue.flags")


def _module(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _stage(mod: str) -> int | None:
    for name, pos in STAGES.items():
        if mod == name or mod.startswith(name + "."):
            return pos
    return None


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("triage")}


MODULES = sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: _module(p))
def test_no_stage_imports_a_later_stage(path):
    mod = _module(path)
    here = _stage(mod)
    if here is None:
        return
    later = sorted(i for i in _imports(path) if (s := _stage(i)) is not None and s > here)
    assert not later, f"{mod} (stage {here}) imports later stages: {later}"


@pytest.mark.parametrize("path", [p for p in MODULES if _module(p).startswith(SHARED)], ids=lambda p: _module(p))
def test_shared_layer_imports_no_stage(path):
    mod = _module(path)
    stages = sorted(i for i in _imports(path) if _stage(i) is not None)
    assert not stages, f"{mod} is shared by every stage but imports {stages}"
