"""The report linter: what a report must never say (the rules of issue 32), checked on one
analysed report and its redacted copy. tests/test_golden.py runs it over every bundled log in
the same pass that checks their JSON; tests/test_advice_fits.py over its own cases."""

from __future__ import annotations

from triage.catalogue.flags import flag_index, flag_name
from triage.core.models import Report
from triage.pipeline.fit import _points_rule, failure_phase, setting, unresolved

OFFERED = ("recommended", "conflicting")


def violations(rep: Report, red: Report, cat) -> list[str]:  # noqa: ANN001 - a Catalogue
    """What a report must never say: the rules of issue 32 checked on one analysed report (and
    its redacted copy)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    from triage.pipeline.parse.failures import CAUSE_SPAN, DEATH_REPORT, _quote

    out: list[str] = []
    env = rep.environment
    idx = flag_index(env.engine) if env.engine else None
    for x in rep.findings:
        failure = rep.failures[x.failure] if x.failure is not None else None
        phase = failure_phase(rep, failure)
        for w in x.workarounds:
            spec = cat.workarounds.get(w.id) if w.source == "catalogue" else None
            mine = spec is None or spec.engine == env.engine
            if w.status in OFFERED:
                if spec is not None and spec.points_at and _points_rule(spec, rep) is not None:
                    out.append(f"{w.id}: points at a line the report already shows")
                if spec is not None and spec.phases and phase is not None and phase not in spec.phases:
                    out.append(f"{w.id}: recommended while {phase}, declared for {spec.phases}")
                if mine and idx is not None and env.version:
                    for f in w.flags:
                        if idx.status(f, env.version)[0] in ("not-yet", "removed"):
                            out.append(f"{w.id}: {f} outside its release range at {env.version}")
                    if spec is not None and spec.versions:
                        try:
                            if Version(env.version.lstrip("v")) not in SpecifierSet(spec.versions):
                                out.append(f"{w.id}: needs {spec.versions}, server runs {env.version}")
                        except InvalidVersion:
                            pass
                if mine:
                    for f in w.flags:
                        parts = f.split(None, 1) if "=" not in f.split()[0] else f.split("=", 1)
                        if len(parts) == 2:
                            present, have = setting(parts[0], idx, env.settings)
                            if present and not unresolved(have) and str(have).lower() == parts[1].strip().lower():
                                out.append(f"{w.id}: recommends {f}, the running value")
            if w.status == "already-applied" and mine:
                for f in w.flags + w.remove_flags:
                    info = idx.get(f) if idx is not None else None
                    present, have = setting(f, idx, env.settings)
                    if present and unresolved(have) and (info is None or info.takes_value is not False):
                        out.append(f"{w.id}: already-applied claimed from {flag_name(f)}={have!r}")
    specific = {x.failure for x in rep.findings if x.failure is not None and not x.generic and x.unlikely is None}
    ordered = sorted(range(len(rep.failures)), key=lambda i: rep.failures[i].line)
    for pos, j in enumerate(ordered):
        if j in specific:
            continue
        fj = rep.failures[j]
        for i in ordered[:pos]:
            q = _quote(rep.failures[i])
            if q is not None and q in fj.message:
                out.append(f"failure {j + 1} is a separate unknown failure quoting failure {i + 1}")
        if pos and DEATH_REPORT.match(fj.message.strip()):
            p = rep.failures[ordered[pos - 1]]
            if fj.line - max(p.end_line or p.line, p.line) <= CAUSE_SPAN and not DEATH_REPORT.match(p.message.strip()):
                out.append(f"failure {j + 1} is a separate unknown failure reporting a death after another")
    for x in red.findings:
        if "[REDACTED]" in x.signature + x.title:
            out.append(f"{x.signature}: catalogue text masked")
        for w in x.workarounds:
            if w.source == "catalogue" and "[REDACTED]" in " ".join([w.id, w.title, w.cost, *w.env, w.action or ""]):
                out.append(f"{w.id}: catalogue text or placeholder masked")
    if rep.exit_code == 0 and rep.patched_command:
        out.append("exit 0 with a patched launch command")
    return out
