"""Where each failure's message is raised in the released source (the source atlas).

Runs once the failures are final, on the few a report keeps (never on the scan's hot path):
each failure's message, and the messages of its chain, are looked up in the atlas through its
rarest-word index; a template that matches the whole message (or, for a message the log cut
off, its start) gives the sites that raise it. The log's version picks the site of exactly
that release when a message moved between files.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

from triage.catalogue.atlas import (
    BARE,
    HOLE,
    MIN_LITERAL,
    MIN_PREFIX,
    Atlas,
    PackageInfo,
    Template,
    filled,
    first_line,
    literal,
    segments,
    shipped,
    span_text,
)
from triage.core.models import Environment, Failure, RaisedAt
from triage.pipeline.parse.lines import LogLine

MAX_FAILURES = 64  # a noisy log keeps thousands of request errors; the first ones are enough
MAX_SITES = 4  # per failure: the same message raised in more places says little more
# more distinct sites than this for one message: too common a text to say where it came from
AMBIGUOUS = 12
_TRAIL = r"[\s.:;,!)\]'\"]*"
# a quoted message: it opens and closes on a word, not on the space between two quoted names
# ("'X' object has no attribute 'y'" quotes nothing)
_QUOTED = re.compile(r"(?:\b(?P<exc>[A-Z]\w*(?:Error|Exception))\()?(?P<q>['\"])(?P<msg>[^'\"\s][^'\"]{14,}?[^'\"\s])(?P=q)")
_EXC_CLASS = re.compile(r"(Error|Exception|Interrupt|Exit|Warning)$")
_DOTTED_EXC = re.compile(r"(?:[a-z_]\w*\.)+([A-Z]\w*): ")  # module.path.ClassName: message
# with a traceback, a site off its stack still counts for a long message raised as the class
# the log shows (a pasted traceback often lacks its innermost frames); a short one does not
OFF_STACK_LITERAL = 40
# pydantic (vLLM's configs from 0.10 on are pydantic dataclasses) reports a ValueError or an
# assert raised in a validator as "N validation error(s) for X" and puts the engine's own
# message on the lines below: "  Value error, <message> [type=value_error, input_value=...]"
_PYDANTIC_HEAD = re.compile(r"\d+ validation errors? for \w+")
_PYDANTIC_ITEM = re.compile(r"(?P<kind>Value error|Assertion failed), (?P<msg>.+?)(?:\s*\[type=\w+|\Z)", re.DOTALL)
_PYDANTIC_CLASS = {"Value error": "ValueError", "Assertion failed": "AssertionError"}
PYDANTIC_LINES = 12  # lines of a validation error read below its head
CUT_SCAN = 4096  # characters of a cut-off message compared with a template's start
# Python's own messages: an engine file that raises the same words by hand (a __getattr__ that
# imitates AttributeError, an import helper) is where such a message came from only when the
# traceback passes through that file; with no traceback it says nothing of where it came from
_PYTHON_OWN = re.compile(r"^'[^']*' object has no attribute '|^No module named |^name '\w+' is not defined|"
                         r"missing \d+ required (?:positional|keyword-only) arguments?|"
                         r"got an unexpected keyword argument|^(?:list|tuple|string) index out of range$|"
                         r"object is not (?:subscriptable|callable|iterable)|^cannot import name ")


def locate(failures: list[Failure], env: Environment, atlas: Atlas | None = None,
           lines: Mapping[int, LogLine] | None = None, last_line: int | None = None) -> None:
    """Fill `raised_at` of each failure whose message the atlas knows.

    `lines` (the kept lines by number) lets a message that goes on below its exception line be
    read whole; `last_line` is the log's last line: a message printed there may be cut off."""
    todo = [f for f in failures[:MAX_FAILURES] if _bare_code(f) or any(
        len(first_line(m or "").strip()) >= MIN_LITERAL for m in (f.message, *(c.message for c in f.chain)))]
    if not todo:
        return  # the atlas is not even opened
    atlas = atlas if atlas is not None else shipped()
    if atlas is None:
        return
    for f in todo:
        f.raised_at = locate_failure(f, env, atlas, lines or {}, last_line)


def _pydantic_items(f: Failure, lines: Mapping[int, LogLine]) -> list[tuple[str, str]]:
    """The engine's own messages a pydantic validation error carries on the lines below it."""
    if f.exception_line is None or not _PYDANTIC_HEAD.match(f.message.strip()):
        return []
    body: list[str] = []
    for no in range(f.exception_line + 1, f.exception_line + 1 + PYDANTIC_LINES):
        ln = lines.get(no)
        if ln is None or not ln.message.strip():
            break
        body.append(ln.message.strip())
        if "[type=" in ln.message:
            break
    return [(_PYDANTIC_CLASS[m.group("kind")], " ".join(m.group("msg").split()))
            for m in _PYDANTIC_ITEM.finditer("\n".join(body))]


def locate_failure(f: Failure, env: Environment, atlas: Atlas, lines: Mapping[int, LogLine] | None = None,
                   last_line: int | None = None) -> list[RaisedAt]:
    # the log's last line may stop mid-message (a paste, a truncated file): its start still says
    # where it came from
    at_end = last_line is not None and f.exception_line == last_line
    # (exception, message, raised on the log's own stack, may be cut off): an item of a
    # validation error is read from the kept lines only, so its end may be missing
    texts: list[tuple[str, str, bool, bool]] = [(exc, msg, True, True) for exc, msg in _pydantic_items(f, lines or {})]
    texts.append((f.exception, f.message, True, at_end))
    texts += [(c.exception, c.message, True, False) for c in f.chain]
    if f.cause is not None:
        texts.append((f.cause.exception, f.cause.message, True, False))
    # a wrapper that quotes the real message: "Worker failed with error 'CUDA out of memory'",
    # "<Future finished exception=AssertionError('expected running sequences')>"; the quoted
    # exception was raised on another stack than the one the log shows
    for _, msg, _, _ in list(texts):
        for m in _QUOTED.finditer(first_line(msg or "")):
            texts.append((m.group("exc") or "", m.group("msg"), False, False))
    # `raise RuntimeError("a ", f"b {x}")` (commas for pluses) prints the arguments' tuple; the
    # atlas holds the first argument as the message
    for exc, msg, own, _ in list(texts):
        parts = _string_tuple(first_line(msg or "").strip())
        if parts:
            texts += [(exc, parts[0].strip(), own, False), (exc, "".join(parts).strip(), own, False)]
    # an exception line the parser took for a logged error's text: the class's name ends in
    # neither Error nor Exception ("triton.runtime.errors.OutOfResources: out of resource: ...")
    for exc, msg, own, cut in list(texts):
        dotted = _DOTTED_EXC.match(first_line(msg or ""))
        if dotted and exc in ("", "Error"):  # "Error": the label of a logged error line, not a class
            texts.append((dotted.group(1), msg[dotted.end():], own, cut))
    frames = [fr.file.replace("\\", "/") for fr in f.frames]
    frame_pkgs = {p for fr in frames for p in atlas.packages if f"/{p}/" in fr}
    seen: set[str] = set()
    for exc, msg, own_stack, may_be_cut in texts:
        line = first_line(msg or "").strip()
        if len(line) < MIN_LITERAL or line in seen:
            continue
        seen.add(line)
        hits = _best(atlas, exc, line, env.engine, frame_pkgs, frames if own_stack else [])
        if not hits and may_be_cut:
            # read whole first: most last lines are whole, and the cut-off reading tries many
            # more templates (those the line's first words point to)
            hits = _best(atlas, exc, line, env.engine, frame_pkgs, frames if own_stack else [], True)
        if hits:
            return _sites(hits, f, env, atlas)
    hits = _bare_assert(f, env.engine, atlas, frame_pkgs)
    return _sites(hits, f, env, atlas) if hits else []


def _bare_code(f: Failure) -> str | None:
    """The `assert ...` line of a failed bare assert: the innermost frame's code, or the
    message when it is that line (a report that quotes the assert instead of the traceback)."""
    if not f.exception.endswith("AssertionError"):
        return None
    code = " ".join((f.frames[-1].code or "").split()) if f.frames else ""
    if not code.startswith("assert "):
        code = " ".join(first_line(f.message).split()) if not f.frames else ""
    return code if code.startswith("assert ") and len(code) >= MIN_LITERAL else None


def _bare_assert(f: Failure, engine: str | None, atlas: Atlas, frame_pkgs: set[str]) -> list[tuple[Template, bool]]:
    """A bare `assert cond` has no message: the traceback's innermost frame says which assert
    failed (file, function, code line), and the atlas which releases have it there and what
    its condition reads."""
    code = _bare_code(f)
    if code is None:
        return []
    inner = f.frames[-1] if f.frames else None
    file = inner.file.replace("\\", "/") if inner else ""
    hits: list[tuple[Template, bool]] = []
    for t in atlas.bare_asserts(code):
        pkg = atlas.packages.get(t.package)
        if t.text != BARE + code or pkg is None or not _eligible(pkg, engine, frame_pkgs):
            continue
        on = tuple(s for s in t.sites if inner is None or (
            file.endswith("/" + s.file) and (not inner.function or s.function.rsplit(".", 1)[-1] == inner.function)))
        if on:
            hits.append((Template(package=t.package, exception=t.exception, text=t.text, sites=on), False))
    return hits if 0 < sum(len(t.sites) for t, _ in hits) <= AMBIGUOUS else []


def _string_tuple(line: str) -> list[str] | None:
    """The strings of a message printed as a tuple of strings ("('a ', 'b')"), else None."""
    if not (line.startswith("(") and line.endswith(")") and line[1:2] in ("'", '"')) or len(line) > CUT_SCAN:
        return None
    import ast

    try:
        got = ast.literal_eval(line)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if isinstance(got, tuple) and len(got) > 1 and all(isinstance(x, str) for x in got):
        return list(got)
    return None


def _eligible(pkg: PackageInfo, engine: str | None, frame_pkgs: set[str]) -> bool:
    # SGLang 0.3-0.4 carried vLLM's layers: another engine's message counts only when a frame
    # of the traceback runs through that engine's package
    return not pkg.engine or engine is None or pkg.name == engine or pkg.name in frame_pkgs


def _on_stack(site_file: str, frames: list[str]) -> bool:
    return any(fr.endswith("/" + site_file) for fr in frames)


def _best(atlas: Atlas, exc: str, line: str, engine: str | None, frame_pkgs: set[str],
          frames: list[str], at_end: bool = False) -> list[tuple[Template, bool]]:
    short = exc.rsplit(".", 1)[-1]
    python_own = bool(_PYTHON_OWN.search(line))
    if python_own and not frames:
        return []
    scored: list[tuple[float, Template, bool]] = []
    cut = at_end or _cut_off(line)
    for t in atlas.candidates(line, cut=cut):
        pkg = atlas.packages.get(t.package)
        if pkg is None or not _eligible(pkg, engine, frame_pkgs) or not _words_shown(t.text, line, cut):
            continue
        if frames:
            # with a traceback, the message was raised on its stack: a site elsewhere that
            # happens to print the same words (Python's own "'X' object has no attribute")
            # is not where it came from
            on = tuple(s for s in t.sites if _on_stack(s.file, frames))
            if on:
                t = Template(package=t.package, exception=t.exception, text=t.text, sites=on)
            elif python_own or not (t.exception == short and len(literal(first_line(t.text))) >= OFF_STACK_LITERAL):
                continue
        got = _match(t.text, line, at_end)
        if got is None:
            continue
        matched, partial = got
        if t.exception[:1].isupper() and t.exception != short and matched < 2 * MIN_LITERAL:
            continue  # a short message raised as another class is likely someone else's text
        # ("Error" is the label of a logged error line, not a class)
        if t.exception[:1].islower() and short != "Error" and _EXC_CLASS.search(short) and matched < OFF_STACK_LITERAL:
            continue  # an exception's message is raised, not logged: a short logged text is a look-alike
        score = matched + (0.5 if t.exception == short else 0) + (0.25 if pkg.engine and pkg.name == engine else 0)
        scored.append((score, t, partial))
    if not scored:
        return []
    top = max(s for s, _, _ in scored)
    best = [(t, p) for s, t, p in scored if s >= top - 0.01]
    if sum(len(t.sites) for t, _ in best) > AMBIGUOUS:
        return []
    return best


@lru_cache(maxsize=4096)
def _compiled(text: str, parts: int | None) -> re.Pattern[str]:
    # the source only: compiling the template's own pattern first (thrown away) doubled the cost,
    # and with re's own cache of 512 overrun, `catalogue check` spent 70% of its time compiling
    from triage.catalogue.atlas import pattern_source

    body = pattern_source(text, parts)
    more = r"(?:\s.*)?" if "\n" in text.strip() else ""
    return re.compile(body + (more + _TRAIL if parts is None else r"\Z"), re.DOTALL)


def _cut_off(line: str) -> bool:
    return line.rstrip().endswith(("...", "…")) or len(line) >= 100


@lru_cache(maxsize=8192)
def _head_words(text: str) -> tuple[str, ...]:
    return tuple(w for seg in segments(first_line(text)) if not seg.startswith(HOLE) for w in seg.split())


def _words_shown(text: str, line: str, cut: bool) -> bool:
    """Every literal word of the template's first line is in the line (its first three, for a
    line cut off): checked before a regex is compiled, since most candidates share only their
    key word with the line."""
    words = _head_words(text)
    return all(w in line for w in words) or (cut and all(w in line for w in words[:3]))


def _match(text: str, line: str, at_end: bool = False) -> tuple[int, bool] | None:
    """(literal characters matched, cut off?) when the template gives this message line
    (`at_end`: the line may have been cut off at any length: the log's last line, a message
    whose continuation lines were not kept). Its one caller, _best, has already checked that
    the line shows the template's words (_words_shown)."""
    cut = at_end or _cut_off(line)
    head = first_line(text)
    if _compiled(text, None).fullmatch(line):
        return len(literal(head)), False
    if not cut:
        return None
    # a message the log cut off ends anywhere in the template: inside a hole (a long path), or
    # mid-word in its own text ("(4.26 GiB KV cach"); what counts is the literal text it shows
    body = line.rstrip()[:CUT_SCAN]
    for tail in ("...", "…"):
        if body.endswith(tail):
            body = body[: -len(tail)].rstrip()
    segs = segments(head)
    for k in range(len(segs), 0, -1):
        seg = segs[k - 1]
        shown = len(literal("".join(segs[: k - 1])))
        if seg.startswith(HOLE):
            lit = shown if _compiled(text, k).fullmatch(body) else None
        else:
            lit = _ends_inside(text, k, seg, body, shown)
        if lit is not None:
            return (lit, True) if lit >= MIN_PREFIX else None
    return None


def _ends_inside(text: str, k: int, seg: str, body: str, shown: int) -> int | None:
    """Literal characters shown when `body` ends inside the template's k-th segment `seg` (its
    own text): the body's tail is a start of `seg`, and what comes before it gives the first
    k-1 segments (white space folded, as the log may re-wrap it)."""
    want = " ".join(seg.split())
    if not want:
        return None
    # the tail can only be a start of `seg` if it is not much longer than it (white space folds):
    # a long line is not searched from every position
    for p in range(max(0, len(body) - 4 * len(want) - 64), len(body)):
        if body[p] != want[0]:
            continue
        rest = " ".join(body[p:].split())
        if not want.startswith(rest):
            continue
        if (k == 1 and body[:p].strip()) or (k > 1 and not _compiled(text, k - 1).fullmatch(body[:p])):
            continue
        return shown + len(rest)
    return None


def _release_index(pkg: PackageInfo, version: str | None) -> int | None:
    """The atlas release a log's version falls in: that release, or the newest one before it
    (a dev build or a patch the atlas does not list)."""
    if not version:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        want = Version(version.lstrip("v"))
    except InvalidVersion:
        return None
    best = None
    for i, v in enumerate(pkg.versions):
        if Version(v) <= want:
            best = i
    return best


def _sites(hits: list[tuple[Template, bool]], f: Failure, env: Environment, atlas: Atlas) -> list[RaisedAt]:
    frames = [fr.file.replace("\\", "/") for fr in reversed(f.frames)]
    out: list[tuple[tuple, RaisedAt]] = []
    for t, partial in hits:
        pkg = atlas.packages[t.package]
        # the log's version is the engine's: a library named like an engine (the Triton compiler,
        # `triton`, and the Triton Inference Server, engine `triton`) is not picked by it
        vi = _release_index(pkg, env.version) if pkg.engine and pkg.name == env.engine else None
        everywhere = span_text(pkg.versions, [i for s in t.sites for i in s.releases()])
        for s in t.sites:
            idx = s.releases()
            run = next(((a, b, ln) for a, b, ln in s.runs if vi is not None and a <= vi <= b), None)
            in_version = None if vi is None else run is not None
            a, b, ln = run or s.runs[-1]
            rel_i = vi if run is not None and vi is not None else b
            # the traceback's line in this file: the releases that raise it at exactly that line
            # are the ones the server can have run (only a match is told: older Pythons number
            # a statement that spans lines by another of its lines)
            at = next((fr.line for fr in reversed(f.frames) if fr.line
                       and fr.file.replace("\\", "/").endswith("/" + s.file)), None)
            at_line = [i for a2, b2, ln2 in s.runs if ln2 == at for i in range(a2, b2 + 1)]
            if vi is None and at_line and at is not None:
                rel_i, ln = max(at_line), at
            release = pkg.versions[rel_i]
            on_stack = next((k for k, fr in enumerate(frames) if fr.endswith("/" + s.file)), len(frames))
            out.append(((in_version is False, not at_line, on_stack, -rel_i), RaisedAt(
                package=pkg.name, file=s.file, function=s.function, line=ln, release=release,
                versions=span_text(pkg.versions, idx), message_versions=everywhere, exception=t.exception, template=filled(t.text).lstrip(BARE),
                condition=s.condition or None, fields=list(s.names), flags=list(s.flags),
                link=pkg.link(release, s.file, ln), in_version=in_version, partial=partial,
                line_versions=span_text(pkg.versions, at_line) if at_line else None)))
    out.sort(key=lambda x: x[0])
    if any(r.in_version for _, r in out):
        out = [x for x in out if x[1].in_version]  # the log's release picks the site
    return [r for _, r in out[:MAX_SITES]]
