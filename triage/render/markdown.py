"""Render a Report as Markdown that reads well raw (terminal) and rendered (issue, wiki).

Log text never breaks the document: evidence goes in fences longer than any backtick run
inside, inline text has backticks, pipes and HTML neutralised, and autoescape is off only
because every value passes through one of these filters.
"""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import jinja2

from triage.core.models import Evidence, Failure, Finding, HostEvent, LoadFigures, Report, Workaround
from triage.core.recache import re_compile
from triage.core.terminal import printable

_TEMPLATES = Path(__file__).resolve().parent / "templates"
_BACKTICKS = re_compile(r"`+")
# what would start a link, an image or a link reference definition
_LINKISH = re_compile(r"\]([(\[:])")
# an underscore that can open or close emphasis (`__init__` is bold **init**); one between two
# letters or digits cannot, so `max_model_len` stays as written
_EMPHASIS_UNDERSCORE = re_compile(r"(?<![^\W_])_|_(?![^\W_])")
MAX_EVIDENCE_LINES = 40
MAX_EVIDENCE_CHARS = 2000  # per line; the JSON report keeps the line whole (up to the reader's cut)


def fence_for(text: str) -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


# An @mention (GitHub notifies that user or team when the report is pasted) and a bare URL or
# www. address (autolinked): log text, shown in a code span, which neither pings nor links.
_PINGS = re_compile(r"(?<![\w@.])@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:/[A-Za-z0-9_.-]+)?"
                    r"|\b(?:[A-Za-z][A-Za-z0-9+.-]*://|www\.)[^\s<>]+")


def inline(text: object) -> str:
    """One line of log text safe inside Markdown prose or a table cell: no HTML, no link or
    image, no code span or emphasis, no cell break, no control character, no @mention and no
    autolink (those are put in code spans)."""
    s = printable(" ".join(str(text).split()))
    out, pos = [], 0
    for m in _PINGS.finditer(s):
        out.append(_inline_text(s[pos : m.start()]))
        out.append(_code_inline(m.group(0)).replace("|", "\\|"))  # a pipe in a code span still ends a cell
        pos = m.end()
    out.append(_inline_text(s[pos:]))
    return "".join(out)


def _inline_text(s: str) -> str:
    s = s.replace("&", "&amp;").replace("\\", "\\\\").replace("|", "\\|")
    s = s.replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("`", "'").replace("*", "\\*")
    s = _EMPHASIS_UNDERSCORE.sub(r"\\_", s)
    return _LINKISH.sub(r"\\]\1", s)


def _clip(text: str, n: int) -> str:
    """At most n characters of text (white space folded), with an ellipsis when cut: cut before
    escaping, since a cut after it can split an entity (`&l`) or leave an escaping backslash."""
    s = " ".join(text.split())
    return s if len(s) <= n else s[: n - 1].rstrip() + "…"


_PROSE_KEEP = re_compile(r"(`+).*?\1|<https?://[^\s<>]+>", re.S)  # code spans and autolinks stay as written


def prose(text: object) -> str:
    """Catalogue prose (explanations): Markdown as its author wrote it (code spans, emphasis,
    links), but `<pid>` or `<script>` outside code is shown, not taken for HTML (GitHub drops
    unknown tags, and an unclosed one can hide the rest of the report)."""
    s = printable(str(text)).strip()
    out, pos = [], 0
    for m in _PROSE_KEEP.finditer(s):
        out.append(s[pos:m.start()].replace("<", "\\<"))
        out.append(m.group(0))
        pos = m.end()
    out.append(s[pos:].replace("<", "\\<"))
    return "".join(out)


def _code_inline(text: object) -> str:
    """A code span that no backtick inside can close early (outside tables: a pipe stays)."""
    s = printable(" ".join(str(text).split()))
    if not s:
        return "` `"
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def codeblock(text: object, lang: str = "") -> str:
    """A fenced block that no line inside can close early."""
    body = printable(text).replace("\r", "")
    fence = fence_for(body)
    return f"{fence}{lang}\n{body}\n{fence}"


def _evidence_text(text: str) -> str:
    text = printable(text).replace("\t", "    ")
    if len(text) > MAX_EVIDENCE_CHARS:
        text = f"{text[:MAX_EVIDENCE_CHARS]} ... [{len(text) - MAX_EVIDENCE_CHARS:,} more characters]"
    return text


def evidence_lines(items: list[Evidence]) -> str:
    if not items:
        return ""
    width = len(str(max(e.line for e in items)))
    body = "\n".join(f"{e.line:>{width}} | {_evidence_text(e.text)}" for e in items[:MAX_EVIDENCE_LINES])
    if len(items) > MAX_EVIDENCE_LINES:
        body += f"\n{'':>{width}} | ... {len(items) - MAX_EVIDENCE_LINES} more lines"
    fence = fence_for(body)
    return f"{fence}text\n{body}\n{fence}"


def failure_evidence(f: Failure) -> str:
    return evidence_lines(f.raw)


def where(f: Failure) -> str:
    ranks = ""
    if f.ranks:
        shown = ", ".join(f.ranks[:16]) + (f" and {len(f.ranks) - 16} more" if len(f.ranks) > 16 else "")
        ranks = f"on {len(f.ranks)} rank{'s' if len(f.ranks) > 1 else ''} ({shown})"
        if f.first_rank and len(f.ranks) > 1:
            ranks += f", first {f.first_rank}"
        ranks += ", "
    return f"{ranks}line {f.line}"


def change(w: Workaround) -> str:
    if w.source == "engine-hint":
        parsed = change(w.model_copy(update={"source": "catalogue", "action": None}))
        said = f"the engine says {_code_inline(w.action or '')}"
        return f"{said} (that is: {parsed})" if parsed != inline(w.title) else said
    parts = []
    if w.flags:
        parts.append("add " + ", ".join(_code_inline(x) for x in w.flags))
    if w.remove_flags:
        parts.append("remove " + ", ".join(_code_inline(x) for x in w.remove_flags))
    if w.env:
        parts.append("set " + ", ".join(_code_inline(x) for x in w.env))
    if w.action:
        parts.append(inline(w.action).rstrip(". "))
    return "; ".join(parts) or inline(w.title)


def derived_note(w: Workaround) -> str:
    """Why a derived switch is offered: the frame that runs through the feature, and its cost."""
    what = inline(w.title.removeprefix("Turn off "))
    if (w.frame or "").startswith("line "):
        return (f"Derived from the failure's own line, not from a catalogue entry: {_code_inline(w.frame or '?')} "
                f"names {what}. Cost: {_sentence(w.cost)}")
    return (f"Derived from the stack, not from a catalogue entry: {_code_inline(w.frame or '?')} is in "
            f"{what}. Cost: {_sentence(w.cost)}")


def load(lf: LoadFigures) -> str:
    bits = []
    if lf.running is not None:
        bits.append(f"{lf.running} running")
    if lf.queued is not None:
        bits.append(f"{lf.queued} queued")
    if lf.token_usage is not None:
        bits.append(f"token usage {lf.token_usage:g}")
    if lf.throughput is not None:
        bits.append(f"{lf.throughput:g} tok/s")
    if lf.cuda_graph is not None:
        bits.append("CUDA graph " + ("on" if lf.cuda_graph else "off"))
    return ", ".join(bits)


def seconds(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min"


def size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


class StatesAFix(Protocol):
    """What a finding and a catalogue signature both say about the upstream fix (read-only
    properties: a signature's engine is a Literal, which a settable `str` member refused)."""

    @property
    def engine(self) -> str: ...
    @property
    def fixed_in(self) -> str | None: ...
    @property
    def fix_pr(self) -> str | None: ...
    @property
    def affects(self) -> str | None: ...
    @property
    def open_issue(self) -> str | None: ...
    @property
    def no_upstream_fix(self) -> str | None: ...


def pr_number(url: str) -> str | None:
    """`27038` for a GitHub pull request's URL: the number people search a changelog for."""
    m = re.match(r"https://github\.com/[^/\s]+/[^/\s]+/pull/(\d+)", url)
    return m.group(1) if m else None


def prlabel(url: str) -> str:
    num = pr_number(url)
    return f"PR #{num} <{url}>" if num else f"<{url}>"


def properfix(x: StatesAFix) -> str:
    """The proper fix beside the workaround: the release or PR that fixed it, the open thread
    that tracks it, why no upstream fix is coming, or what the affected range says."""
    if x.fixed_in:
        if x.fixed_in.startswith("https://"):
            fix = f"upgrade to a release with {fixlink(x.fixed_in)}"
        else:
            name = ENGINE_NAMES.get(x.engine)
            fix = f"upgrade to {name + ' ' if name else ''}{inline(x.fixed_in)} or later"
            if x.fix_pr:
                fix += f" ({prlabel(x.fix_pr)})"
        return f"**Proper fix:** {fix}" + (f" (affected: {_code_inline(x.affects)})." if x.affects else ".")
    if x.open_issue:
        return f"**Proper fix:** not fixed upstream yet (<{x.open_issue}>); the workaround is what there is."
    if x.no_upstream_fix:
        return f"**Proper fix:** no upstream release fixes this: {_sentence(x.no_upstream_fix)}"
    if x.affects:
        # a range alone still answers the question: an upper bound is the first release
        # without the bug; with none, the catalogue knows of no fixing release yet
        bound = _upper_bound(x.affects)
        if bound:
            name = ENGINE_NAMES.get(x.engine)
            return (f"**Proper fix:** upgrade to {name + ' ' if name else ''}{inline(bound)} or later "
                    f"(affected: {_code_inline(x.affects)}).")
        return (f"**Proper fix:** no release that fixes it is recorded yet (affected: {_code_inline(x.affects)}); "
                "the workaround is what there is.")
    return ""


def _upper_bound(affects: str) -> str | None:
    """The `X` of a `<X` in a PEP 440 range: the first release the range leaves out."""
    if "<" not in affects:
        return None  # no upper bound to find (most ranges: `>=0.5.3`), and packaging not imported
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        specs = SpecifierSet(affects)
    except InvalidSpecifier:
        return None
    from packaging.version import Version

    uppers = [sp.version for sp in specs if sp.operator == "<"]  # valid versions: the set parsed
    return min(uppers, key=Version) if uppers else None


def fixlink(fixed: str) -> str:
    if fixed.startswith("https://"):
        return f"<{fixed}>"
    return f"upgrade to {inline(fixed)} or later"


ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM", "lmdeploy": "LMDeploy", "trtllm": "TensorRT-LLM", "tgi": "TGI",
                "triton": "Triton"}
PACKAGE_NAMES = {**ENGINE_NAMES, "flashinfer": "FlashInfer", "xgrammar": "XGrammar", "transformers": "Transformers"}


def raised(f: Failure, report: Report) -> str:
    """The source atlas's sites for a failure: where the message is raised, in which releases,
    under which condition, with a link to that line at the release's tag."""
    out: list[str] = []
    for i, r in enumerate(f.raised_at[:3]):
        name = PACKAGE_NAMES.get(r.package, r.package)
        site = _code_inline(f"{r.file} · {r.function} · {name} {r.versions}")
        line = f"**Raised at:** {site}" if i == 0 else f"Also raised at: {site}"
        if r.link and r.line:
            line += f", [line {r.line} in {inline(r.release)}](<{r.link}>)"
        notes = []
        if r.in_version is False and report.environment.version:
            notes.append(f"not at this place in {inline(report.environment.version)}, the log's release")
        if r.partial:
            notes.append("the log shows only the start of the message")
        if r.line_versions and not report.environment.version:
            notes.append(f"the traceback's line {r.line} is this raise's line in {name} {inline(r.line_versions)}")
        if notes:
            line += " (" + "; ".join(notes) + ")"
        out.append(line + ".")
        if i == 0 and r.condition:
            kind = "the assertion" if r.exception == "AssertionError" else "the guard"
            out.append(f"It fires when {kind} {_code_inline(r.condition)} " + (
                "fails." if r.exception == "AssertionError" else "holds."))
    return "  \n".join(out)


def do_now(r: Report, top: Finding | None) -> Workaround | None:
    """The one change a report puts first: the top finding's first recommended workaround; for
    a failure no specific signature explains, else the first switch derived from the optional
    features on its stack. Advice the log contradicts (not applicable, already applied) never."""
    first = next((w for w in top.workarounds if w.status == "recommended"), None) if top is not None else None
    if first is not None or (top is not None and not top.generic) or not r.failures:
        return first
    return next((w for w in r.failures[0].switches if w.status == "recommended"), None)


def derived_settings(f: Failure, report: Report) -> list[tuple[str, Any]]:
    """The settings the check that raised this failure reads (its flags, then the config fields
    no flag stands for), with this run's values: the source of the derived advice, which the
    Markdown and the HTML reports each word in their own way."""
    r = f.raised_at[0] if f.raised_at else None
    if r is None:
        return []
    settings = report.environment.settings
    out: list[tuple[str, Any]] = [(flag, settings.get(flag.lstrip("-").replace("-", "_"))) for flag in r.flags]
    out += [(fld, settings.get(fld)) for fld in r.fields
            if not any(fl.lstrip("-").replace("-", "_") == fld for fl in r.flags)]
    return out[:6]


def derived(f: Failure, report: Report) -> str:
    """What the source says this failure involves, for a failure no specific signature explains:
    derived from the guard and the message, never a confirmed workaround."""
    pairs = derived_settings(f, report)
    if not pairs:
        return ""
    parts = [_code_inline(name) + (f" (this run: {_code_inline(value)})" if value is not None else "")
             for name, value in pairs]
    return ("Derived from the source, not a confirmed workaround: the check that raised this reads "
            + ", ".join(parts) + "; a change to these settings is where to start.")


def shortpath(p: str) -> str:
    """The module path of a frame's file; for a code span (the `code` filter makes it safe)."""
    from triage.core.fingerprint import module_path

    return module_path(p)


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_TEMPLATES)),
        autoescape=False,  # Markdown, not HTML: values are made safe by the filters above
        trim_blocks=False,
        lstrip_blocks=False,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(shquote=shlex.quote, prose=prose, inline=inline, code=_code_inline, codeblock=codeblock, evidence=failure_evidence, evidence_lines=evidence_lines, where=where,
                       change=change, load=load, seconds=seconds, size=size, properfix=properfix,
                       shortpath=shortpath, raised=raised, derived=derived,
                       host_section=host_section)
    return env


TEMPLATE = _TEMPLATES / "report.md.j2"


def precompiled_source(env: jinja2.Environment, source: str) -> str:
    """The template compiled to Python, with what it was made from (scripts/compile_template.py)."""
    code = env.compile(source, TEMPLATE.name, TEMPLATE.name, raw=True, defer_init=True)
    return ("# ruff: noqa\n# Generated by scripts/compile_template.py from templates/report.md.j2; do not edit.\n"
            f"TEMPLATE_SHA256 = {_digest(source)!r}\nJINJA2_VERSION = {jinja2.__version__!r}\n{code}\n")


def _digest(source: str) -> str:
    import hashlib

    return hashlib.sha256(source.encode("utf-8")).hexdigest()


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    """The report template: the precompiled module when it was made from this very template
    by this jinja2 (compiling it is ~35 ms of a run), else compiled now."""
    import types

    env = _env()
    pre: types.ModuleType | None
    try:
        from triage.render import report_template as pre
    except ImportError:
        pre = None
    if (pre is not None and jinja2.__version__ == pre.JINJA2_VERSION
            and _digest(TEMPLATE.read_text(encoding="utf-8")) == pre.TEMPLATE_SHA256):
        return env.template_class.from_module_dict(env, vars(pre), env.make_globals(None))
    return env.get_template(TEMPLATE.name)


_ENV_ROWS = [("version", "version"), ("model", "model"), ("GPU", "gpu"), ("GPU memory (GiB)", "gpu_memory_gib"),
             ("GPUs", "gpu_count"), ("TP size", "tp_size"), ("DP size", "dp_size"),
             ("PP size", "pp_size"), ("attention backend", "attention_backend"),
             ("KV-cache dtype", "kv_cache_dtype"), ("quantization", "quantization"),
             ("CUDA graphs", "cuda_graph"), ("prefix cache", "prefix_cache"), ("config printed at line", "config_line")]


def _blamed(r: Report) -> HostEvent | None:
    if r.host is None or r.host.attribution.cause is None:
        return None
    return r.host.events[r.host.attribution.cause]


def _event_words(ev: HostEvent) -> str:
    if ev.xid is not None:
        return f"Xid {ev.xid}" + (f" {ev.mnemonic}" if ev.mnemonic else "")
    return ev.kind


def _headline(r: Report) -> str:
    ev = _blamed(r)
    if ev is not None:
        where_ = f" on GPU {ev.gpu}" if ev.gpu is not None else ""
        return f"host fault: {_event_words(ev)}{where_}" + (f"; {_headline_log(r)} in the log" if r.failures else
                                                             "; no error in the server log")
    return _headline_log(r)


def _headline_log(r: Report) -> str:
    fatal = r.fatal_failures
    survived = r.request_failures
    n = len(fatal)
    if not r.failures and not r.findings:
        return "no failure found"
    known = {x.failure for x in r.findings if x.failure is not None and not x.generic and x.failure < n}
    unknown = n - len(known)
    parts = [f"{n} failure{'s' if n != 1 else ''}"] if n else ["no process-level failure"]
    if n:
        parts.append("known" if unknown == 0 else ("unknown" if not known else f"{unknown} unknown"))
    if survived:
        parts.append(f"{len(survived)} request-level error{'s' if len(survived) != 1 else ''} survived")
    loose = [x for x in r.findings if x.failure is None]
    if loose:
        parts.append(f"{len(loose)} other match{'es' if len(loose) != 1 else ''}")
    return ", ".join(parts)


def _applied_words(w: Workaround) -> str:
    """What is already so, in the words of the change: flags, env, or the flags it goes without."""
    return (" ".join(w.flags + w.env) or " ".join(f"without {f}" for f in w.remove_flags) or w.title)


def _non_default(r: Report) -> str:
    return " ".join(r.environment.launch_args)[:1500]


def _host_summary(r: Report, top, top_failure) -> list[str]:  # noqa: ANN001
    """The first screen when a host record explains the failure: the host's verdict and action
    first, what the server log alone would have said after it."""
    att = r.host.attribution  # type: ignore[union-attr]
    ev = r.host.events[att.cause]  # type: ignore[union-attr,index]
    out = [f"**Verdict:** {_sentence(att.verdict or '')} Evidence: {inline(shortpath(ev.source))} line {ev.line}."]
    out.append(f"**Do now:** {_sentence(att.do_now or ev.action or '')}")
    if ev.investigate and ev.investigate != (att.do_now or ev.action):
        out.append(f"**Then investigate:** {_sentence(ev.investigate)}")
    if top is not None:
        seen = f"{inline(top.title)} (`{top.signature}`)" + (f", {where(top_failure)}" if top_failure else "")
        out.append(f"**What the server log shows:** {seen}. Its advice is kept below, marked not applicable: "
                   "it would not have prevented a host fault.")
    elif r.failures:
        f = r.failures[0]
        out.append(f"**What the server log shows:** {_code_inline(f.exception)}, {where(f)}.")
    return out


def host_section(r: Report) -> str:
    """The host records: what was read and on which clock, ranks to GPUs, and the host events
    interleaved with the server's milestones, newest last; the blamed event marked."""
    h = r.host
    if h is None:
        return ""
    out = ["## Host records", "", "| record | kind | lines | events | clock |", "|---|---|---:|---:|---|"]
    for s in h.sources:
        clock = s.clock or f"not placed: {s.clock_note or 'no time in it'}"
        out.append(f"| {inline(shortpath(s.path))} | {s.kind} | {s.lines:,} | {s.events} | {inline(clock)} |")
    att = h.attribution
    if att.ranks:
        ranks = ", ".join(f"{inline(k)} on GPU {v}" for k, v in att.ranks.items())
        out += ["", f"**Ranks and GPUs:** {ranks}" + (f" ({inline('; '.join(att.how))})" if att.how else "") + "."]
    gpus = ", ".join(f"GPU {g.index} {g.bus_id or ''}".rstrip() for g in h.gpus)
    if gpus:
        out += ["", f"**GPUs (nvidia-smi):** {inline(gpus)}."]
    # ordered by time relative to the failure (the records' clocks are already the log's);
    # events with no place on the clock last, in the order their records hold them
    rows: list[tuple[float, str]] = []
    for ev in h.events:
        mark = "**cause**" if ev.blamed else inline(ev.note or "")
        gpu = f"GPU {ev.gpu}" if ev.gpu is not None else (inline(ev.bus_id) if ev.bus_id else "")
        when = (inline(ev.time) if ev.time else "-")
        rel = ""
        if ev.seconds_before_failure is not None:
            b = ev.seconds_before_failure
            rel = f"{seconds(abs(b))} {'before' if b >= 0 else 'after'}"
        key = -ev.seconds_before_failure if ev.seconds_before_failure is not None else float("inf")
        rows.append((key, f"| {when} | {rel} | {inline(shortpath(ev.source))}:{ev.line} | "
                                     f"{inline(_event_words(ev))}: {inline(_clip(ev.text, 160))} | {gpu} | {mark} |"))
    fatal = r.fatal_failures
    if fatal:
        f = fatal[0]
        rows.append((0.0, f"| {inline(h.failure_time or f.time or '')} | failure | server log:{f.line} | "
                                f"{inline(f.exception)}: {inline(_clip(f.message, 120))} | "
                                f"{inline(', '.join(f.ranks[:4]))} | |"))
    rows.sort(key=lambda row: row[0])
    if rows:
        out += ["", "| time (server log's clock) | relative to the failure | record:line | event | GPU | |",
                "|---|---|---|---|---|---|"]
        out += [row for _, row in rows]
    if h.failure_time_from:
        out += ["", f"Times are measured from {inline(h.failure_time_from)}" + (
            f", {inline(h.failure_time)}." if h.failure_time else ".")]
    if att.cause is None and h.events:
        out += ["", "No host event is blamed: " + ("none is a hardware or host fault on this failure's GPUs shortly "
                                                   "before it." if any(e.time for e in h.events) else
                                                   "none could be placed on the server log's clock.")]
    return "\n".join(out) + "\n"


def _summary(r: Report, top, top_failure) -> list[str]:  # noqa: ANN001
    """The first screen: verdict, what to do now, what it costs, the proper fix."""
    if _blamed(r) is not None:
        return _host_summary(r, top, top_failure)
    if not r.failures and not r.findings:
        ready = ""
        if r.timeline.ready:
            ready = f"; the server became ready at line {r.timeline.ready.line}"
            if r.timeline.ready_seconds is not None:
                ready += f" ({seconds(r.timeline.ready_seconds)} after the first line)"
        return [f"**Verdict:** no failure found in {r.lines:,} lines{ready}."]
    if r.exit_code == 0:
        n = len(r.request_failures)
        return [f"**Verdict:** the server did not die: no process-level failure in {r.lines:,} lines. "
                f"{n} request-level error{'s' if n != 1 else ''} it survived {'is' if n == 1 else 'are'} listed below."]
    out = []
    if top is not None and not top.generic:
        v = (f"**Verdict:** {inline(top.title)} (`{top.signature}`, confidence {top.confidence:.2f})"
             + (f", {where(top_failure)}" if top_failure else "")
             + (f", while {top_failure.phase}" if top_failure is not None and top_failure.phase else "")
             + _load_at_crash(r) + ".")
        if top.unlikely:
            v += f" Unlikely: {inline(top.unlikely)}."
        out.append(v)
        rec = do_now(r, top)
        if rec is not None:
            out.append(f"**Do now:** {change(rec)}. Cost: {_sentence(rec.measured_cost or rec.cost)}")
        applied = [_applied_words(w) for w in top.workarounds if w.status == "already-applied"]
        if applied:
            out.append(f"**Already applied:** {inline(', '.join(applied))}; it did not prevent this failure.")
        fix = properfix(top)
        if fix:
            out.append(fix)
        if top.debug and top.debug.env:
            note = f": {_sentence(top.debug.note)}" if top.debug.note else "."
            out.append(f"**To see the real cause:** re-run with {_code_inline(' '.join(top.debug.env))}{note}")
        elif top.debug and top.debug.note:
            out.append(f"**To see the real cause:** {_sentence(top.debug.note)}")
        return out
    f = r.failures[0]
    msg = f": {inline(_clip(f.message, 200))}" if f.message else ""
    phase = f", while {f.phase}" if f.phase else ""
    generic = f" (only the generic `{top.signature}`: {inline(top.title)})" if top is not None else ""
    located = ""
    if f.raised_at:
        site = f.raised_at[0]
        name = PACKAGE_NAMES.get(site.package, site.package)
        guard = ""
        if site.condition:
            guard = (", an assertion on " if site.exception == "AssertionError" else " when ") + _code_inline(site.condition)
        if site.template.startswith("assert ") and not f.message.strip():
            located = (f" The assertion is {name}'s own: {_code_inline(site.template)} in "
                       f"{_code_inline(site.file)} ({_code_inline(site.function)}).")
        else:
            located = (f" The message is {name}'s own: raised in {_code_inline(site.file)} "
                       f"({_code_inline(site.function)}){guard}.")
    out.append(f"**Verdict:** unknown failure: {_code_inline(f.exception)}{msg}, {where(f)}{phase}. "
               f"No specific catalogue signature matches{generic}; the frames, the fingerprint and a "
               f"catalogue skeleton command are below.{located}")
    first = do_now(r, top)
    if first is not None:  # advice the log contradicts (not-applicable, already applied) is never "Do now"
        out.append(f"**Do now:** {change(first)}." + (f" {derived_note(first)}" if first.source == "feature-switch" else ""))
    off = [x for x in f.features if x.state == "off"]
    if off:
        out.append("**Already off:** " + "; ".join(f"{inline(x.title)} ({inline(x.reason)})" for x in off) + ".")
    engine = [h for h in f.hints if h.source == "engine-hint" and h.status == "recommended"]
    if engine:
        out.append("**The engine's own suggestions:** " + "; ".join(
            _code_inline(h.action or "") for h in engine[:4]) + ". They are generic advice for this error, "
            "not checked against the catalogue.")
    quoted = [h for h in f.hints if h.source != "engine-hint"]
    if quoted:
        out.append("**Advice-shaped lines in the log** (not a message the engine is known to print; "
                   "quoted as log text, not a recommendation):\n\n" + codeblock("\n".join(h.action or "" for h in quoted[:4]), "text"))
    return out


def _load_at_crash(r: Report) -> str:
    """The load the server was under when it died: a crash only at 512 requests must show."""
    lf, peak = r.timeline.last_load, r.timeline.peak_running
    if lf is None or lf.running is None:
        return ""
    out = f" at {lf.running} running requests"
    if lf.queued:
        out += f" ({lf.queued} queued)"
    if peak is not None and peak.running and peak.running > lf.running:
        out += f"; peak before it {peak.running}"
    return out


def _sentence(text: str) -> str:
    t = inline(text).rstrip()
    return t if t.endswith((".", "!", "?")) else t + "."


def render_markdown(r: Report) -> str:
    by_failure: dict[int, list] = {}
    for x in r.findings:
        if x.failure is not None:
            by_failure.setdefault(x.failure, []).append(x)
    top = r.findings[0] if r.findings else None
    top_failure = r.failures[top.failure] if top is not None and top.failure is not None else None
    applied = []
    if top is not None:
        applied = [_applied_words(w) for w in top.workarounds if w.status == "already-applied"]
    env_rows = [(label, getattr(r.environment, key)) for label, key in _ENV_ROWS
                if getattr(r.environment, key) not in (None, "") and key != "version"]
    tpl = _template()
    text = tpl.render(
        r=r, headline=_headline(r), top=top, top_failure=top_failure, applied=applied,
        summary=_summary(r, top, top_failure),
        findings_by_failure=by_failure, loose=[x for x in r.findings if x.failure is None],
        # each with its index in r.failures: looking it up per row (failures.index, a deep __eq__
        # over every failure before it) made the report quadratic in failures
        requests=[(i, f) for i, f in enumerate(r.failures) if not f.fatal],
        env_rows=env_rows, other_flags=_non_default(r),
    )
    return re.sub(r"\n{3,}", "\n\n", text)
