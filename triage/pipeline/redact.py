"""Secrets out of everything triage writes.

Reports get pasted into public issues and post-mortems, `triage new` skeletons get committed;
logs carry Hugging Face tokens, API keys, private keys and passwords in URLs. The rules are data
(triage/pipeline/secret_rules.py, derived from gitleaks'); this module applies them. It is called from
one place, triage/commands/output.py, which every output goes through.

Redaction works on text triage is about to write, never on the whole log: a report is bounded
(kept lines are capped), so the cost is too. Every pattern is bounded (no nested unbounded
repeats) and runs only on text holding one of its keywords.
"""

from __future__ import annotations

import math
import re
import shlex
from collections import Counter
from collections.abc import Iterable
from functools import cache
from typing import Any

from triage.core.models import Report
from triage.core.recache import re_compile
from triage.core.record import rebuilt_like
from triage.pipeline.gitleaks_rules import GLOBAL_ALLOW, GLOBAL_STOPWORDS
from triage.pipeline.secret_rules import IPV4, IPV6, NOT_SECRET_VALUE, RULES, SECRET_WORD, SecretRule

MASK = "[REDACTED]"

# names of settings and flags whose value is masked whatever it looks like
SECRET_SETTING = re_compile(rf"(?i)(?:^|[_-]){SECRET_WORD}$|passw(?:or)?d|secret")
_KEY_NAME = re_compile(r"(?i)[_-]?key$")
_CREDENTIAL_SHAPED = re_compile(r"(?=[A-Za-z0-9_+/-]{0,200}\d)(?=[A-Za-z0-9_+/-]{0,200}[A-Za-z])[A-Za-z0-9_+/-]{16,200}={0,2}")
_NOT_SECRET = re_compile(NOT_SECRET_VALUE + r"[\s\S]")
_IPV4, _IPV6 = re_compile(IPV4), re_compile(IPV6)
_MIXED = re_compile(r"(?=[^\n]{0,300}?[A-Za-z])(?=[^\n]{0,300}?[0-9])")
# a continuation line may carry a container runtime's prefix (CRI splits long lines into P/F parts)
_CONTINUATION = r"[ \t]*\r?\n(?P<gap>[ \t]*(?:\S{1,64} std(?:out|err) [PF] )?)"


# A rule's pattern is compiled the first time its keyword is seen (gitleaks' order: keyword
# first, regex second): a small report holds the keywords of a handful of the rules, and
# compiling all of them was a fifth of a 10 KB log's run.
@cache
def _pattern(rule: SecretRule) -> re.Pattern[str]:
    return re_compile(rule.regex)


@cache
def _wrap_pattern(rule: SecretRule) -> re.Pattern[str]:
    """A token of known length hard-wrapped: its first part ending a line, the rest starting the next."""
    assert rule.wrap is not None
    w = rule.wrap
    longest = 2 * max(w.lengths)  # room for a made-up or changed length (see _unwrap_mask)
    return re_compile(rf"(?P<p>{w.prefix})(?P<a>{w.chars}{{0,{longest - 1}}}){_CONTINUATION}"
                      rf"(?P<b>{w.chars}{{1,{longest}}})(?!{w.chars})")


_WRAPPED = tuple(i for i, r in enumerate(RULES) if r.wrap is not None)  # indices into RULES


def entropy(text: str) -> float:
    """Shannon entropy in bits per character (gitleaks gates its generic rule with it)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _masked(secret: str) -> str:
    """The mask, one per line of the secret, so that a masked block keeps its line count."""
    if "\n" not in secret:
        return MASK
    return "\n".join(MASK if part.strip() else part for part in secret.split("\n"))


@cache
def _allow_patterns(rule: SecretRule) -> tuple[tuple[str, tuple[re.Pattern[str], ...], tuple[str, ...]], ...]:
    return tuple((target, tuple(re_compile(r) for r in regexes), stop) for target, regexes, stop in rule.allow)


@cache
def _global_allow() -> tuple[re.Pattern[str], ...]:
    return tuple(re_compile(r) for r in GLOBAL_ALLOW)


_IDENT_BEFORE = re_compile(r"[\w.-]{1,50}\Z")


def _gitleaks_allows(rule: SecretRule, m: re.Match[str], secret: str) -> bool:
    """gitleaks' verdict on a match of one of its rules: under the entropy gate, a generic key
    without a digit, or allowlisted (the rule's lists and the global one)."""
    if rule.entropy and entropy(secret) <= rule.entropy:
        return True
    if rule.gitleaks.startswith("generic") and not any(c.isdigit() for c in secret):
        return True
    low = secret.lower()
    if any(w in low for w in GLOBAL_STOPWORDS) or any(p.search(secret) for p in _global_allow()):
        return True
    for target, patterns, stop in _allow_patterns(rule):
        if any(w in low for w in stop):
            return True
        if not patterns:
            continue
        if target == "secret":
            text = secret
        else:
            # the match as gitleaks sees it: with the identifier before the keyword, which
            # scripts/import_gitleaks.py takes off the front of the pattern (see there)
            head = _IDENT_BEFORE.search(m.string, max(0, m.start() - 50), m.start())
            start = head.start() if head else m.start()
            if target == "line":
                start = m.string.rfind("\n", 0, start) + 1
                end = m.string.find("\n", m.end())
                text = m.string[start:end if end >= 0 else len(m.string)]
            else:
                text = m.string[start:m.end()]
        if any(p.search(text) for p in patterns):
            return True
    return False


def _secret_span(m: re.Match[str], group: int) -> tuple[int, int]:
    """gitleaks' secret: its secretGroup, else the first group that matched, else the match."""
    if group and group <= (m.re.groups or 0) and m.group(group) is not None:
        return m.span(group)
    for g in range(1, m.re.groups + 1):
        if m.group(g):
            return m.span(g)
    return m.span(0)


def _masker(rule: SecretRule):  # noqa: ANN202 - a re.sub callback
    if rule.group is not None:
        return _gitleaks_masker(rule)

    def mask(m: re.Match[str]) -> str:
        keep = m.groupdict().get("keep") or ""
        secret = m.group(0)[len(keep):]
        if secret.startswith(MASK):  # masked already by an earlier rule
            return m.group(0)
        if rule.entropy and entropy(secret) < rule.entropy:
            return m.group(0)
        return keep + _masked(secret)
    return mask


def _gitleaks_masker(rule: SecretRule):  # noqa: ANN202 - a re.sub callback
    def mask(m: re.Match[str]) -> str:
        start, end = _secret_span(m, rule.group or 0)
        secret = m.string[start:end]
        if not secret or MASK in secret or _gitleaks_allows(rule, m, secret):
            return m.group(0)
        whole, at = m.group(0), m.start()
        return whole[:start - at] + _masked(secret) + whole[end - at:]
    return mask


def _unwrap_mask(rule: SecretRule):  # noqa: ANN202 - a re.sub callback
    """Both halves masked when they add up to the token's known length; or, for a token whose
    length is not the real one (made up, or a format that changed), when the next line starts
    with a run of letters *and* digits no longer than the token: a word (`Traceback`), a
    timestamp (`2025-01-01`) or a bracket never does."""
    assert rule.wrap is not None
    lengths = rule.wrap.lengths

    def mask(m: re.Match[str]) -> str:
        a, b = m.group("a"), m.group("b")
        exact = len(a) + len(b) in lengths
        if not exact and not (len(b) >= 4 and len(a) + len(b) <= 2 * max(lengths) and _MIXED.match(b)):
            return m.group(0)
        between = m.string[m.end("a"):m.start("b")]
        return MASK + between + MASK
    return mask


# (keyword, rule) for every rule's keywords: one flat pass per text finds the rules that apply
# (a generator per rule cost half of redacting a small report)
# Each keyword once, with the rules it gates: several rules share one (`key`, `token`), and one
# pass over them finds the rules that apply to a text (a generator per rule cost half of
# redacting a small report; a pair per rule and keyword, a search per pair).
Keywords = tuple[tuple[str, tuple[int, ...]], ...]
_KEYWORDS: Keywords = tuple(
    {k: tuple(i for i, r in enumerate(RULES) if k in r.keywords) for r in RULES for k in r.keywords}.items())


def _strings(value: Any, out: list[str]) -> list[str]:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _strings(k, out)
            _strings(v, out)
    return out


def keywords_in(value: Any) -> Keywords:  # noqa: ANN401 - plain data
    """The keywords (with their rules) that occur anywhere in `value`'s strings: one pass over
    all of them, each string once (a report repeats its lines: evidence, raw lines, messages), so
    that each of a report's ~500 strings is then checked for a handful of keywords, not 300."""
    low = "\n".join(dict.fromkeys(_strings(value, []))).lower()
    return tuple((k, rules) for k, rules in _KEYWORDS if k in low)


def rules_for(text: str, keywords: Keywords = _KEYWORDS) -> set[int]:
    """The rules whose keywords `text` holds, among those of `keywords`."""
    low = text.lower()
    return {i for k, rules in keywords if k in low for i in rules}


def redact_text(text: str, ips: bool = False, keywords: Keywords = _KEYWORDS) -> str:
    """`text` with every secret the rules know masked; newlines are kept, so a block of lines
    stays the same number of lines. `keywords`: a subset of the rules' keywords known to hold
    every one that `text` contains (keywords_in)."""
    if not text:
        return text
    hit = rules_for(text, keywords)
    if hit:
        if "\n" in text:
            for i in _WRAPPED:
                if i in hit:
                    text = _wrap_pattern(RULES[i]).sub(_unwrap_mask(RULES[i]), text)
        for i in sorted(hit):  # the table's order: triage's rules first, then gitleaks'
            rule = RULES[i]
            text = _pattern(rule).sub(_masker(rule), text)
    if ips:
        text = _IPV4.sub("[IP]", text)
        text = _IPV6.sub("[IP]", text)
    return text


def redact_lines(lines: list[str], ips: bool = False, keywords: Keywords = _KEYWORDS) -> list[str]:
    """Consecutive log lines, redacted together: a token hard-wrapped onto the next line or a
    private key's body below its BEGIN line is masked too."""
    if len(lines) < 2 or any("\n" in x for x in lines):
        return [redact_text(x, ips, keywords) for x in lines]
    out = redact_text("\n".join(lines), ips, keywords).split("\n")
    return out if len(out) == len(lines) else [redact_text(x, ips, keywords) for x in lines]


def _runs(items: list[dict]) -> Iterable[list[dict]]:
    """Runs of evidence items whose line numbers follow each other."""
    run: list[dict] = []
    for it in items:
        no = it.get("line")
        if run and not (isinstance(no, int) and isinstance(run[-1].get("line"), int) and no == run[-1]["line"] + 1):
            yield run
            run = []
        run.append(it)
    if run:
        yield run


def _walk(value: Any, ips: bool, kw: Keywords, keep: frozenset[str] = frozenset()) -> Any:
    if isinstance(value, str):
        return redact_text(value, ips, kw)
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and isinstance(v.get("text"), str) for v in value):
            out = [{k: (v if k == "text" else _walk(v, ips, kw, keep)) for k, v in item.items()} for item in value]
            for run in _runs(out):
                for item, text in zip(run, redact_lines([x["text"] for x in run], ips, kw), strict=True):
                    item["text"] = text
            return out
        return _flag_values([_walk(v, ips, kw, keep) for v in value], value)
    if isinstance(value, tuple):
        return tuple(_flag_values([_walk(v, ips, kw, keep) for v in value], value))
    if isinstance(value, dict):
        return {k: (v if k in keep else MASK if isinstance(k, str) and secret_setting(k, v) else _walk(v, ips, kw, keep))
                for k, v in value.items()}
    return value


def redact_data(value: Any, ips: bool = False, keep: frozenset[str] = frozenset()) -> Any:
    """Every string in plain data (a model's dump, a JSON event) with secrets masked; a value
    under a key named like a secret (`api_key`, `hf_token`) is masked whatever it looks like.
    `keep`: names whose values are triage's own (catalogue ids, fingerprints), never log text:
    left as they are (a signature id under `key` looked like a credential)."""
    return _walk(value, ips, keywords_in(value), keep)


_FINDING_TEXT = ("signature", "title", "explanation", "engine", "fixed_in", "fix_pr", "affects", "open_issue",
                 "no_upstream_fix", "references", "debug")
_WORKAROUND_TEXT = ("title", "cost", "env", "action")


def _blank(value: Any) -> Any:  # noqa: ANN401 - a field's value
    return "" if isinstance(value, str) else [] if isinstance(value, list) else value


def _drop_catalogue_text(data: dict[str, Any]) -> None:
    """The catalogue's words out of a report's dump (_catalogue_text puts them back): the
    explanations are most of a small report's text, and searching them for 300 keywords and
    masking them only to restore them was most of the cost of gitleaks' rule set."""
    for f in data.get("findings") or []:
        for name in _FINDING_TEXT:
            if name in f:
                f[name] = _blank(f[name])
        for w in f.get("workarounds") or []:
            if w.get("source") == "catalogue":
                for name in _WORKAROUND_TEXT:
                    if name in w:
                        w[name] = _blank(w[name])


def _catalogue_text(report: Report, out: Report) -> None:
    """Put back what the catalogue wrote (ids, titles, explanations, workarounds' words and
    placeholders): only text from the log is redacted. An engine's hint and advice quoted from
    the log are log text; a note or flag value can hold a value read from the log."""
    for x, y in zip(report.findings, out.findings, strict=True):
        for name in _FINDING_TEXT:
            setattr(y, name, getattr(x, name))
        for w, v in zip(x.workarounds, y.workarounds, strict=True):
            v.id = w.id
            if w.source == "catalogue":
                v.title, v.cost, v.env, v.action = w.title, w.cost, list(w.env), w.action  # _WORKAROUND_TEXT


def _after_secret_flag(prev: Any, arg: Any) -> bool:  # noqa: ANN401 - items of any list
    """`arg` is the value of the flag `prev` named like a secret (`--api-key`, then `KEY`)."""
    return (isinstance(prev, str) and isinstance(arg, str) and prev.startswith("-") and "=" not in prev
            and not arg.startswith("-") and bool(SECRET_SETTING.search(prev.lstrip("-").replace("-", "_"))))


def _flag_values(out: list[Any], items: list[Any] | tuple[Any, ...]) -> list[Any]:
    """A list printed from an argv (`argv=['python', ..., '--api-key', 'KEY']`, parsed into a
    list): the value after a flag named like a secret is masked whatever it looks like."""
    for i in range(1, len(items)):
        if _after_secret_flag(items[i - 1], items[i]):
            out[i] = MASK
    return out


def redact_argv(argv: list[str], ips: bool = False, keywords: Keywords = _KEYWORDS) -> list[str]:
    """An argv with secrets masked. A flag and its value are separate items, so the value after a
    flag named like a secret (`--api-key KEY`) is masked whatever it looks like."""
    return _flag_values([redact_text(arg, ips, keywords) for arg in argv], argv)


def redact_command(command: str, ips: bool = False, keywords: Keywords = _KEYWORDS) -> str:
    """A shell command line, masked word by word as the shell passes them (`--api-key "ab'cd"`,
    printed back by shlex as `--api-key 'ab'"'"'cd'`, is one value: a pattern over the printed
    line saw `'ab'` and left the rest), then quoted again; a line the shell cannot split is
    masked as text."""
    try:
        words = shlex.split(command)
    except ValueError:
        return redact_text(command, ips, keywords)
    masked = redact_argv(words, ips, keywords)
    return redact_text(command if masked == words else shlex.join(masked), ips, keywords)


def redact_env(env: dict[str, str], ips: bool = False) -> dict[str, str]:
    return {k: MASK if secret_setting(k, v) else redact_text(v, ips) for k, v in env.items()}


def redact_report(report: Report, ips: bool = False) -> Report:
    """A copy of `report` with secrets (and, with `ips`, IP addresses) masked everywhere."""
    data = report.model_dump()
    _drop_catalogue_text(data)  # put back as it is after the walk: neither searched nor masked
    kw = keywords_in(data)  # every string below is in `data`
    out = rebuilt_like(report, _walk(data, ips, kw))
    _catalogue_text(report, out)
    # a flag and its value are separate items (`--api-key`, `KEY`): masked as a pair
    out.environment.launch_args = redact_argv(report.environment.launch_args, ips, kw)
    if report.environment.launch_command:
        out.environment.launch_command = redact_command(report.environment.launch_command, ips, kw)
    if report.patched_command:
        out.patched_command = redact_command(report.patched_command, ips, kw)
    out.diagnostics = [redact_text(d, ips, kw) for d in report.diagnostics]
    if report.chart is not None:
        # figures, line numbers and seconds; only the marks' labels quote the log (an exception, a host event)
        marks = [m.model_copy(update={"label": redact_text(m.label, ips, kw)}) for m in report.chart.marks]
        out.chart = report.chart.model_copy(update={"marks": marks})
    return out


def secret_setting(name: str, value: Any) -> bool:
    """A setting named like a secret (`api_key`, `hf_token`, `ssl_keyfile_password`, `PGPASSWORD`)
    that holds something: its value is masked. Unset values, switches and numbers are not secrets;
    a `*_key` setting (`cache_key`) only when its value is shaped like a credential."""
    if value in (None, "", False, True, [], {}) or isinstance(value, (int, float)):
        return False
    if not isinstance(value, (str, list, tuple)):
        return False
    text = value if isinstance(value, str) else " ".join(str(v) for v in value)
    if not _NOT_SECRET.match(text.strip() + " "):
        return False
    name = str(name)
    if SECRET_SETTING.search(name):
        return True
    return bool(_KEY_NAME.search(name)) and bool(_CREDENTIAL_SHAPED.fullmatch(text.strip()))
