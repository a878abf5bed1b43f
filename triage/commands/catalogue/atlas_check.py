"""`catalogue check` against the source atlas: does an engine signature still match a message
the engine really prints, and in the releases its `affects` claims?

Warnings, not failures: a signature may rightly target a message that comes from C++, CUDA or
torch (outside the engine's Python source), and the atlas reads the engine's Python only. So a
signature is checked only when the atlas holds templates of its engine that share its words;
one that matches none of them is the sign of an engine that reworded its message.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import regex

from triage.catalogue.atlas import Atlas, Template, filled, literal, make_template, span_text
from triage.catalogue.load import Catalogue, Signature

ENGINES = ("sglang", "vllm", "lmdeploy")
# the holes of a template filled two ways: a pattern's `\d+` wants a number, its `\w+` a word
_FILLS = ("1", "abc")
_TIMEOUT = 0.05


@dataclass
class AtlasWarning:
    signature: str
    path: str
    text: str


def _renderings(t: Template) -> list[str]:
    """The message with its holes filled, alone and as the exception line a log shows
    (`ValueError: ...`: many patterns name the class)."""
    out = []
    for fill in _FILLS:
        s = filled(t.text, fill)
        out.append(s)
        if t.exception[:1].isupper():
            out.append(f"{t.exception}: {s}")
    return out


def _matches(sig: Signature, t: Template) -> bool:
    for text in _renderings(t):
        for line in [text, *text.splitlines()]:
            for rx in sig.patterns:
                try:
                    if rx.search(line, timeout=_TIMEOUT):
                        return True
                except TimeoutError:
                    continue
    return False


def _plain(pattern: str) -> str:
    """A pattern's literal words, for finding the templates it is about."""
    s = regex.sub(r"\\[dDsSwWbB]|\[[^\]]*\]|\(\?[^)]*\)|[\\^$.*+?()|{}]", " ", pattern)
    return " ".join(s.split())


def _versions(atlas: Atlas, matching: list[Template]) -> set[int]:
    return {i for t in matching for s in t.sites for i in s.releases()}


def _span(versions: list[str], idx: set[int]) -> str:
    return span_text(versions, idx) if idx else "none"


def _similarity(target: str, t: Template) -> float:
    """How alike a pattern's words and a message are: a pattern is usually about the start of
    a message, so its words are also compared with a stretch of the message of their length."""
    lit = " ".join(literal(t.text).split())
    whole = difflib.SequenceMatcher(None, target, lit).ratio()
    head = difflib.SequenceMatcher(None, target, lit[: len(target) + 8]).ratio()
    return max(whole, head)


def check_signature(atlas: Atlas, sig: Signature) -> list[str]:
    spec = sig.spec
    if spec.engine not in ENGINES or spec.engine not in atlas.packages:
        return []
    pkg = atlas.packages[spec.engine]
    # the engine's templates that hold one of the signature's keywords (which every match of its
    # patterns holds, so a template without them cannot be what it is about)
    keys = [k.lower() for k in spec.keywords]
    cands = [make_template(raw) for raw in atlas.stored_holding(spec.engine, keys)]
    if not cands:
        return []  # nothing of the engine's own source says these words: a torch/CUDA/C++ message
    matching = [t for t in cands if _matches(sig, t)]
    if not matching:
        target = " ".join(_plain(p) for p in spec.patterns)
        nearest = max(cands, key=lambda t: _similarity(target, t))
        ratio = _similarity(target, nearest)
        if ratio < 0.55:
            return []
        s = nearest.sites[-1]
        shown = filled(nearest.text)
        return [f"no pattern matches a message {spec.engine} raises in any release "
                f"({pkg.versions[0]}-{pkg.versions[-1]}); nearest: {shown.splitlines()[0][:160]!r} "
                f"({s.file}, {_span(pkg.versions, _versions(atlas, [nearest]))})"]
    if spec.affects:
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        have = _versions(atlas, matching)
        claimed = {i for i, v in enumerate(pkg.versions) if Version(v) in SpecifierSet(spec.affects)}
        missing = claimed - have
        if missing:
            return [f"affects {spec.affects!r} claims {_span(pkg.versions, missing)}, where no release raises "
                    f"a message its patterns match (the message exists in {_span(pkg.versions, have)})"]
    return []


def check(cat: Catalogue, atlas: Atlas) -> list[AtlasWarning]:
    out = []
    for sig in cat.signatures.values():
        for w in check_signature(atlas, sig):
            out.append(AtlasWarning(signature=sig.spec.id, path=str(sig.path), text=w))
    return out
