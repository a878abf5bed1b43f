"""Does each piece of advice fit the server the log shows? One check every advice source passes.

A tired engineer follows the first instruction of a report, so that instruction must not be
contradicted by the log it came from. Every workaround offered (the catalogue's, the engine's
own printed hints, and any derived by later work) goes through `fit_report` once the recommend
stage has spelled it for this server. A workaround that fails a rule keeps its place in the
report with the reason, marked `not-applicable`, and is never the "Do now":

- phase: a workaround declared for some phases (`phases:` in the catalogue) is not offered for a
  failure in another (a longer process-group timeout does not help a hang after hours of serving);
- release range: a flag spelling this engine version does not have yet (or no longer has), or a
  workaround whose `versions:` range leaves this version out (`--max-model-len auto`: vLLM 0.14+);
- values: a value compared with the running one as a number; a "lower X" remedy proposes a value
  below the running one (the engine's "e.g., 0.8 or 0.7" picks the example below it), never the
  same value; a feature switch the server already has that way is already applied;
- unresolved settings: `auto` / `None` is decided at start-up, so nothing is claimed from it;
- self-reference: a diagnosis step that points at a line the report already shows as a failure.
"""

from __future__ import annotations

import re
from typing import Any

import regex

from triage.catalogue.flags import FlagIndex, flag_index, flag_name
from triage.catalogue.load import Catalogue
from triage.catalogue.models import WorkaroundSpec
from triage.core.models import Failure, Report, Workaround
from triage.pipeline.match import PATTERN_TIMEOUT

NOT_APPLICABLE = "not-applicable"
APPLIED = "\0applied:"  # _value_rule's answer for a value the server already runs (not a misfit)

# the phase machine's names (parse/timeline.py) in the three a workaround can declare
PHASE_OF = {"starting": "start-up", "loading weights": "start-up", "allocating KV cache": "start-up",
            "warming up": "start-up", "capturing CUDA graphs": "capture", "serving": "serving"}
# values a server resolves at start-up: the log does not say what they became
UNRESOLVED = {"auto", "none", "null", ""}
_LOWER = re.compile(r"(?i)\b(?:smaller|lower|decrease|reduce|less)\b")
_HIGHER = re.compile(r"(?i)\b(?:larger|higher|increase|raise|more|bigger)\b")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_EXAMPLES = re.compile(r"(?i)\(e\.g\.,?\s*([^)]*)\)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]+")


def unresolved(value: Any) -> bool:  # noqa: ANN401 - a printed setting of any type
    return value is None or (isinstance(value, str) and value.strip().lower() in UNRESOLVED)


def _number(value: Any) -> float | None:  # noqa: ANN401 - a printed setting of any type
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return float(value)
    return None


def _on(value: Any) -> bool | None:  # noqa: ANN401
    """A switch's state as the config printed it; None when it is not a switch value."""
    if value in (True, "True", "true", 1):
        return True
    if value in (False, "False", "false", 0, None):
        return False
    return None


def setting(flag: str, idx: FlagIndex | None, settings: dict[str, Any]) -> tuple[bool, Any]:
    """(printed?, value) of the running setting behind `flag`."""
    info = idx.get(flag) if idx is not None else None
    dest = info.dest if info is not None else flag_name(flag).lstrip("-").replace("-", "_")
    if dest in settings:
        return True, settings[dest]
    return False, None


def failure_phase(report: Report, failure: Failure | None) -> str | None:
    """start-up, capture or serving: from the phase machine, else from load lines before the
    crash (a server printing running requests was serving); None when the log does not say."""
    if failure is None:
        return None
    phase = PHASE_OF.get(failure.phase or "")
    if phase is not None:
        return phase
    first = next((f for f in report.failures if f.fatal), None)
    last = report.timeline.last_load
    if failure is first and last is not None and (last.running or 0) > 0 and last.line < failure.line:
        return "serving"
    return None


def direction(w: Workaround, spec: WorkaroundSpec | None) -> str | None:
    """'lower' or 'higher' when the advice moves a value one way, from the catalogue's value rule
    or the advice's own words."""
    if spec is not None and spec.value is not None and spec.value.from_setting:
        step = (spec.value.add or 0.0) + ((spec.value.times or 1.0) - 1.0)
        if step:
            return "lower" if step < 0 else "higher"
    words = w.action if w.source != "catalogue" else w.title
    if not words:
        return None
    if _LOWER.search(words):
        return "lower"
    if _HIGHER.search(words):
        return "higher"
    return None


def _examples(text: str | None, flag: str) -> list[float]:
    """The values an engine's hint gives as examples for `flag`: the "(e.g., 0.8 or 0.7)" after
    its name (one hint can name two flags, each with its own examples)."""
    at = text.find(flag_name(flag)) if text else -1
    if text is None or at < 0:
        return []
    m = _EXAMPLES.search(text, at)
    nxt = _FLAG.search(text, at + len(flag_name(flag)))
    if m is None or (nxt is not None and nxt.start() < m.start()):
        return []  # the next example belongs to another flag
    return [float(x) for x in _NUMBER.findall(m.group(1))]


def _fmt(v: float, like: Any) -> str:  # noqa: ANN401
    if isinstance(like, int) and not isinstance(like, bool) or (float(v).is_integer() and "." not in str(like)):
        return str(int(round(v)))
    return f"{v:.4f}".rstrip("0").rstrip(".")


def _value_rule(w: Workaround, spec: WorkaroundSpec | None, idx: FlagIndex | None,
                settings: dict[str, Any]) -> str | None:
    """Numeric values against the running configuration. May change a hint's example value to
    the one below (or above) the running value; returns why the advice does not fit, if so."""
    way = direction(w, spec)
    for i, f in enumerate(w.flags):
        parts = f.split(None, 1) if "=" not in f.split()[0] else f.split("=", 1)
        if len(parts) < 2:
            continue
        want = _number(parts[1])
        present, have = setting(parts[0], idx, settings)
        if want is None or not present or unresolved(have):
            continue
        cur = _number(have)
        if cur is None:
            continue
        info = idx.get(parts[0]) if idx is not None else None
        name = info.dest if info is not None else flag_name(parts[0]).lstrip("-").replace("-", "_")
        if way is None:
            if want == cur:  # the very value the server runs: applied already, not a change to make
                return f"{APPLIED}{name}={have}"
            continue
        wrong = want >= cur if way == "lower" else want <= cur
        if not wrong:
            continue
        # the engine's examples ("e.g., 0.8 or 0.7"): the first one past the running value
        better = [x for x in _examples(w.action, parts[0]) if (x < cur if way == "lower" else x > cur)]
        if w.source != "catalogue" and better:
            pick = max(better) if way == "lower" else min(better)
            w.flags[i] = f"{parts[0]} {_fmt(pick, have)}"
            w.note = _join(w.note, f"value {_fmt(pick, have)}: the engine's example {way} than the running "
                           f"{name}={have}")
            continue
        return (f"it sets {name} to {parts[1]}, but the server already runs {name}={have}; "
                f"a {way} value is what this advice asks for")
    return None


def _switch_rule(w: Workaround, idx: FlagIndex | None, settings: dict[str, Any]) -> str | None:
    """An engine hint that turns off a feature the server runs without (or on one it has on):
    already so. Only resolved switch values count."""
    if w.source == "catalogue" or not (w.flags or w.remove_flags) or idx is None:
        return None
    said = []
    for f, want_on in [*((f, False) for f in w.remove_flags), *((f, True) for f in w.flags)]:
        info = idx.get(f)
        present, have = setting(f, idx, settings)
        if info is None or info.takes_value is not False or not present or _on(have) is not want_on:
            return None
        said.append(f"{info.dest}={have}")
    return ", ".join(said) if said else None


def _release_rule(w: Workaround, spec: WorkaroundSpec | None, idx: FlagIndex | None,
                  engine: str | None, version: str | None) -> str | None:
    if version is None or engine is None:
        return None
    why = _outside_release(w, spec, idx, engine, version)
    return f"{why}; this server runs {version}" if why else None


def _outside_release(w: Workaround, spec: WorkaroundSpec | None, idx: FlagIndex | None,
                     engine: str, version: str) -> str | None:
    """Why `version` rules the workaround out (its `versions:` range, or a flag that release
    does not have), or None."""
    if spec is not None and spec.versions and spec.engine == engine:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version

        try:
            inside = Version(version.lstrip("v")) in SpecifierSet(spec.versions)
        except InvalidVersion:
            inside = True
        if not inside:
            return f"needs {engine} {spec.versions}"
    if idx is None or (spec is not None and spec.engine != engine):
        return None
    for f in [*w.flags, *w.remove_flags]:
        status, detail = idx.status(f, version)
        if status == "not-yet" or (status == "removed" and f in w.flags):
            return detail
    return None


def _line_release_rule(w: Workaround, spec: WorkaroundSpec | None, idx: FlagIndex | None,
                       engine: str | None, spans: str) -> str | None:
    """The release rule at each end of the ranges the traceback's line numbers allow: only when
    every one of them rules the workaround out (ranges are monotonic in a flag's life)."""
    if engine is None:
        return None
    ends = sorted({v.strip() for span in spans.split(",") for v in span.split("-", 1) if v.strip()})
    reasons = [_outside_release(w, spec, idx, engine, v) for v in ends]
    if not reasons or any(r is None for r in reasons):
        return None
    return f"{reasons[0]}; the traceback's line numbers place this server at {engine} {spans}"


def _points_rule(spec: WorkaroundSpec | None, report: Report) -> str | None:
    if spec is None or not spec.points_at:
        return None
    for n, f in enumerate(report.failures, 1):
        # its own lines, and the wrappers folded into it (shown under it as its consequences)
        shown = [(f.line, f.message), *((e.line, e.text) for e in f.raw[:3]),
                 *((c.line, c.message) for c in f.consequences)]
        for line, text in shown:
            try:
                hit = regex.search(spec.points_at, text, timeout=PATTERN_TIMEOUT)
            except TimeoutError:
                hit = None
            if hit:
                return f"it points at a line the report already shows (line {line}, with failure {n})"
    return None


def _join(a: str | None, b: str) -> str:
    return f"{a}; {b}" if a else b


def judge(w: Workaround, spec: WorkaroundSpec | None, report: Report, failure: Failure | None,
          idx: FlagIndex | None) -> None:
    """Mark one workaround not applicable (with the reason) when the log contradicts it."""
    if w.status == NOT_APPLICABLE:
        return
    env = report.environment
    why = None
    phase = failure_phase(report, failure)
    if spec is not None and spec.phases and phase is not None and phase not in spec.phases:
        while_ = failure.phase if failure is not None and failure.phase else "serving"
        why = f"it helps only during {' or '.join(spec.phases)}; this failure happened while {while_}"
    mine = spec is None or spec.engine == env.engine
    why = why or _release_rule(w, spec, idx if mine else None, env.engine, env.version)
    if why is None and env.version is None and env.versions_by_line:
        why = _line_release_rule(w, spec, idx if mine else None, env.engine, env.versions_by_line)
    why = why or _points_rule(spec, report)
    if why is None and mine and w.status == "recommended":
        why = _value_rule(w, spec, idx, env.settings)
        off = _switch_rule(w, idx, env.settings) if why is None else None
        if why is not None and why.startswith(APPLIED):
            off, why = why[len(APPLIED):], None
        if off is not None:
            w.status = "already-applied"
            w.note = f"already in the running configuration ({off}); it did not prevent this failure"
            return
    if why is not None:
        w.status = NOT_APPLICABLE
        w.note = _join(f"not offered: {why}", w.note) if w.note else f"not offered: {why}"


_CONFLICT = re.compile(r"(?:; )?conflicts with (\S+) on \S+")


def _unconflict(recs: list[Workaround]) -> None:
    """A workaround marked conflicting only with one that is not offered conflicts with nothing."""
    gone = {w.id for w in recs if w.status == NOT_APPLICABLE}
    for w in recs:
        if w.status == "conflicting" and w.note and (ids := _CONFLICT.findall(w.note)) and set(ids) <= gone:
            w.status = "recommended"
            w.note = _CONFLICT.sub("", w.note).strip("; ") or None


def fit_report(report: Report, cat: Catalogue) -> None:
    """Every workaround of every finding, and every hint printed with a failure, checked against
    what the log shows; the ones that do not fit sorted after those that do."""
    env = report.environment
    idx = flag_index(env.engine) if env.engine else None
    for x in report.findings:
        failure = report.failures[x.failure] if x.failure is not None and x.failure < len(report.failures) else None
        for w in x.workarounds:
            judge(w, cat.workarounds.get(w.id) if w.source == "catalogue" else None, report, failure, idx)
        _unconflict(x.workarounds)
        x.workarounds.sort(key=lambda w: (w.status == NOT_APPLICABLE, w.status == "already-applied"))
    for f in report.failures:
        for h in f.hints:
            if h.source == "engine-hint":
                judge(h, None, report, f, idx)
        for w in f.switches:  # derived from the feature map: the same rules as any advice
            if w.status == "recommended":
                judge(w, None, report, f, idx)
