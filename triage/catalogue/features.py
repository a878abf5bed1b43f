"""The feature map: each engine's optional features, the code that shows one on a stack, the
settings that show it on or off, and the switch that turns it off in each release.

A catalogue of messages cannot list the novel exceptions raised inside an optional feature (CUDA
graphs, the overlap scheduler, custom all-reduce ...); a map of the features can: a failure whose
stack runs through a feature that is on in this run can be avoided by turning that feature off.
`pipeline/switches.py` reads the map; `catalogue check` lints it against the flag histories.

The map is shipped data (`data/features/<engine>.yaml`, one file per engine), derived from the
engines' released source and flag histories (scripts/feature_map.py checks it against them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import regex
from pydantic import Field, ValidationError, field_validator, model_validator

from triage.catalogue.models import ID_RX, Strict, _env_strings
from triage.core.errors import CatalogueError

DATA = Path(__file__).resolve().parent / "data" / "features"
# engines of the map: the serving engines plus the layers under them that have switches of their own
FEATURE_ENGINES = ("sglang", "vllm", "trtllm", "tgi", "lmdeploy", "nccl", "torch")


def _specifier(v: str | None) -> str | None:
    if v is None:
        return v
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(v)
    except InvalidSpecifier:
        raise ValueError(f"{v!r} is not a PEP 440 version range") from None
    return v


class Switch(Strict):
    """One spelling of "turn it off", valid in a range of releases."""

    flags: list[str] = Field(default_factory=list)  # flags to add (a value follows a space)
    remove_flags: list[str] = Field(default_factory=list)  # flags that turned the feature on
    env: dict[str, str] = Field(default_factory=dict)
    # a change that is not a flag or a variable (an option of TensorRT-LLM's YAML config file)
    action: str | None = None
    versions: str | None = None  # PEP 440 range of the engine releases this spelling works in
    # may `run --retry` apply it unattended? Turning a feature off is a pure launch change, but
    # some switches change answers (another sampler) or need a choice: those say false
    auto: bool = True
    note: str | None = None

    _env = field_validator("env", mode="before")(_env_strings)
    _versions = field_validator("versions")(_specifier)

    @field_validator("flags", "remove_flags")
    @classmethod
    def _are_flags(cls, v: list[str]) -> list[str]:
        for f in v:
            if not f.startswith("--"):
                raise ValueError(f"{f!r} is not a flag (flags start with '--')")
        return v

    @model_validator(mode="after")
    def _something(self) -> Switch:
        if not (self.flags or self.remove_flags or self.env or self.action):
            raise ValueError("a switch needs flags, remove_flags, env or action")
        if self.action and self.auto:
            raise ValueError("a switch with an action is never applied unattended: say auto: false")
        return self


class Setting(Strict):
    """A printed launch setting (or environment variable) that tells whether the feature is on."""

    setting: str
    on_if: list[Any] = Field(default_factory=list)  # values that mean on
    off_if: list[Any] = Field(default_factory=list)  # values that mean off
    # releases where the feature is on when the log does not print the setting (documentation
    # of the default; the stack through the feature's code is the evidence that it ran)
    default_on: str | None = None

    _versions = field_validator("default_on")(_specifier)

    @model_validator(mode="after")
    def _values(self) -> Setting:
        if not (self.on_if or self.off_if):
            raise ValueError("a setting needs the values that mean on or off")
        return self


class FeatureSpec(Strict):
    id: str = Field(pattern=ID_RX)
    title: str
    engine: str
    # where the feature shows on a stack: "path/fragment.py" (any function in it) or
    # "path/fragment.py:func_a|func_b"; the path as traceback File lines print it, from the
    # package's top directory on ("sglang/srt/...", "vllm/...")
    frames: list[str] = Field(default_factory=list)
    # frames of a loop that runs everything else (the overlap scheduler's event loop): they
    # implicate the feature only when the exception was raised in that very frame (the innermost
    # one), not when the loop merely called the code that failed
    loop_frames: list[str] = Field(default_factory=list)
    # regexes on the failure's own lines (message and traceback text), for features that show
    # in a message rather than a Python frame (NCCL's transports)
    messages: list[str] = Field(default_factory=list)
    state: list[Setting] = Field(default_factory=list)
    switch: list[Switch] = Field(min_length=1)
    cost: str
    references: list[str] = Field(min_length=1)  # source files, flag histories, threads

    @model_validator(mode="after")
    def _evidence(self) -> FeatureSpec:
        if not (self.frames or self.loop_frames or self.messages):
            raise ValueError("a feature needs frames (or, for a library without Python frames, messages)")
        return self

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        if v not in FEATURE_ENGINES:
            raise ValueError(f"engine must be one of {', '.join(FEATURE_ENGINES)}")
        return v

    @field_validator("frames", "loop_frames")
    @classmethod
    def _frames(cls, v: list[str]) -> list[str]:
        for f in v:
            path = f.split(":", 1)[0]
            if not path or path.startswith("/") or " " in path:
                raise ValueError(f"frame {f!r}: a path fragment like 'sglang/srt/x.py[:function]'")
        return v

    @field_validator("messages")
    @classmethod
    def _messages(cls, v: list[str]) -> list[str]:
        import regex

        for p in v:
            try:
                regex.compile(p)
            except regex.error as e:
                raise ValueError(f"invalid regex {p!r}: {e}") from None
        return v


class FeatureFile(Strict):
    engine: str
    source: str  # how the entries were derived
    features: list[FeatureSpec]


@dataclass(frozen=True)
class FrameRule:
    """A feature's frame: a path fragment, and the functions that count (none: any)."""

    path: str
    functions: frozenset[str]

    def matches(self, file: str, function: str | None) -> bool:
        f = file.replace("\\", "/")
        if not (f.endswith(self.path) or f"/{self.path}" in f or f.startswith(self.path)):
            return False
        return not self.functions or (function or "") in self.functions


@dataclass(eq=False)
class Feature:
    """A feature of the map: its frame rules, and its entry (the model is built on first use: a
    run matches every feature's frames but reads the rest of only the few it finds)."""

    raw: dict[str, Any]
    rules: tuple[FrameRule, ...]
    loop_rules: tuple[FrameRule, ...]
    path: str  # the file it came from, for check messages
    _spec: FeatureSpec | None = None

    @property
    def id(self) -> str:
        return str(self.raw["id"])

    @property
    def messages(self) -> list[str]:
        return list(self.raw.get("messages") or [])

    @cached_property
    def message_patterns(self) -> tuple[regex.Pattern[str], ...]:
        """`messages` compiled once: `regex.search(text, ...)` looks its pattern up in the
        module's cache on every call, which cost more than the searches on short messages."""
        return tuple(regex.compile(p) for p in self.messages)

    @property
    def spec(self) -> FeatureSpec:
        if self._spec is None:
            self._spec = _constructed(self.raw)
        return self._spec


def _feature(raw: dict[str, Any], path: Path, spec: FeatureSpec | None = None) -> Feature:
    return Feature(raw, frame_rules(raw.get("frames") or []), frame_rules(raw.get("loop_frames") or []),
                   str(path), spec)


def frame_rules(frames: list[str]) -> tuple[FrameRule, ...]:
    out = []
    for f in frames:
        path, _, funcs = f.partition(":")
        out.append(FrameRule(path, frozenset(x for x in funcs.split("|") if x)))
    return tuple(out)


def load_feature_file(path: Path, validate: bool = True) -> list[Feature]:
    """A feature file's entries. Validated (errors name file, line and field) for `catalogue
    check` and the tests; a run of `analyze` reads the shipped, already checked map without
    pydantic's validation, whose first use (building the schema) cost more than the rest of the
    stage."""
    if not validate:
        import yaml

        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        return [_feature(d, path) for d in (raw or {}).get("features") or []]
    from triage.catalogue.load import _format_validation, read_yaml

    data, node = read_yaml(path)
    if not isinstance(data, dict):
        raise CatalogueError(f"{path}:1: a feature file is a mapping with engine, source and features")
    try:
        doc = FeatureFile.model_validate(data)
    except ValidationError as e:
        raise CatalogueError(_format_validation(path, node, e)) from None
    return [_feature(d, path, spec) for d, spec in zip(data["features"], doc.features, strict=True)]


def _constructed(d: dict[str, Any]) -> FeatureSpec:
    """A checked entry as the model, without validating it again (nested models built too)."""
    fields = dict(d)
    fields["switch"] = [Switch.model_construct(**{**x, "env": {str(k): str(v) for k, v in (x.get("env") or {}).items()}})
                        for x in d.get("switch") or []]
    fields["state"] = [Setting.model_construct(**x) for x in d.get("state") or []]
    return FeatureSpec.model_construct(**fields)


COMPILED = DATA.parent / "features.json"  # scripts/compile_features.py


def yaml_digest() -> str:
    """The digest of the map's YAML files, names and bytes: the compiled copy is used only
    while it was made from exactly these (an edited map is read from its YAML)."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(DATA.glob("*.yaml")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _compiled() -> dict[str, Any] | None:
    import json

    try:
        doc = json.loads(COMPILED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("digest") == yaml_digest() else None


@cache
def feature_map(validate: bool = False) -> dict[str, list[Feature]]:
    """Every shipped feature, by engine (the map is package data, read once per process);
    `validate` for `catalogue check` and the tests. A run of `analyze` reads the compiled JSON
    copy (parsing the YAML was 20-40 ms of a small log's run)."""
    out: dict[str, list[Feature]] = {}
    seen: dict[str, str] = {}
    compiled = None if validate else _compiled()
    for p in sorted(DATA.glob("*.yaml")):
        feats = ([_feature(d, p) for d in compiled["files"].get(p.name) or []] if compiled is not None
                 else load_feature_file(p, validate))
        for feat in feats:
            if feat.id in seen:
                raise CatalogueError(f"{p}: duplicate feature id {feat.id!r} (also in {seen[feat.id]})")
            seen[feat.id] = str(p)
            out.setdefault(str(feat.raw["engine"]), []).append(feat)
    return out
