"""Workarounds derived from the feature map: turn off the optional feature the failing stack
runs through.

For each process-level failure, the frames are read innermost first; each frame of an optional
feature of this engine (catalogue/features.py) names that feature once. A feature whose printed
setting says it was off is listed as already off and not offered; one whose setting says on is
offered; one whose setting the log does not print is offered with the note that it could not be
confirmed on (the stack through its code is the evidence that it ran). The switch is spelled for
the log's release: a feature with no spelling for that release is listed, not offered. A stack
through no optional feature gets nothing.

Ranking (`rank`): below every workaround of a specific signature's finding, above a generic
signature's advice (a wrapper such as "Scheduler hit an exception" says nothing about the cause;
the frames do).
"""

from __future__ import annotations

from typing import Any

from triage.catalogue.features import Feature, Switch, feature_map
from triage.catalogue.flags import FlagIndex, flag_index, flag_name
from triage.core.models import Failure, FeatureOnStack, Finding, Frame, Report, Workaround
from triage.pipeline.match import PATTERN_TIMEOUT, SETTING_ALIASES

_UNSET = {None, "", "none", "None", "auto"}
# engines whose failures can also run through the layers below them
_SHARED = ("nccl",)


def _norm(v: Any) -> str:  # noqa: ANN401 - a printed setting's value
    return str(v).strip().strip("'\"").lower()


def _where(fr: Frame) -> str:
    at = f":{fr.line}" if fr.line is not None else ""
    return f"{fr.file}{at} in {fr.function or '?'}"


def features_on_stack(failure: Failure, feats: list[Feature]) -> list[tuple[Feature, str]]:
    """(feature, implicating frame or line) for each feature the failure shows, innermost first."""
    out: list[tuple[Feature, str]] = []
    seen: set[str] = set()
    for i, fr in enumerate(reversed(failure.frames)):
        for feat in feats:
            if feat.id in seen:
                continue
            if any(r.matches(fr.file, fr.function) for r in feat.rules) or \
                    (i == 0 and any(r.matches(fr.file, fr.function) for r in feat.loop_rules)):
                seen.add(feat.id)
                out.append((feat, _where(fr)))
    texts = [failure.message, *(e.text for e in failure.raw[-60:])]
    for feat in feats:
        if feat.id in seen or not feat.messages:
            continue
        hit = _message_hit(feat, texts, failure)
        if hit is not None:
            seen.add(feat.id)
            out.append((feat, hit))
    return out


def _message_hit(feat: Feature, texts: list[str], failure: Failure) -> str | None:
    for p in feat.message_patterns:
        for i, t in enumerate(texts):
            try:
                m = p.search(t, timeout=PATTERN_TIMEOUT)
            except TimeoutError:
                m = None
            if m:
                line = failure.line if i == 0 else failure.raw[-60:][i - 1].line
                return f"line {line}: {t.strip()[:160]}"
    return None


def feature_state(feat: Feature, settings: dict[str, Any], version: str | None = None) -> tuple[str, str]:
    """('on' | 'off' | 'unconfirmed', how it was read) from the printed settings. Any setting that
    says off wins: one feature can be turned off by several settings (SGLang's CUDA graphs by
    disable_cuda_graph or, from 0.5.14, cuda_graph_backend_decode=disabled)."""
    on: str | None = None
    for s in feat.spec.state:
        # the same names `when` reads: a setting printed under another name by some releases
        for key in SETTING_ALIASES.get(s.setting, [s.setting]):
            if key not in settings or settings[key] in _UNSET or _norm(settings[key]) in _UNSET:
                continue
            v = _norm(settings[key])
            said = f"{key}={settings[key]}"
            if s.off_if and v in {_norm(x) for x in s.off_if}:
                return "off", said
            if s.on_if and v in {_norm(x) for x in s.on_if}:
                on = on or said
            elif s.on_if and not s.off_if:  # only "on" values listed: any other value is off
                return "off", said
            break  # the first name printed is the setting's value
    if on is not None:
        return "on", on
    default = _default_on(feat, version)
    if default is not None:
        return "on", default
    names = ", ".join(s.setting for s in feat.spec.state)
    why = f"the log does not print {names}" if names else "no printed setting shows it"
    return "unconfirmed", f"could not confirm it is on ({why}); the failing stack runs through its code"


def _default_on(feat: Feature, version: str | None) -> str | None:
    """The feature is on by default in this release and the log prints no setting that changes it."""
    v = _version(version)
    if v is None:
        return None
    from packaging.specifiers import SpecifierSet

    for s in feat.spec.state:
        if s.default_on and SpecifierSet(s.default_on).contains(v, prereleases=True):
            return f"{s.setting} is not printed; on by default in {version} (default from {s.default_on})"
    return None


def _version(version: str | None) -> Any:  # noqa: ANN401 - a packaging Version, imported lazily
    from packaging.version import InvalidVersion, Version

    if not version:
        return None
    try:
        return Version(version.split("+")[0].lstrip("v"))
    except InvalidVersion:
        return None


def switch_for(feat: Feature, version: str | None, idx: FlagIndex | None) -> tuple[Switch | None, str | None]:
    """The spelling of the switch for this release, and a note; (None, why) when none exists."""
    from packaging.specifiers import SpecifierSet

    switches = feat.spec.switch
    v = _version(version)
    if v is None:
        sw = switches[-1]  # the newest spelling, and the others in the note
        if not sw.versions or len(switches) == 1:
            return sw, None
        older = "; ".join(f"{s.versions}: {_spelling(s)}" for s in switches[:-1])
        return sw, f"spelled for releases {sw.versions}; the log does not print the engine version (older releases {older})"
    for sw in reversed(switches):
        if sw.versions is None or SpecifierSet(sw.versions).contains(v, prereleases=True):
            notes = []
            for f in sw.flags + sw.remove_flags:
                status, detail = idx.status(f, str(v)) if idx is not None else ("ok", None)
                if status in ("removed", "not-yet"):  # the map's range and the flag history disagree
                    return None, detail
                if status == "deprecated" and detail:  # still accepted: say what replaces it
                    notes.append(detail)
            return sw, "; ".join(notes) or None
    spans = "; ".join(f"{' '.join(s.flags + s.remove_flags) or ' '.join(s.env)} in {s.versions}" for s in switches)
    return None, f"no switch for release {version} ({spans})"


def _spelling(sw: Switch) -> str:
    parts = [*(f"add {f}" for f in sw.flags), *(f"remove {f}" for f in sw.remove_flags),
             *(f"set {k}={v}" for k, v in sw.env.items()), *([sw.action] if sw.action else [])]
    return ", ".join(parts)


def _by_line(where: str) -> bool:
    """Implicated by a line of the failure (NCCL's transports), not by a stack frame."""
    return where.startswith("line ")


def _workaround(feat: Feature, sw: Switch, where: str, state: str, reason: str, note: str | None) -> Workaround:
    notes = [f"derived from the failure's own line: {where} names {feat.spec.title}" if _by_line(where)
             else f"derived from the stack: {where} is {feat.spec.title}"]
    notes.append(reason if state == "unconfirmed" else f"on in this run ({reason})")
    if sw.note:
        notes.append(sw.note)
    if note:
        notes.append(note)
    return Workaround(
        id=f"{feat.id}-off", title=f"Turn off {feat.spec.title}", flags=list(sw.flags),
        remove_flags=list(sw.remove_flags), env=[f"{k}={v}" for k, v in sw.env.items()], action=sw.action,
        cost=" ".join(feat.spec.cost.split()), note="; ".join(notes), source="feature-switch",
        feature=feat.id, frame=where, auto=sw.auto,
    )


def derive(report: Report) -> None:
    """Fill each process-level failure's `features` and `switches`."""
    env = report.environment
    if not any(f.fatal and (f.frames or f.message or f.raw) for f in report.failures):
        return  # a healthy log (or only request-level errors): the map is not even read
    fmap = feature_map()
    feats = [*(fmap.get(env.engine, []) if env.engine else []), *(f for e in _SHARED for f in fmap.get(e, []))]
    if not feats:
        return
    idx = flag_index(env.engine) if env.engine else None
    for failure in report.failures:
        if not failure.fatal:
            continue
        for feat, where in features_on_stack(failure, feats):
            own = feat.spec.engine == env.engine
            state, reason = feature_state(feat, env.settings, env.version if own else None)
            if _by_line(where):
                reason = reason.replace("the failing stack runs through its code", "the failure's own line names it")
            row = FeatureOnStack(feature=feat.id, title=feat.spec.title, frame=where, state=state, reason=reason)
            failure.features.append(row)
            if state == "off":
                row.reason = f"already off ({reason}); not offered"
                continue
            # a layer under the engine (NCCL) has its own releases: the engine's version says nothing
            sw, note = switch_for(feat, env.version if own else None, idx if own else None)
            if sw is None:
                row.state, row.reason = "no-switch", note or "no switch for this release"
                continue
            failure.switches.append(_workaround(feat, sw, where, state, reason, note))


def _names(w: Workaround) -> set[str]:
    return {flag_name(f) for f in w.flags + w.remove_flags} | {e.split("=", 1)[0] for e in w.env}


def rank(finding: Finding, switches: list[Workaround]) -> None:
    """Put a failure's derived switches into its finding's workarounds: after a specific
    signature's, before a generic one's. A switch the finding already offers is not repeated."""
    ahead: list[Workaround] = []  # a generic finding's: the stack's switches, innermost first
    for sw in switches:
        names = _names(sw)
        same = next((w for w in finding.workarounds if names and names <= _names(w)), None)
        if same is None:
            ahead.append(sw)
            continue
        # the catalogue already offers it: keep its entry (its cost, its id) and say the stack
        # agrees; under a generic signature it moves up to where the switch would stand
        said = (f"the failure's own line names it ({sw.frame})" if _by_line(sw.frame or "")
                else f"the failing stack runs through it ({sw.frame})")
        if said.split(" (")[0] not in (same.note or ""):
            same.note = (same.note + "; " if same.note else "") + said
        if finding.generic and same.status == "recommended":
            finding.workarounds.remove(same)
            ahead.append(same)
    if finding.generic:
        finding.workarounds[:0] = ahead
    else:
        finding.workarounds.extend(ahead)
