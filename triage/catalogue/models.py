"""Pydantic models of catalogue entries: what a signature and a workaround may say."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

ENGINES = ("sglang", "vllm", "trtllm", "tgi", "triton", "lmdeploy", "any")
ID_RX = r"^[a-z0-9][a-z0-9.-]*[a-z0-9]$"


ENV_NAME_RX = r"^[A-Za-z_][A-Za-z0-9_]*$"


def _env_strings(v: Any) -> Any:
    """`env:` values are strings in the environment; YAML may read `1` or `true`. A name must be
    a variable name: it is printed into launch commands (`NAME=value python ...`), where any
    other text would be a command of its own."""
    if not isinstance(v, dict):
        return v
    import re

    for k in v:
        if not re.match(ENV_NAME_RX, str(k)):
            raise ValueError(f"env: {str(k)!r} is not an environment variable name (letters, digits, _)")
    return {str(k): str(x) for k, x in v.items()}


def _pep440(v: str | None) -> str | None:
    """A release range (`affects:`, `versions:`) must be a PEP 440 specifier."""
    if v is not None:
        # imported here: a run that reads the catalogue from its cache never validates
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(v)
        except InvalidSpecifier:
            raise ValueError(f"{v!r} is not a PEP 440 version specifier") from None
    return v


class Strict(BaseModel):
    # the schema is built on first validation: a run that reads the catalogue from its cache
    # never validates, so it never pays for building it
    model_config = ConfigDict(extra="forbid", frozen=False, defer_build=True)


class FlagChange(Strict):
    add: list[str] = Field(default_factory=list)
    remove: list[str] = Field(default_factory=list)

    @field_validator("add", "remove")
    @classmethod
    def _flags(cls, v: list[str]) -> list[str]:
        for f in v:
            if not f.startswith("-"):
                raise ValueError(f"{f!r} is not a flag (flags start with '-')")
        return v


class ValueRule(Strict):
    """How the value of the first added flag is computed for the server at hand."""

    from_message: str | None = None  # regex with one group, searched in the failure's lines
    from_setting: str | None = None  # a printed launch setting (dest name) to start from
    add: float | None = None
    times: float | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _one_source(self) -> ValueRule:
        if not (self.from_message or self.from_setting):
            raise ValueError("a value rule needs from_message or from_setting")
        if self.from_message:
            import regex

            from triage.catalogue.expansion import PatternTooLarge, compile_checked

            try:  # a catalogue's regex like its patterns: sized before compiling
                if compile_checked(self.from_message).groups != 1:
                    raise ValueError("from_message must have exactly one capturing group")
            except regex.error as e:
                raise ValueError(f"from_message is not a valid regex: {e}") from None
            except PatternTooLarge as e:
                raise ValueError(f"from_message: {e}") from None
        return self


class WorkaroundSpec(Strict):
    id: str = Field(pattern=ID_RX)
    engine: Literal["sglang", "vllm", "trtllm", "tgi", "triton", "lmdeploy", "any", "docker"]
    title: str = Field(min_length=3)
    flags: FlagChange = Field(default_factory=FlagChange)
    env: dict[str, str] = Field(default_factory=dict)
    action: str | None = None
    cost: str = Field(min_length=10)
    value: ValueRule | None = None
    # may `triage run --retry` apply it unattended? None: the entry does not say (entries from
    # before the field, or from other catalogues), which counts as no; `catalogue check` flags it
    auto: bool | None = None
    # the phases of the server in which the change can help (a longer process-group timeout only
    # helps a rank that is slow to start, not a hang after hours of serving); empty: any phase
    phases: list[Literal["start-up", "capture", "serving"]] = Field(default_factory=list)
    # the engine releases that accept this spelling (a PEP 440 specifier: `--max-model-len auto`
    # is vLLM >= 0.14 though the flag is older); outside it the workaround is not offered
    versions: str | None = None
    # a diagnosis step that sends the reader to a line ("scroll up to the first 'Scheduler hit an
    # exception'"): the regex of that line; when the report already shows a failure whose lines
    # match it, the step points at what the reader is looking at and is not offered
    points_at: str | None = None

    _env = field_validator("env", mode="before")(classmethod(lambda cls, v: _env_strings(v)))

    _versions = field_validator("versions")(classmethod(lambda cls, v: _pep440(v)))

    @field_validator("points_at")
    @classmethod
    def _points_at(cls, v: str | None) -> str | None:
        if v is not None:
            import regex

            from triage.catalogue.expansion import PatternTooLarge, compile_checked

            try:  # a catalogue's regex on log text: sized before compiling, like the patterns
                compile_checked(v)
            except regex.error as e:
                raise ValueError(f"points_at is not a valid regex: {e}") from None
            except PatternTooLarge as e:
                raise ValueError(f"points_at: {e}") from None
        return v

    @model_validator(mode="after")
    def _does_something(self) -> WorkaroundSpec:
        if not (self.flags.add or self.flags.remove or self.env or self.action):
            raise ValueError("a workaround needs flags, env or an action")
        if self.auto and (self.action or not (self.flags.add or self.flags.remove or self.env)):
            # an action is a step outside the launch command (drain a node, reinstall): never unattended
            raise ValueError("auto: true is only for a workaround that changes flags or env and has no action")
        return self

    @property
    def automatic(self) -> bool:
        return self.auto is True


class DebugSpec(Strict):
    env: dict[str, str] = Field(default_factory=dict)
    note: str | None = None

    _env = field_validator("env", mode="before")(classmethod(lambda cls, v: _env_strings(v)))


class Examples(Strict):
    match: list[str] = Field(min_length=1)
    no_match: list[str] = Field(min_length=1)


class SignatureSpec(Strict):
    id: str = Field(pattern=ID_RX)
    title: str = Field(min_length=5)
    engine: Literal["sglang", "vllm", "trtllm", "tgi", "triton", "lmdeploy", "any"]
    layer: str | None = None
    severity: Literal["crash", "hang", "degraded", "warning"]
    confidence: float = Field(default=0.8, ge=0.05, le=1.0)
    # a wrapper or symptom many causes share ("Scheduler hit an exception", "EngineCore
    # encountered a fatal error"): reported only when no specific signature explains the failure
    generic: bool = False
    keywords: list[str] = Field(min_length=1)
    patterns: list[str] = Field(min_length=1)
    frames: list[str] = Field(default_factory=list)
    when: dict[str, str | int | float | bool | list[str | int | float | bool]] = Field(default_factory=dict)
    affects: str | None = None
    fixed_in: str | None = None
    # the merged pull request that fixed it (fixed_in is then the first release that holds it)
    fix_pr: str | None = None
    # where upstream has not fixed it: the open thread that tracks it
    open_issue: str | None = None
    # a failure no upstream release will fix (a configuration, hardware or environment fault):
    # why, in one sentence; the proper fix is then the workaround itself
    # (spelled `not_a_bug` in the first catalogue that had it: still read)
    no_upstream_fix: str | None = Field(default=None, validation_alias=AliasChoices("no_upstream_fix", "not_a_bug"))
    # a crash with no launch-command change for an engine it covers says why here
    no_workaround: str | None = None
    explanation: str = Field(min_length=40)
    workarounds: list[str] = Field(min_length=1)
    debug: DebugSpec | None = None
    references: list[str] = Field(min_length=1)
    examples: Examples

    @field_validator("keywords")
    @classmethod
    def _keywords(cls, v: list[str]) -> list[str]:
        for k in v:
            if len(k.strip()) < 4:
                raise ValueError(f"keyword {k!r} is too short to prefilter with (4 characters at least)")
        return v

    _specifier = field_validator("affects")(classmethod(lambda cls, v: _pep440(v)))

    @field_validator("fixed_in", mode="before")
    @classmethod
    def _fixed_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

    @field_validator("open_issue", "fix_pr")
    @classmethod
    def _https(cls, v: str | None, info: Any) -> str | None:
        if v is not None and not v.startswith("https://"):
            raise ValueError(f"{info.field_name} {v!r} is not an https URL")
        return v

    @field_validator("references")
    @classmethod
    def _refs(cls, v: list[str]) -> list[str]:
        for r in v:
            if not r.startswith("https://"):
                raise ValueError(f"reference {r!r} is not an https URL")
        return v
