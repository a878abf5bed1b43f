"""`triage signatures` and `triage show`: the catalogue as people and scripts read it."""

from __future__ import annotations

import json

from triage.catalogue.load import Catalogue
from triage.catalogue.models import WorkaroundSpec
from triage.core.errors import TriageError
from triage.render.markdown import inline, properfix, prose


def _selected(cat: Catalogue, engine: str | None):  # noqa: ANN202
    sigs = sorted(cat.signatures.values(), key=lambda s: (s.spec.engine, s.spec.id))
    if engine:
        sigs = [s for s in sigs if s.spec.engine == engine]
        if not sigs:
            engines = sorted({s.spec.engine for s in cat.signatures.values()})
            raise TriageError(f"no signature for engine {engine!r} (engines: {', '.join(engines)})")
    return sigs


def list_json(cat: Catalogue, engine: str | None) -> str:
    out = []
    for s in _selected(cat, engine):
        d = s.spec.model_dump(mode="json", exclude={"examples"})
        d["path"] = s.path
        d["examples"] = {"match": len(s.spec.examples.match), "no_match": len(s.spec.examples.no_match)}
        out.append(d)
    return json.dumps({"signatures": out}, indent=2) + "\n"


def list_markdown(cat: Catalogue, engine: str | None) -> str:
    sigs = _selected(cat, engine)
    lines = [f"# {len(sigs)} signatures", "", "| id | engine | severity | title | workarounds |", "|---|---|---|---|---|"]
    for s in sigs:
        sp = s.spec
        lines.append(f"| `{sp.id}` | {sp.engine} | {sp.severity} | {inline(sp.title)} | {', '.join(sp.workarounds)} |")
    return "\n".join(lines) + "\n"


def show_markdown(cat: Catalogue, ident: str) -> str:
    s = cat.signatures.get(ident)
    if s is None:
        w = cat.workarounds.get(ident)
        if w is not None:
            return _show_workaround(cat, ident)
        close = [i for i in cat.signatures if ident in i][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else "; `triage signatures` lists them"
        raise TriageError(f"no signature or workaround {ident!r}{hint}")
    sp = s.spec
    out = [f"# {inline(sp.title)}", "", f"`{sp.id}` · {sp.engine}" + (f" · {sp.layer}" if sp.layer else "")
           + f" · {sp.severity} · base confidence {sp.confidence:.2f}", "", prose(sp.explanation), ""]
    fix = properfix(sp)  # the sentence a report prints, so that `show` and a report agree
    if fix:
        out += [fix, ""]
    if sp.when:
        out.append("Only when: " + ", ".join(f"{k} = {v}" for k, v in sp.when.items()))
        out.append("")
    out.append("## Workarounds, in order")
    out.append("")
    for i, wid in enumerate(sp.workarounds, 1):
        w = cat.workarounds.get(wid)
        if w is None:
            out.append(f"{i}. `{wid}` (missing from the catalogue)")
            continue
        change = "; ".join(f"{verb.lower()} {what}" for verb, what in _changes(w))
        auto = ", applied by `run --retry`" if w.automatic else ""
        out.append(f"{i}. **{inline(w.title)}** (`{w.id}`, {w.engine}{auto}): {change.rstrip('. ')}.")
        out.append(f"   Cost: {' '.join(w.cost.split())}")
    out.append("")
    if sp.debug:
        out.append("## To see the real cause")
        out.append("")
        out.append("Re-run with " + " ".join(f"`{k}={v}`" for k, v in sp.debug.env.items())
                   + (f": {inline(sp.debug.note)}" if sp.debug.note else ""))
        out.append("")
    out.append("## How it is recognised")
    out.append("")
    out.append("Keywords: " + ", ".join(f"`{k}`" for k in sp.keywords))
    out.extend(f"- pattern: `{p}`" for p in sp.patterns)
    if sp.frames:
        out.append("Frames that raise confidence: " + ", ".join(f"`{f}`" for f in sp.frames))
    out.append("")
    out.append("## References")
    out.append("")
    out.extend(f"- <{r}>" for r in sp.references)
    out.append("")
    out.append(f"Defined in `{s.path}`.")
    return "\n".join(out) + "\n"


def _changes(w: WorkaroundSpec) -> list[tuple[str, str]]:
    """(verb, what) for each kind of change a workaround makes."""
    out = []
    if w.flags.add:
        out.append(("Add", ", ".join(f"`{f}`" for f in w.flags.add)))
    if w.flags.remove:
        out.append(("Remove", ", ".join(f"`{f}`" for f in w.flags.remove)))
    if w.env:
        out.append(("Set", ", ".join(f"`{k}={v}`" for k, v in w.env.items())))
    if w.action:
        out.append(("Action", inline(w.action)))
    return out


def _show_workaround(cat: Catalogue, wid: str) -> str:
    w = cat.workarounds[wid]
    users = sorted(s.spec.id for s in cat.signatures.values() if wid in s.spec.workarounds)
    auto = "applied automatically by `run --retry`" if w.automatic else "never applied automatically"
    out = [f"# {inline(w.title)}", "", f"`{w.id}` · {w.engine} · {auto}", ""]
    out += [f"{verb}: {what}" for verb, what in _changes(w)]
    out += ["", "Cost: " + " ".join(w.cost.split()), "", "Used by: " + (", ".join(f"`{u}`" for u in users) or "nothing")]
    return "\n".join(out) + "\n"
