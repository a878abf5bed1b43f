"""The leaderboard as data (JSON rows for dashboards) and as Markdown, the second made from
the first so that both always say the same."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from triage.commands.fleet.board import Group, Tally

SHOWN_SERVERS = 8  # in Markdown; JSON lists them all


# a row's values that are triage's own, never text from a log: left as they are by redaction
IDS = frozenset({"key", "signature", "fingerprint", "id"})


def _iso(t: datetime | None) -> str | None:
    return t.isoformat(timespec="seconds") if t is not None else None


def _counts(c: Any) -> dict[str, int]:
    return {k: n for k, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))}


def row(rank: int, g: Group) -> dict[str, Any]:
    top = None
    if g.workarounds:
        wid = min(g.workarounds, key=lambda k: (-g.workarounds[k], k))
        top = {**g.workaround_info[wid], "logs": g.workarounds[wid]}
    return {
        "rank": rank,
        "key": g.key,
        "known": g.signature is not None,
        "signature": g.signature,
        "fingerprint": g.fingerprint,
        "title": g.title,
        "severity": g.severity,
        "servers": len(g.servers),
        "logs": g.logs,
        "failures": g.failures,
        "fatal_logs": g.fatal_logs,
        "first_seen": _iso(g.first_seen),
        "last_seen": _iso(g.last_seen),
        "engines": _counts(g.engines),
        "gpus": _counts(g.gpus),
        "top_workaround": top,
        "fix": g.fix,
        "example": g.example[1] if g.example else None,
        "server_names": sorted(g.servers),
    }


def leaderboard(t: Tally, source: str, since: datetime | None) -> dict[str, Any]:
    return {
        "source": source,
        "since": _iso(since),
        "summary": {"files": t.read + t.failed + t.skipped, "read": t.read, "failed": t.failed,
                    "skipped": t.skipped, "with_failure": t.with_failure, "groups": len(t.groups)},
        "leaderboard": [row(i, g) for i, g in enumerate(t.ranked(), 1)],
        "errors": [{"path": p, "error": t.errors[p]} for p in sorted(t.errors)],
        "errors_not_listed": t.failed - len(t.errors),
    }


def render_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=True) + "\n"


def _when(iso: str | None) -> str:
    return iso.replace("T", " ")[:16] if iso else ""


def _top(counts: dict[str, int], n: int = 2) -> str:
    from triage.render.markdown import inline

    items = list(counts.items())
    shown = ", ".join(f"{inline(k)} ({v})" for k, v in items[:n])
    return shown + (f" +{len(items) - n}" if len(items) > n else "")


def _advice(r: dict[str, Any]) -> str:
    from triage.render.markdown import inline

    w = r["top_workaround"]
    if w is None:
        return ""
    # the flags and variables fit a cell; a longer action is in the JSON row
    how = " ".join([*w["flags"], *(f"unset {f}" for f in w["remove_flags"]), *w["env"]])
    return f"{inline(w['title'])}: {inline(how)}" if how else inline(w["title"])


def _short(text: str, n: int = 100) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "\u2026"


def _fix(r: dict[str, Any]) -> str:
    from triage.render.markdown import inline, pr_number

    fix = r["fix"] or {}
    if fix.get("fixed_in"):
        num = pr_number(fix.get("fix_pr") or "")
        return f"upgrade: fixed in {inline(fix['fixed_in'])}" + (f" (PR #{num})" if num else "")
    if fix.get("open_issue"):
        return f"not fixed yet: {inline(fix['open_issue'])}"
    if fix.get("no_upstream_fix"):
        return f"no upstream fix: {inline(_short(fix['no_upstream_fix']))}"
    return "" if r["known"] else "unknown: describe it with `triage new` on the example"


def render_markdown(doc: dict[str, Any]) -> str:
    from triage.render.markdown import inline

    s = doc["summary"]
    out = [f"# Fleet: {s['files']} logs, {s['read']} read, {s['failed']} failed, {s['skipped']} skipped; "
           f"{s['with_failure']} with a failure, {s['groups']} distinct", ""]
    out.append(f"Source: {inline(doc['source'])}" + (f", failures since {_when(doc['since'])}" if doc["since"] else ""))
    out.append("")
    rows = doc["leaderboard"]
    if rows:
        out += ["| # | failure | servers | logs | first seen | last seen | engines | GPUs | top workaround | proper fix |",
                "|---:|---|---:|---:|---|---|---|---|---|---|"]
        for r in rows:
            name = f"`{r['signature']}` {inline(r['title'])}" if r["known"] else \
                f"unknown `{r['fingerprint']}`: {inline(r['title'])}"
            out.append(f"| {r['rank']} | {name} | {r['servers']} | {r['logs']} | {_when(r['first_seen'])} | "
                       f"{_when(r['last_seen'])} | {_top(r['engines'])} | {_top(r['gpus'])} | {_advice(r)} | {_fix(r)} |")
        out.append("")
        for r in rows:
            names = r["server_names"]
            shown = ", ".join(inline(x) for x in names[:SHOWN_SERVERS])
            more = f" and {len(names) - SHOWN_SERVERS} more" if len(names) > SHOWN_SERVERS else ""
            out.append(f"{r['rank']}. `{r['key']}`: example {inline(r['example'])}; servers {shown}{more}")
        out.append("")
    else:
        out += ["No failure in any log.", ""]
    if doc["errors"]:
        out.append("Could not analyse:")
        out += [f"- {inline(e['path'])}: {inline(e['error'])}" for e in doc["errors"]]
        if doc["errors_not_listed"]:
            out.append(f"- and {doc['errors_not_listed']} more")
        out.append("")
    return "\n".join(out)


def render(doc: dict[str, Any], fmt: str) -> str:
    """The leaderboard in `markdown` or `json` (the CLI's --format, already normalised)."""
    return render_json(doc) if fmt == "json" else render_markdown(doc)
