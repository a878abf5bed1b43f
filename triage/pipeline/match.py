"""Catalogue signatures against the parsed log: findings, each with its reasons.

Per line, a keyword check decides which signatures' patterns run at all (the gitleaks
idea); every pattern runs under a timeout so that a pathological line or a user's
catastrophic pattern cannot hang the run. Conditions on the launch configuration and the
engine version raise or lower confidence, and a violated one says why.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from triage.catalogue.load import Catalogue, Signature
from triage.core.fingerprint import mask
from triage.core.models import Debug, Environment, Evidence, Failure, Finding
from triage.core.vocabulary import CONTENT_PREFIXES
from triage.pipeline.parse.lines import LogLine

PATTERN_TIMEOUT = 0.5  # seconds for one pattern on one line
MAX_EVIDENCE = 6
# What a setting name in a signature's `when` may be called in each engine's printed config,
# in the order they are tried; any other name is read as itself. The table in docs/catalogue.md
# lists the same (tests/test_catalogue_contract.py).
SETTING_ALIASES = {
    "attention_backend": ["attention_backend", "attn_backend", "VLLM_ATTENTION_BACKEND"],
    "tp_size": ["tp_size", "tensor_parallel_size"],
    "tensor_parallel_size": ["tensor_parallel_size", "tp_size"],
    "dp_size": ["dp_size", "data_parallel_size"],
    "quantization": ["quantization", "quantize"],
}


@dataclass
class MatchContext:
    """What the match stage reads of the parsed log, and the notes it leaves."""

    lines: list[LogLine]
    failures: list[Failure]
    env: Environment
    keyword_lines: set[int] | None = None  # from the scan; None: look in every line
    keep_generic: bool = False  # catalogue examples: show generic findings even when explained
    notes: list[str] = field(default_factory=list)


def _setting(settings: dict[str, Any], name: str) -> tuple[bool, Any]:
    for key in SETTING_ALIASES.get(name, [name]):
        if key in settings:
            return True, settings[key]
    return False, None


def _cond_holds(want: Any, have: Any) -> bool:
    wants = want if isinstance(want, list) else [want]
    hv = str(have).lower()
    for w in wants:
        ws = str(w).lower()
        if isinstance(w, bool) or ws in ("true", "false"):
            if hv in ("true", "1", "yes") and ws == "true" or hv in ("false", "0", "none", "no") and ws == "false":
                return True
            continue
        if fnmatch.fnmatchcase(hv, ws):
            return True
    return False


def _version_in(spec: str, version: str | None) -> bool | None:
    if not version:
        return None
    from packaging.specifiers import SpecifierSet  # only a log with a known version gets here
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version) in SpecifierSet(spec, prereleases=True)
    except InvalidVersion:
        return None


def _failure_for(line: int, failures: list[Failure]) -> tuple[int | None, bool]:
    """(index of the failure this line belongs to, whether only as a consequence)."""
    for i, f in enumerate(failures):
        lo = f.raw[0].line if f.raw else f.line
        hi = max(f.end_line or f.line, f.line)
        if lo <= line <= hi or any(e.line == line for e in f.raw):
            return i, False
    for i, f in enumerate(failures):
        if any(e.line == line for e in f.followed_by):
            return i, True
    return None, False


def match(cat: Catalogue, ctx: MatchContext) -> list[Finding]:
    by_kw = cat.keyword_index()
    if not by_kw:
        return []
    hits: dict[str, list[LogLine]] = defaultdict(list)
    timed_out: set[tuple[str, int]] = set()
    for ln in ctx.lines:
        if ctx.keyword_lines is not None and ln.no not in ctx.keyword_lines:
            continue
        if ln.message.startswith(CONTENT_PREFIXES):
            continue  # user text can say anything, an error message included
        # keywords can overlap ("illegal memory access" inside "an illegal memory access was ..."),
        # so a line that holds one is checked for all of them
        found = [k for k in by_kw if k in ln.text]
        if not found:
            continue
        sigs = {s.id: s for k in found for s in by_kw[k]}
        for sid, s in sigs.items():
            for i, p in enumerate(s.patterns):
                if (sid, i) in timed_out:
                    continue  # a pattern that blew its budget once is off for the rest of the run
                try:
                    ok = p.search(ln.text, timeout=PATTERN_TIMEOUT) is not None
                except TimeoutError:
                    timed_out.add((sid, i))
                    ctx.notes.append(f"pattern of {sid} timed out on line {ln.no} and was switched off for this log: "
                                     f"{p.pattern[:80]}")
                    ok = False
                if ok:
                    hits[sid].append(ln)
                    break
    findings = [_finding(cat.signatures[sid], lines, ctx) for sid, lines in hits.items()]
    if not ctx.keep_generic:
        findings = _drop_explained_generics(findings, cat)
    return findings


def finding_rank(failures: list[Failure]):  # noqa: ANN201 - a sort key
    """Findings, most useful first: those that explain a failure (a process-level one before a
    request-level one), then likely before unlikely, complete evidence before a signature whose
    defining evidence is missing, specific before generic, then confidence."""

    def key(f: Finding) -> tuple:
        fatal = f.failure is not None and f.failure < len(failures) and failures[f.failure].fatal
        return (f.failure is None, not fatal, f.unlikely is not None, f.incomplete is not None, f.generic,
                -f.confidence)

    return key


def _drop_explained_generics(findings: list[Finding], cat: Catalogue) -> list[Finding]:
    explained = {f.failure for f in findings
                 if f.failure is not None and f.unlikely is None and f.incomplete is None
                 and not cat.signatures[f.signature].spec.generic}
    return [f for f in findings if not (cat.signatures[f.signature].spec.generic and f.failure in explained)]


def _finding(sig: Signature, lines: list[LogLine], ctx: MatchContext) -> Finding:
    spec = sig.spec
    why: list[str] = [f"keyword {', '.join(repr(k) for k in spec.keywords)} and pattern matched line {lines[0].no}"
                      + (f" (and {len(lines) - 1} more)" if len(lines) > 1 else "")]
    conf = spec.confidence
    incomplete: str | None = None
    failure_idx, consequence = None, False
    for ln in lines:
        failure_idx, consequence = _failure_for(ln.no, ctx.failures)
        if failure_idx is not None and not consequence:
            break
    if failure_idx is not None and consequence:
        conf *= 0.6
        why.append(f"the match follows failure {failure_idx + 1} (a consequence, not its cause)")
    elif failure_idx is not None:
        conf += 0.05
        why.append(f"the match is part of failure {failure_idx + 1}")
        fail = ctx.failures[failure_idx]
        if spec.frames and fail.frames:
            names = [f"{fr.file}:{fr.function}" for fr in fail.frames]
            if any(any(want in n for n in names) for want in spec.frames):
                conf += 0.05
                why.append(f"traceback frames include {', '.join(spec.frames)}")
            else:
                conf -= 0.1
                why.append(f"no traceback frame matches {', '.join(spec.frames)}")
                incomplete = f"no traceback frame matches {', '.join(spec.frames)}"
    unlikely = None
    settings = ctx.env.settings
    for name, want in spec.when.items():
        present, have = _setting(settings, name)
        if present and str(have).lower() in ("auto", "none", "null", ""):
            why.append(f"condition {name}={want}: the log says {name}={have} (resolved at startup), not checked")
            continue
        if not present:
            why.append(f"condition {name}={want}: not printed in the log, not checked")
            continue
        if _cond_holds(want, have):
            conf += 0.05
            why.append(f"condition {name}={want} held ({name}={have})")
        else:
            conf *= 0.4
            unlikely = f"{name} is {have!r}, but this failure needs {want!r}"
            why.append(f"condition {name}={want} FAILED ({name}={have})")
    if spec.affects:
        inside = _version_in(spec.affects, ctx.env.version)
        if inside is True:
            conf += 0.03
            why.append(f"version {ctx.env.version} is in the affected range {spec.affects}")
        elif inside is False:
            conf *= 0.5
            unlikely = unlikely or f"version {ctx.env.version} is outside the affected range {spec.affects}"
            why.append(f"version {ctx.env.version} is outside the affected range {spec.affects}")
    if spec.engine not in ("any",) and ctx.env.engine and ctx.env.engine != spec.engine:
        conf *= 0.6
        why.append(f"signature is for {spec.engine}, the log looks like {ctx.env.engine}")
        incomplete = incomplete or f"a {spec.engine} signature, but the log is {ctx.env.engine}'s"
    evidence: list[Evidence] = []
    seen: set[str] = set()
    for ln in lines:
        key = mask(ln.message)
        if key in seen:
            continue
        seen.add(key)
        evidence.append(Evidence(line=ln.no, text=ln.text))
        if len(evidence) >= MAX_EVIDENCE:
            break
    debug = None
    if spec.debug is not None:
        debug = Debug(env=[f"{k}={v}" for k, v in spec.debug.env.items()], note=spec.debug.note)
    return Finding(
        signature=spec.id, title=spec.title, confidence=round(max(0.01, min(conf, 0.99)), 2),
        severity=spec.severity, engine=spec.engine, explanation=spec.explanation.strip(),
        evidence=evidence, failure=failure_idx, fixed_in=spec.fixed_in, fix_pr=spec.fix_pr, affects=spec.affects,
        open_issue=spec.open_issue, no_upstream_fix=spec.no_upstream_fix,
        references=list(spec.references), debug=debug, why=why, unlikely=unlikely, generic=spec.generic,
        incomplete=incomplete,
    )
