"""Workarounds that fit the server that crashed, and the patched launch command.

For each finding: the catalogue's workarounds for this engine, each checked against the
running configuration (already applied?), the engine version (does the flag exist in it,
was it renamed?), and the cost measured from the same log where it can be.
"""

from __future__ import annotations

import shlex
from typing import Any

import regex

from triage.catalogue.flags import FlagIndex, flag_index, flag_name
from triage.catalogue.load import Catalogue
from triage.catalogue.models import ValueRule, WorkaroundSpec
from triage.core.load_summary import LoadSummary
from triage.core.models import Environment, Finding, Report, Workaround
from triage.core.shellwords import split_command
from triage.pipeline.fit import fit_report, unresolved
from triage.pipeline.match import PATTERN_TIMEOUT
from triage.pipeline.prefill import size_text
from triage.pipeline.switches import derive as derive_switches
from triage.pipeline.switches import rank as rank_switches

LAUNCH = {"sglang": "python -m sglang.launch_server", "vllm": "vllm serve"}
# settings printed in the config that are not launch flags (or are positional)
_SKIP_SETTINGS = {"model_tag", "launch_command", "dispatch_function", "subparser", "func"}
# Values SGLang resolves at startup and prints as if they had been given: leaving them out of
# the rebuilt command gives the same server.
_RESOLVED_FROM = {"tokenizer_path": "model_path", "served_model_name": "model_path"}
_RESOLVED_SKIP = {"random_seed", "device"}


def _applies_to(w: WorkaroundSpec, engine: str | None) -> bool:
    if w.engine in ("any", "docker"):
        return True
    return engine is None or w.engine == engine


def _setting_for(flag: str, idx: FlagIndex | None, settings: dict[str, Any]) -> tuple[bool, Any]:
    dest = None
    if idx is not None:
        info = idx.get(flag)
        if info is not None:
            dest = info.dest
    dest = dest or flag_name(flag).lstrip("-").replace("-", "_")
    if dest in settings:
        return True, settings[dest]
    return False, None


def _flag_value(spec: str) -> str | None:
    s = spec.strip()
    if "=" in s.split()[0]:
        return s.split()[0].split("=", 1)[1]
    parts = s.split(None, 1)
    return parts[1] if len(parts) > 1 else None


def _already_applied(w: WorkaroundSpec, idx: FlagIndex | None, settings: dict[str, Any],
                     flags_add: list[str] | None = None) -> str | None:
    """Whether the running configuration already has this change. `flags_add`: the flags as
    offered (a value computed for this server, not the catalogue's example value); a value the
    server resolves at start-up (`auto`, None) says nothing either way."""
    if not settings or not (w.flags.add or w.flags.remove) or w.env:
        return None
    reasons = []
    for f in w.flags.add if flags_add is None else flags_add:
        present, have = _setting_for(f, idx, settings)
        if not present or (_flag_value(f) is not None and unresolved(have)):
            return None
        want = _flag_value(f)
        if want is None:
            if have not in (True, "True", "true", 1):
                return None
        elif want.startswith("<") or str(have).lower() != want.lower():
            return None
        reasons.append(f"{flag_name(f)}={have}")
    for f in w.flags.remove:
        present, have = _setting_for(f, idx, settings)
        if present and have in (True, "True", "true", 1):
            return None
        info = idx.get(f) if idx is not None else None
        if present and unresolved(have) and (info is None or info.takes_value is not False):
            return None  # `--kv-cache-dtype auto`: which dtype it became is not in the log
        reasons.append(f"{flag_name(f)} is off")
    return ", ".join(reasons) if reasons else None


def _respell(flag: str, idx: FlagIndex | None, version: str | None) -> tuple[str, str | None]:
    """The spelling of `flag` this engine version takes, with a note when it differs."""
    if idx is None:
        return flag, None
    status, detail = idx.status(flag, version)
    info = idx.get(flag)
    if status == "deprecated" and info and info.replacement:
        if version:
            repl = info.replacement.replace("{decode,prefill}", "decode")
            return repl, f"{detail}; this server ({version}) takes {repl}"
        return flag, detail
    if status == "removed":
        info = idx.get(flag)
        if version and info is not None and info.replacement:
            return info.replacement, detail
        return flag, detail
    if status == "not-yet":
        return flag, f"{detail}; this server runs {version}"
    return flag, None


def _measured_cost(w: WorkaroundSpec, load: LoadSummary | None, env: Environment) -> str | None:
    flags = {flag_name(f) for f in w.flags.add + w.flags.remove}
    if load is None:
        return None
    if flags & {"--disable-radix-cache", "--no-enable-prefix-caching", "--disable-prefix-caching"}:
        hit = load.prefix_hit()
        if hit is not None:
            cached, total, rate = hit
            lines = (f"the prefill lines of the last {size_text(load.prefill_window)} of log before the failure"
                     if load.prefill_window else "this log's prefill lines")
            if rate < 2:
                return (f"{lines} reused {rate:.1f}% of prompt tokens "
                        f"({cached:,} of {total:,}): disabling the prefix cache costs almost nothing here")
            return (f"{lines} reused {rate:.1f}% of prompt tokens ({cached:,} of {total:,}): "
                    f"that much prefill work will be recomputed")
        if load.vllm_hit_rates:
            rate = max(load.vllm_hit_rates)
            return f"this log reported a prefix cache hit rate up to {rate:.1f}%"
    if flags & {"--disable-cuda-graph", "--enforce-eager", "--cuda-graph-backend-decode"} and load.peak_running:
        return f"decode ran with up to {load.peak_running} concurrent requests; expect lower decode throughput at that load"
    if flags & {"--mem-fraction-static", "--gpu-memory-utilization"}:
        for key in ("mem_fraction_static", "gpu_memory_utilization"):
            if key in env.settings:
                return f"the server ran with {key}={env.settings[key]}; the KV cache shrinks in proportion"
    return None


def recommend(report: Report, cat: Catalogue, load: LoadSummary | None) -> None:
    """Workarounds for each finding, spelled for this server; the engine's own hints (found by
    the parse stage, on each failure) ranked after the catalogue's."""
    env = report.environment
    env.launch_args = _rebuild_args(env)
    idx = flag_index(env.engine) if env.engine else None
    for finding in report.findings:
        finding.workarounds = _for_finding(finding, cat, env, idx, load, finding_text(report, finding))
        if finding.failure is not None and not finding.generic:
            _rank_hints(finding.workarounds, report.failures[finding.failure].hints)
    # derived from the feature map: after the catalogue's (and the engine's) advice for a
    # specific signature, ahead of a generic signature's
    derive_switches(report)
    for finding in report.findings:
        if finding.failure is not None and report.failures[finding.failure].switches:
            rank_switches(finding, report.failures[finding.failure].switches)
    fit_report(report, cat)  # every source of advice checked against the log, once
    report.patched_command = patched_command(report, cat)


def finding_text(report: Report, finding: Finding) -> str:
    """The failure's own words, where a workaround's value rule looks for its value."""
    text = "\n".join(e.text for e in finding.evidence)
    if finding.failure is not None:
        f = report.failures[finding.failure]
        text = "\n".join([f.message, *(e.text for e in f.raw[-40:]), text])
    return text


def _rank_hints(recs: list[Workaround], hints: list[Workaround]) -> None:
    """Engine hints come after the catalogue's workarounds; one the catalogue already gives
    is not repeated, the catalogue's entry says the engine agrees. Advice-shaped log text that
    is not a known engine message is never a recommendation."""
    for h in hints:
        if h.source != "engine-hint":
            continue
        names = {flag_name(f) for f in h.flags + h.remove_flags}
        same = next((r for r in recs if names and names <= {flag_name(f) for f in r.flags + r.remove_flags}), None)
        if same is not None:
            same.note = (same.note + "; " if same.note else "") + "the engine's own hint suggests this too"
            continue
        recs.append(h)


def _number(v: float, like: object) -> str:
    if isinstance(like, int) and not isinstance(like, bool):
        return str(int(round(v)))
    return f"{v:.2f}".rstrip("0").rstrip(".") if not float(v).is_integer() else str(int(v))


def computed_value(rule: ValueRule | None, settings: dict[str, Any], text: str) -> tuple[str, str] | None:
    """(value, why) for a workaround's flag, from the failure's own words or the running value."""
    if rule is None:
        return None
    if rule.from_message:
        try:  # a catalogue's regex on log text: bounded like the signature patterns (match.py)
            m = regex.search(rule.from_message, text, timeout=PATTERN_TIMEOUT)
        except TimeoutError:
            m = None
        if m:
            return m.group(1), "the value the error message states"
    if rule.from_setting:
        cur = settings.get(rule.from_setting)
        if isinstance(cur, (int, float)) and not isinstance(cur, bool):
            v = float(cur)
            if rule.times is not None:
                v *= rule.times
            if rule.add is not None:
                v += rule.add
            if rule.min is not None:
                v = max(v, rule.min)
            if rule.max is not None:
                v = min(v, rule.max)
            if v == cur:
                return None
            return _number(v, cur), f"from the running {rule.from_setting}={cur}"
    return None


def _for_finding(finding: Finding, cat: Catalogue, env: Environment, idx: FlagIndex | None,
                 load: LoadSummary | None, text: str = "") -> list[Workaround]:
    spec_ids = cat.signatures[finding.signature].spec.workarounds if finding.signature in cat.signatures else []
    out: list[Workaround] = []
    for wid in spec_ids:
        w = cat.workarounds.get(wid)
        if w is None or not _applies_to(w, env.engine):
            continue
        w_idx = idx if w.engine == env.engine else flag_index(w.engine)
        add, notes = [], []
        flags_add = list(w.flags.add)
        computed = computed_value(w.value, env.settings, text)
        if computed is not None and flags_add:
            flags_add[0] = f"{flag_name(flags_add[0])} {computed[0]}"
            notes.append(f"value {computed[0]} {computed[1]}")
        for f in flags_add:
            spelled, note = _respell(f, w_idx if w.engine == (env.engine or w.engine) else flag_index(w.engine),
                                     env.version if w.engine == env.engine else None)
            value = _flag_value(f)
            if spelled != f and value and "=" not in spelled:
                spelled = f"{spelled} {value}"
            add.append(spelled)
            if note:
                notes.append(note)
        rec = Workaround(
            id=w.id, title=w.title, flags=add, remove_flags=list(w.flags.remove),
            env=[f"{k}={v}" for k, v in w.env.items()], action=w.action, cost=" ".join(w.cost.split()),
            note="; ".join(notes) or None, measured_cost=_measured_cost(w, load, env),
        )
        applied = _already_applied(w, w_idx, env.settings, flags_add) if w.engine == env.engine else None
        if applied:
            rec.status = "already-applied"
            rec.note = f"already in the running configuration ({applied}); it did not prevent this failure"
        out.append(rec)
    # conflicts: two recommended workarounds that set the same flag differently
    seen: dict[str, str] = {}
    for rec in out:
        for f in rec.flags + rec.remove_flags:
            name = flag_name(f)
            if name in seen and seen[name] != rec.id:
                rec.status = "conflicting" if rec.status == "recommended" else rec.status
                rec.note = (rec.note + "; " if rec.note else "") + f"conflicts with {seen[name]} on {name}"
            seen.setdefault(name, rec.id)
    out.sort(key=lambda r: r.status == "already-applied")
    return out


def _render_setting(flag: str, value: Any, takes_value: bool | None) -> list[str]:
    if takes_value is False:
        return [flag] if value in (True, "True", "true") else []
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        return [flag, *[str(v) for v in value]]
    if isinstance(value, dict):
        import json

        return [flag, json.dumps(value)]
    return [flag, str(value)]


def launch_args(env: Environment) -> list[str] | None:
    """The launch command the recommend stage rebuilt from the printed configuration."""
    if env.engine not in LAUNCH or not env.launch_args:
        return None
    return split_command(LAUNCH[env.engine]) + env.launch_args


def _rebuild_args(env: Environment) -> list[str]:
    """The launch arguments after the program, from the printed configuration (non-default
    values only); empty when the engine or its flag list is unknown."""
    if env.engine not in LAUNCH or not env.launch_settings:
        return []
    idx = flag_index(env.engine)
    if idx is None:
        return []
    args: list[str] = []
    settings = env.launch_settings
    if env.engine == "vllm":
        model = settings.get("model_tag") or settings.get("model")
        if model:
            args.append(str(model))
    for key, value in settings.items():
        if key in _SKIP_SETTINGS or (env.engine == "vllm" and key == "model"):
            continue
        if env.engine == "sglang" and (key in _RESOLVED_SKIP or
                                        (key in _RESOLVED_FROM and settings.get(_RESOLVED_FROM[key]) == value)):
            continue
        info = idx.by_dest.get(key)
        if info is None or info.removed_in:
            continue
        if info.default == value or (info.default is None and value in (None, False)):
            continue
        if isinstance(value, str) and isinstance(info.default, (int, float)) and str(info.default) == value:
            continue
        args.extend(_render_setting(info.flag, value, info.takes_value))
    return args


def apply_workaround(args: list[str], w: Workaround, idx: FlagIndex | None) -> list[str]:
    """Add, change or remove flags in an argv list; no flag ends up twice."""
    out = list(args)

    def same_flag(tok: str, name: str) -> bool:
        head = tok.split("=", 1)[0]
        if head == name:
            return True
        if idx is None or not head.startswith("--"):
            return False
        a, b = idx.get(head), idx.get(name)
        return a is not None and b is not None and a.flag == b.flag

    def drop(name: str) -> None:
        i = 0
        while i < len(out):
            tok = out[i]
            if same_flag(tok, name):
                takes = True
                if idx is not None and (info := idx.get(name)) is not None:
                    takes = info.takes_value is not False
                n = 1 if "=" in tok or not takes else 2
                if n == 2 and i + 1 < len(out) and out[i + 1].startswith("--"):
                    n = 1
                del out[i : i + n]
                continue
            i += 1

    for f in w.remove_flags:
        drop(flag_name(f))
    for f in w.flags:
        drop(flag_name(f))
        out.extend(split_command(f) if "<" not in f else [flag_name(f), f.split(None, 1)[1] if " " in f else f])
    return out


def patched_command(report: Report, cat: Catalogue) -> str | None:
    env = report.environment
    args = split_command(env.launch_command) if env.launch_command else launch_args(env)
    if not args or not report.findings or report.exit_code == 0:
        return None  # a server that did not die needs no relaunch
    top = report.findings[0]
    # only a catalogue workaround written for this very engine: its flags are that engine's
    rec = next((w for w in top.workarounds if w.status == "recommended" and (w.flags or w.remove_flags)
                and not any(e for e in w.env) and w.source == "catalogue"
                and (spec := cat.workarounds.get(w.id)) is not None and spec.engine == env.engine), None)
    if rec is None:
        return None
    patched = apply_workaround(args, rec, flag_index(env.engine) if env.engine else None)
    env_prefix = " ".join(rec.env)
    cmd = shlex.join(patched)
    return f"{env_prefix} {cmd}".strip()
