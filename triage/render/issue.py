"""`--format issue`: a Report as the body of an upstream bug report, in the sections of the
engine's own issue template, ready to paste into a new issue.

What it holds is what the maintainers ask for first: the environment the log shows, the launch
command, the smallest traceback that shows the failure (folded in a <details> block), what
triage found (the catalogue's match or the source atlas's site) and what was already tried,
and the upstream threads that may be the same failure. Log text goes only into code blocks and
code spans, so a log's @mentions and URLs neither ping nor link; the Report is already redacted
(commands/output.py), as every output is.
"""

from __future__ import annotations

from triage.core.models import Failure, Finding, Report
from triage.render.markdown import ENGINE_NAMES, codeblock, inline, properfix, shortpath

# the sections of each engine's bug template (.github/ISSUE_TEMPLATE), in their order
_TITLE_PREFIX = {"sglang": "[Bug] ", "vllm": "[Bug]: ", "trtllm": "[Bug] ", "tgi": "", "lmdeploy": "[Bug] "}
_ENV_TOOL = {"sglang": "python3 -m sglang.check_env", "vllm": "python collect_env.py",
             "trtllm": "nvidia-smi; pip show tensorrt_llm tensorrt", "tgi": "text-generation-launcher --env",
             "lmdeploy": "lmdeploy check_env"}
MAX_TRACE_LINES = 80


def _title(f: Failure | None, engine: str) -> str:
    prefix = _TITLE_PREFIX.get(engine, "")
    if f is None:
        return prefix + "server stopped without an error in its log"
    what = f.exception + (f": {f.message}" if f.message else "")
    return prefix + " ".join(what.split())[:110]


def _environment(r: Report, engine: str) -> list[str]:
    e = r.environment
    rows = [("engine", f"{ENGINE_NAMES.get(engine, engine)} {e.version or '(version not in the log)'}"),
            ("model", e.model), ("GPU", f"{e.gpu or '?'} x {e.gpu_count}" if e.gpu_count else e.gpu),
            ("GPU memory (GiB)", e.gpu_memory_gib), ("TP / DP / PP", " / ".join(str(x or 1) for x in
                                                                                (e.tp_size, e.dp_size, e.pp_size))),
            ("attention backend", e.attention_backend), ("quantization", e.quantization),
            ("KV-cache dtype", e.kv_cache_dtype), ("CUDA graphs", e.cuda_graph)]
    out = ["| | |", "|---|---|"]
    out += [f"| {k} | {inline(v)} |" for k, v in rows if v not in (None, "")]
    tool = _ENV_TOOL.get(engine)
    if tool:
        out += ["", f"(From the server log. The full environment: `{tool}`.)"]
    return out


_PROGRAM = {"sglang": "python3 -m sglang.launch_server", "vllm": "vllm serve", "lmdeploy": "lmdeploy serve api_server",
            "tgi": "text-generation-launcher"}


def _reproduction(r: Report) -> list[str]:
    if r.environment.launch_command:
        return ["Launch command (secrets masked):", "", codeblock(r.environment.launch_command, "bash")]
    if r.environment.launch_args:
        program = _PROGRAM.get(r.environment.engine or "", "<server>")
        return ["Launch command, rebuilt from the configuration the log prints (non-default values only; "
                "secrets masked):", "", codeblock(f"{program} " + " ".join(r.environment.launch_args), "bash")]
    return ["The launch command is not in the log; paste it here."]


def _trace(f: Failure) -> list[str]:
    lines = [e.text for e in f.raw]
    if not lines:
        return []
    if len(lines) > MAX_TRACE_LINES:
        keep_head, keep_tail = 10, MAX_TRACE_LINES - 10
        lines = lines[:keep_head] + [f"[... {len(lines) - keep_head - keep_tail} lines ...]"] + lines[-keep_tail:]
    first = f.raw[0].line
    return ["<details>", f"<summary>The failure, log lines {first}-{f.raw[-1].line}</summary>", "",
            codeblock("\n".join(lines), "text"), "", "</details>"]


def _found(r: Report, f: Failure | None, x: Finding | None) -> list[str]:
    out = []
    if f is not None:
        where = f", while {f.phase}" if f.phase else ""
        ranks = f" on {', '.join(f.ranks[:8])}" if f.ranks else ""
        out.append(f"- The failure: {inline(f.exception)}{ranks}, log line {f.line}{inline(where)}; "
                   f"fingerprint `{f.fingerprint}`.")
        for site in f.raised_at[:1]:
            link = f" ({site.link})" if site.link else ""
            guard = f", when `{site.condition}` holds" if site.condition else ""
            out.append(f"- Raised in `{site.file}` (`{site.function}`){inline(guard)}, releases "
                       f"{inline(site.message_versions or site.versions)}{link}.")
    if x is not None and not x.generic:
        out.append(f"- It matches the known failure `{x.signature}`: {inline(x.title)} (confidence "
                   f"{x.confidence:.2f}).")
        fix = properfix(x)
        if fix:
            out.append("- " + fix.replace("**", ""))
    elif x is not None:
        out.append(f"- Only a generic wrapper matched (`{x.signature}`); the failure itself is not catalogued.")
    else:
        out.append("- No known failure matches.")
    if r.timeline.last_load is not None and r.timeline.last_load.running is not None:
        out.append(f"- Load at the crash: {r.timeline.last_load.running} running requests"
                   + (f", {r.timeline.last_load.queued} queued" if r.timeline.last_load.queued else "") + ".")
    return out


def _tried(r: Report, x: Finding | None) -> list[str]:
    applied = [w for w in (x.workarounds if x else []) if w.status == "already-applied"]
    out = [f"- Already running with {inline(' '.join(w.flags + w.env) or w.title)}; the failure happened anyway."
           for w in applied]
    if r.baseline is not None:
        out.append(f"- Compared with an earlier healthy log ({inline(shortpath(r.baseline.source))}): "
                   f"{len(r.baseline.novel)} new warning or error lines.")
    rec = next((w for w in (x.workarounds if x else []) if w.status == "recommended"), None)
    if rec is not None:
        change = " ".join(rec.flags + rec.env + [f"without {f}" for f in rec.remove_flags]) or rec.title
        out.append(f"- Not tried yet: {inline(change)} (the catalogue's workaround).")
    return out or ["- Nothing recorded in the log; say what you tried."]


def _same(r: Report, f: Failure | None, x: Finding | None) -> list[str]:
    urls: list[str] = []
    if x is not None:
        urls += [u for u in (x.open_issue, x.fix_pr) if u]
        urls += list(x.references)
    seen: list[str] = []
    for u in urls:
        if ("/issues/" in u or "/pull/" in u) and u not in seen:
            seen.append(u)
    if not seen:
        return []
    return ["Possibly the same as:", ""] + [f"- {u}" for u in seen[:8]]


def render_issue(r: Report) -> str:
    engine = r.environment.engine or "unknown"
    # the first process-level failure, else the first of any kind, with its index for the findings
    idx = next((i for i, g in enumerate(r.failures) if g.fatal), 0 if r.failures else None)
    f = r.failures[idx] if idx is not None else None
    x = next((y for y in r.findings if y.failure == idx and not y.generic), None) or (
        next((y for y in r.findings if y.failure == idx), None))
    describe = [f"The server failed: {inline(f.exception)}" + (f" ({inline(f.message[:300])})" if f and f.message else "")
                + "." if f else "The server stopped; its log shows no error."]
    if r.host is not None and r.host.attribution.verdict:
        describe += ["", f"Host records: {inline(r.host.attribution.verdict)}"]
    describe += ["", *(_trace(f) if f else [])]
    found = ["**What triage found** (`triage analyze`):", "", *_found(r, f, x), "",
             "**What was tried:**", "", *_tried(r, x)]
    same = _same(r, f, x)
    if engine == "vllm":
        sections = [("Your current environment", ["<details>", "<summary>From the server log</summary>", "",
                                                   *_environment(r, engine), "", "</details>"]),
                    ("🐛 Describe the bug", [*describe, "", *_reproduction(r), "", *found])]
    elif engine == "sglang":
        sections = [("Checklist", ["- [x] I searched related issues (the threads below).",
                                   "- [ ] The bug persists in the latest version."]),
                    ("Describe the bug", [*describe, "", *found]),
                    ("Reproduction", _reproduction(r)),
                    ("Environment", _environment(r, engine))]
    elif engine in ("trtllm", "tgi"):
        sections = [("System Info", _environment(r, engine)), ("Reproduction", _reproduction(r)),
                    ("Expected behavior", ["The server keeps serving."]),
                    ("Actual behavior", [*describe, "", *found])]
    else:
        sections = [("Environment", _environment(r, engine)), ("What happened", [*describe, "", *found]),
                    ("Reproduction", _reproduction(r))]
    out = [f"<!-- Title: {_title(f, engine).replace('--', '- -')} -->", ""]
    for name, body in sections:
        out += [f"### {name}", "", *body, ""]
    if same:
        out += [*same, ""]
    out.append(f"<sub>Drafted by triage from {inline(shortpath(r.source))}; secrets masked. Check it before filing.</sub>")
    return "\n".join(out).rstrip() + "\n"
