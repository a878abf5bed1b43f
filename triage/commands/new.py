"""Turn an unknown failure into the skeleton of a catalogue signature (`triage new`).

What can be derived from one occurrence is filled in: an id, the engine, a keyword (the
longest fixed run of words in the message), a pattern (the message with its variables
replaced by bounded character classes), the frames that matter, and the failure's own lines
as the first `match` example. What needs a person - the explanation, the workarounds, the
upstream references and a real near miss - is left as a TODO that `triage catalogue check`
refuses, so a skeleton cannot slip into a catalogue unreviewed.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, NamedTuple

import regex
import yaml

from triage.catalogue.models import ENGINES
from triage.core.fingerprint import top_frames
from triage.core.lazyre import lazy_regex
from triage.core.models import Failure, RaisedAt, Report
from triage.core.terminal import one_line

if TYPE_CHECKING:
    from triage.catalogue.load import Catalogue

EXCERPT_CAP = 30
MESSAGE_CAP = 240  # characters of the message the pattern describes; the rest varies or adds nothing
KEYWORD_CAP = 80

# The variable parts of a message, in priority order (the leftmost match wins; at the same
# position the earlier alternative). Each becomes a bounded class without groups, so the
# generated pattern has no nested quantifier and cannot backtrack catastrophically.
_VARIABLES: list[tuple[str, str]] = [
    ("uuid", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
    ("datetime", r"\b\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"),
    ("clock", r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b"),
    ("quoted", r"(?<!\w)'[^'\n]{0,200}'(?!\w)|(?<!\w)\"[^\"\n]{0,200}\"(?!\w)"),
    ("path", r"(?:\b[A-Za-z]:)?(?<![\w.])(?:/[\w.@+-]+){2,}/?"),
    ("ip", r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"),
    ("hex", r"\b0x[0-9a-fA-F]+\b"),
    ("hexid", r"\b(?=[a-f]*\d)[0-9a-f]{12,}\b"),
    ("shape", r"\[\s*\d+(?:\s*,\s*\d+)*\s*,?\s*\]"),
    ("tuple", r"\(\s*\d+(?:\s*,\s*\d+)+\s*,?\s*\)|\(\s*\d+\s*,\s*\)"),
    ("rank", r"\b(?:TP|DP|PP|EP|rank|Rank|RANK|GPU|gpu|cuda:|device |local_rank=|rank=|worker_)\s?\d+\b"),
    ("number", r"(?<![A-Za-z_\d])\d+(?:\.\d+)*(?:[eE][+-]?\d+)?"),
]
_VAR_RX = lazy_regex("|".join(f"(?P<{name}>{rx})" for name, rx in _VARIABLES))
_CLASSES = {
    "uuid": r"[0-9a-fA-F-]{36}",
    "datetime": r"\d{4}-\d\d-\d\d[ T][\d:.,]+",
    "clock": r"[\d:.]+",
    "path": r"\S+",
    "ip": r"[\d.:]+",
    "hex": r"0x[0-9a-fA-F]+",
    "hexid": r"[0-9a-f]+",
    "shape": r"\[[\d, ]+\]",
    "tuple": r"\([\d, ]+\)",
}
# a quoted name ('PrefillMetadata', 'page_table_1_flattened') is part of the message, not a variable
_QUOTED_NAME = lazy_regex(r"[A-Za-z_][\w.]{0,63}")
_META = lazy_regex(r"([\\.^$*+?{}\[\]|()])")

# Words that say nothing about which failure this is: a keyword made of them alone would fire
# on unrelated lines.
_COMMON_WORDS = """
a an the of to in on at by for from with without into onto as is are was were be been being
it its this that these those there here and or not no nor but if then else than so such
has have had do does did can could should would will may might must shall
error errors exception exceptions failed failure fail fails warning warnings traceback
most recent call last runtime value type key index assertion attribute object none null
true false file line self args kwargs function method call called got expected unexpected
please see check try details info debug raise raised during handling above another
"""
_COMMON = frozenset(_COMMON_WORDS.split())


def _escape(text: str) -> str:
    """Escape regex metacharacters only (spaces and other punctuation stay readable)."""
    return _META.sub(r"\\\1", text)


class Segment(NamedTuple):
    variable: bool
    text: str
    rx: str
    kind: str = "literal"


def segments(message: str) -> list[Segment]:
    """Split a message into literal and variable pieces, each with its regex."""
    out: list[Segment] = []
    pos = 0
    for m in _VAR_RX.finditer(message):
        kind = m.lastgroup or "number"
        text = m.group(0)
        if kind == "quoted" and _QUOTED_NAME.fullmatch(text[1:-1]):
            continue  # a quoted name is literal text; it is picked up with the run around it
        if m.start() > pos:
            lit = message[pos : m.start()]
            out.append(Segment(False, lit, _escape(lit)))
        if kind == "quoted":
            q = text[0]
            rx = f"{q}[^{q}]*{q}"
        elif kind == "rank":
            head = regex.match(r"\D*", text).group(0)  # type: ignore[union-attr]
            rx = _escape(head) + r"\d+"
        elif kind == "number":
            rx = r"\d+" if text.isdigit() else (r"[\d.]+" if "e" not in text.lower() else r"[\d.eE+-]+")
        else:
            rx = _CLASSES[kind]
        # two variables with nothing between them would be two adjacent unbounded classes
        if out and out[-1].variable and not any(c.isspace() for c in out[-1].text + text):
            prev = out.pop()
            out.append(Segment(True, prev.text + text, r"\S+", "token"))
        else:
            out.append(Segment(True, text, rx, kind))
        pos = m.end()
    if pos < len(message):
        lit = message[pos:]
        out.append(Segment(False, lit, _escape(lit)))
    return out


def generalise(message: str) -> str:
    """The message as a regex: literal text escaped, variables as bounded classes."""
    return "".join(s.rx for s in segments(message))


def readable(message: str) -> str:
    """The message with its variables named, for a title: `shape [<shape>] ...`."""
    return "".join(f"<{s.kind}>" if s.variable else s.text for s in segments(message))


def _distinct(words: list[str]) -> list[str]:
    return [w for w in words if len(w) >= 4 and w.lower() not in _COMMON]


def _best_window(run: str) -> str:
    """The run itself, or its most distinctive stretch of at most KEYWORD_CAP characters."""
    if len(run) <= KEYWORD_CAP:
        return run
    spans = [(m.start(), m.end()) for m in regex.finditer(r"\S+", run)]
    best, best_score = run[:KEYWORD_CAP].strip(), -1
    for i, (s, _) in enumerate(spans):
        for j in range(i, len(spans)):
            if spans[j][1] - s > KEYWORD_CAP:
                break
            cand = run[s : spans[j][1]]
            score = sum(len(w) for w in _distinct(regex.findall(r"[A-Za-z_]\w*", cand)))
            if score > best_score or (score == best_score and len(cand) > len(best)):
                best, best_score = cand, score
    return best


def choose_keyword(message: str) -> str | None:
    """The longest run of fixed words in the message (at least 4 characters) that is not made
    of common words only; None when the message is all variables and common words."""
    best: str | None = None
    for seg in segments(message[:MESSAGE_CAP]):
        if seg.variable:
            continue
        run = seg.text.strip(" \t:;,.-=")
        if len(run) < 4 or not _distinct(regex.findall(r"[A-Za-z_]\w*", run)):
            continue
        run = _best_window(run).strip(" \t:;,.-=")
        if best is None or len(run) > len(best):
            best = run
    return best


def _kebab(text: str) -> str:
    text = regex.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", text)
    return regex.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _layer(fail: Failure) -> str:
    """A layer tag: cuda / nccl from the message, else where the innermost engine frame lives
    (`sglang/srt/mem_cache/...` -> mem_cache, `torch/...` -> pytorch)."""
    text = f"{fail.exception} {fail.message}".lower()
    if "nccl" in text:
        return "nccl"
    if any(w in text for w in ("cuda", "cublas", "cudnn")):
        return "cuda"
    top = top_frames([(f.file, f.function) for f in fail.frames], n=1)
    parts = top[0].rpartition(":")[0].split("/") if top else []
    if parts and parts[0] == "torch":
        return "pytorch"
    if parts and parts[0] in ("sglang", "vllm", "tensorrt_llm", "text_generation_server"):
        inner = [p for p in parts[1:-1] if p not in ("srt", "v1", "_torch", "layers")]
        if inner:
            return inner[0].replace("_", "-")
    return "python"


def excerpt(fail: Failure, cap: int = EXCERPT_CAP) -> str:
    """The failure's own lines up to the exception line; at most `cap` lines: the header and the
    innermost frames, which are the ones a pattern and `frames` are about."""
    lines = [e for e in fail.raw if fail.exception_line is None or e.line <= fail.exception_line]
    while lines and not lines[-1].text.strip():
        lines.pop()
    if len(lines) > cap:
        lines = lines[:1] + lines[len(lines) - cap + 1 :]
    return "\n".join(e.text for e in lines) + "\n"


def _exception_text(fail: Failure, lines: list[str]) -> str | None:
    """The log line that prints the exception (with its prefix), from the excerpt."""
    head = fail.message.splitlines()[0][:60] if fail.message else fail.exception
    for text in reversed(lines):
        if head and head in text:
            return text
    return None


def _near_miss(line: str, keyword: str, pattern: regex.Pattern[str]) -> str:
    """`line` with the keyword's most distinctive word changed, so neither keyword nor pattern
    matches any more: a placeholder for a real near miss."""
    words = _distinct(regex.findall(r"[A-Za-z_]\w*", keyword)) or [keyword]
    word = max(words, key=len)
    alt = word.upper() if word.upper() != word else word.lower()
    altered = line.replace(keyword, keyword.replace(word, alt))
    if keyword in altered or pattern.search(altered):
        altered = line.replace(keyword, "")
    return altered


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _sq(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _block(text: str, col: int = 4) -> str:
    """One list item at column `col` holding `text`: a block scalar (`|`) when it round-trips
    (it keeps the log lines readable), else a double-quoted string."""
    pad, ind = " " * col, " " * (col + 2)
    body = "\n".join((ind + ln) if ln else "" for ln in text.rstrip("\n").split("\n"))
    head = "|2" if text[:1] in (" ", "\t") else "|"
    candidate = f"{pad}- {head}\n{body}\n"
    try:
        if text.endswith("\n") and not text.endswith("\n\n") and yaml.safe_load("k:\n" + candidate) == {"k": [text]}:
            return candidate
    except yaml.YAMLError:
        pass
    return f"{pad}- {_q(text)}\n"


def skeleton(report: Report, failure_index: int, log_text_excerpt: str | None = None) -> str:
    """A new catalogue signature (YAML text) for `report.failures[failure_index]`.

    `log_text_excerpt` is the first `match` example; by default the failure's own lines
    (`excerpt()`). Explanation, workarounds, references and the near miss are TODOs that
    `triage catalogue check` rejects until a person has filled them.
    """
    fail = report.failures[failure_index]
    engine = report.environment.engine if report.environment.engine in ENGINES else "any"
    exc = fail.exception.rsplit(".", 1)[-1]
    if exc.startswith("("):  # "(message)": a wrapper that dropped the type
        exc = ""
    message = (fail.message.splitlines() or [""])[0].strip()
    if len(message) > MESSAGE_CAP:
        message = message[:MESSAGE_CAP].rsplit(" ", 1)[0]
    text = log_text_excerpt if log_text_excerpt is not None else excerpt(fail)
    ex_lines = text.rstrip("\n").split("\n")
    exc_line = _exception_text(fail, ex_lines) or (ex_lines[-1] if ex_lines else "")
    bare = fail.raised_at[0].template if fail.raised_at and fail.raised_at[0].template.startswith("assert ") else None
    if bare and not message:
        # a bare assert prints no message: its code line, in the traceback, is what names it
        message = bare
        exc_line = next((ln for ln in reversed(ex_lines) if bare in " ".join(ln.split())), exc_line)

    keyword = choose_keyword(message)
    todo_keyword = keyword is None
    if keyword is None:
        keyword = exc if len(exc) >= 4 else (message[:40] or fail.exception)
    body = generalise(message)
    pattern = None
    for cand in ([f"{_escape(exc)}: {body}"] if exc and message else []) + [body, _escape(keyword)]:
        if not cand or keyword not in regex.sub(r"\\([^A-Za-z0-9])", r"\1", cand):
            continue
        try:
            rx = regex.compile(cand, regex.V0)
        except regex.error:
            continue
        if rx.search(exc_line):
            pattern = cand
            break
    if pattern is None:
        pattern = _escape(keyword)
    compiled = regex.compile(pattern, regex.V0)

    layer = _layer(fail)
    prefix = engine if engine != "any" else {"pytorch": "torch"}.get(layer, layer)
    words = [w.lower() for w in _distinct(regex.findall(r"[A-Za-z_]\w*", keyword))][:4]
    sid = "-".join(p for p in (prefix, _kebab(exc), _kebab(" ".join(words))) if p)
    sid = regex.sub(r"-+", "-", sid)[:80].strip("-")
    frames = []
    for fr in top_frames([(f.file, f.function) for f in fail.frames]):
        path, _, func = fr.rpartition(":")
        short = f"{path.rsplit('/', 1)[-1]}:{func}"
        if short not in frames:
            frames.append(short)
    site = fail.raised_at[0] if fail.raised_at else None
    if site is not None and not frames:
        frames.append(f"{site.file.rsplit('/', 1)[-1]}:{site.function.rsplit('.', 1)[-1]}")
    human = " ".join(readable(message).split())
    if len(human) > 100:
        human = human[:100].rsplit(" ", 1)[0] + " ..."
    title = f"{exc}: {human}" if exc else human
    where = f" on {', '.join(fail.ranks)}" if fail.ranks else ""
    phase = f" while {fail.phase}" if fail.phase else ""
    near = _near_miss(exc_line, keyword, compiled)

    out = [
        f"# Skeleton written by `triage new` from {one_line(report.source)}, failure at line {fail.line}",
        f"# (fingerprint {fail.fingerprint}). Fill in every TODO: `triage catalogue check` rejects",
        "# the entry until they are gone. In a private catalogue, prefix the id (acme-...).",
        f"id: {sid}",
        "# say what broke (the cause), not only what was printed",
        f"title: {_q(title)}",
        f"engine: {engine}",
        f"layer: {layer}",
        "severity: crash",
        "confidence: 0.85",
    ]
    if todo_keyword:
        out.append("# TODO: the message has no distinctive fixed text; pick a keyword a healthy log never prints")
    out.append(f"keywords: [{_q(keyword)}]")
    out.append("patterns:")
    out.append(f"  - {_sq(pattern)}")
    if frames:
        out.append(f"frames: [{', '.join(_q(f) for f in frames)}]")
    affects = _affects(site) if site is not None else None
    if site is not None:
        guard = ""
        if site.condition:
            guard = f", asserting {site.condition}" if site.exception == "AssertionError" else f", when {site.condition}"
        out.append(f"# source atlas: {site.exception} raised in {site.file} ({site.function}), {site.package} "
                   f"{site.versions}{guard}")
    if affects:
        out.append("# the releases that raise this message; narrow it to the bug's range, or drop it for a")
        out.append("# configuration error (then no_upstream_fix says why)")
        out.append(f"affects: {_q(affects)}")
    out += [
        "explanation: |",
        f"  TODO: explain what failed ({exc or 'the error'}{where}{phase}), why it fails in this",
        "  situation, the usual causes (most likely first), how to tell them apart, and what fixes it.",
        "# workaround ids from workarounds/ (`triage signatures`, `triage show ID`), best first",
        "workarounds: [TODO-workaround-id]",
        "# the proper fix: fixed_in (first fixed release) + fix_pr (merged PR URL) / affects, open_issue (the",
        "# upstream thread, not fixed yet) or no_upstream_fix (why no release will fix it); keep one",
        "open_issue: https://github.com/TODO/upstream-issue",
        "references:  # real upstream issues or PRs this failure was checked against",
        *([f"  - {site.link}  # where the message is raised (source atlas)"] if site is not None and site.link else []),
        "  - https://github.com/TODO/upstream-issue-or-pr",
        "examples:",
        "  match:",
        _block(text).rstrip("\n"),
        "  no_match:",
    ]
    miss = ("# TODO: replace with a real near miss (a line a careless pattern could catch);"
            " this one is generated\n" + near + "\n")
    out.append(_block(miss).rstrip("\n"))
    return "\n".join(out) + "\n"


def _affects(site: RaisedAt) -> str | None:
    """A version specifier for the releases a site raises its message in (first to last, open
    when the newest release the atlas read still raises it)."""
    ranges = site.message_versions or site.versions
    if site.package not in ENGINES or not ranges:
        return None
    from triage.catalogue.atlas import shipped

    atlas = shipped()
    pkg = atlas.packages.get(site.package) if atlas else None
    if pkg is not None and not pkg.engine:
        return None  # a library's releases (the Triton compiler's 3.1.0) are not the engine's (Triton server's)
    spans = [p.strip() for p in ranges.split(",")]
    first = spans[0].split("-", 1)[0]
    last = spans[-1].split("-", 1)[-1]
    newest = pkg.versions[-1] if pkg is not None else None
    return f">={first}" if last == newest else f">={first},<={last}"


def first_unknown(report: Report) -> int | None:
    """Index of the first failure that no specific finding explains: one that only a generic
    signature (a wrapper many causes share) or an unlikely match names is unknown, as the
    report and `analyze DIR`'s grouping (commands/many.filed) call it."""
    known = {f.failure for f in report.findings if f.failure is not None and not f.generic and not f.unlikely}
    return next((i for i in range(len(report.failures)) if i not in known), None)


def skeleton_for(log: str, cat: Catalogue, failure: int | None = None) -> str:
    """`triage new`: the skeleton for failure number `failure` (1-based) of `log`, or for the
    first failure no specific signature explains."""
    from triage.commands.output import Output
    from triage.core.errors import TriageError
    from triage.pipeline.analyze import analyze_file

    # the excerpt becomes a catalogue example, which gets committed and shared: always redacted
    report = Output(redact=True).report(analyze_file(log, cat))
    if not report.failures:
        raise TriageError(f"{log}: no failure found, nothing to describe")
    if failure is None:
        index = first_unknown(report)
        if index is None:
            raise TriageError(f"{log}: every failure already has a specific signature (pick one with --failure N)")
    elif not 1 <= failure <= len(report.failures):
        raise TriageError(f"--failure {failure}: the report has {len(report.failures)} failure(s)")
    else:
        index = failure - 1
    return skeleton(report, index)
