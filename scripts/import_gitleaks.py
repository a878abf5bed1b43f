#!/usr/bin/env python3
"""Regenerate triage/pipeline/gitleaks_rules.py from gitleaks' default rule set.

usage: python3 scripts/import_gitleaks.py PATH/TO/gitleaks.toml

PATH/TO/gitleaks.toml is a copy of gitleaks' config/gitleaks.toml (MIT licence), kept outside this
repository (nothing of gitleaks is committed here but the table this script derives); the
commit it came from is named in its first line and in the generated module. Every rule that has a content pattern is taken (the one rule that only
names a file, `pkcs12-file`, has nothing to look for in a log), with its keywords, entropy,
secret group and allowlists. The rule's `path` condition (`.tf`, `.yaml`) is dropped: a log has
no file name, and a Terraform password or a Kubernetes Secret printed into it is still one.

The patterns are Go (RE2) syntax; three things are translated for Python's `re`:
- a flag group in the middle of a pattern (`\\b(p8e-(?i)[a-z0-9]{32})`) applies to the rest of
  its group in Go and is an error in Python: it becomes a scoped group (`(?i:...)`), reopened
  after each `|` of that group as Go's scope is;
- POSIX classes (`[[:alnum:]]`) and `\\z`;
- the `[\\w.-]{0,50}?` that most rules put before their keyword only widens the match (the
  identifier the keyword is part of); with a backtracking engine it multiplies the cost of every
  position of a line by 50, so it is dropped, and the allowlists that read the match see it
  widened by those characters again at run time (redact.py). Likewise the `\\bcurl\\b(?:.*|...)`
  in front of curl's two rules (see CURL).

Each rule gets a made-up true positive generated from its own pattern (characters spread over
the pattern's classes so that it passes the rule's entropy gate) and, where one can be made by
cutting the secret short, a near miss; tests/test_secret_rules.py runs every rule on both.
"""

from __future__ import annotations

import math
import random
import re
import sys
from collections import Counter
from pathlib import Path
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]

import tomllib

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "triage" / "pipeline" / "gitleaks_rules.py"

POSIX = {"alnum": "A-Za-z0-9", "alpha": "A-Za-z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
         "xdigit": "0-9A-Fa-f", "space": r"\s", "word": r"\w", "punct": r"!-/:-@\[-`{-~", "blank": r" \t"}
PREFIX = r"[\w.-]{0,50}?"
# curl's rules look for the option anywhere in the 1 to 6 lines after `curl`: each `curl` in a
# line scanned to its end, so a line of many of them cost its length squared. The keyword
# already says there is a `curl`; the option and its value are looked for alone.
CURL = (r"\bcurl\b(?:.*?|.*?(?:[\r\n]{1,2}.*?){1,5})", r"\bcurl\b(?:.*|.*(?:[\r\n]{1,2}.*){1,5})")
# triage's one addition to gitleaks' lists: in a log, a keyword inside an exception's name is
# no setting (`KeyError: 'b6b76ae8-5a6c-...'` names a request, `TokenizerError: ...`)
GENERIC_IN_LOGS = ("match", (r"^\w*(?:Error|Exception|Warning)\s*:",), ())
FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]+)\)")


def translate(go: str) -> str:
    """A Go (RE2) pattern as a Python `re` one with the same meaning (see the module's doc)."""
    s = go.replace(r"\z", r"\Z")
    for name, cls in POSIX.items():
        s = s.replace(f"[[:{name}:]]", f"[{cls}]").replace(f"[:{name}:]", cls)
    if s.startswith("(?i)" + PREFIX):
        s = "(?i)" + s[len("(?i)" + PREFIX):]
    for head in CURL:
        if s.startswith(head):
            s = s[len(head):]
    out: list[str] = []
    frames: list[list[str]] = [[]]  # per open group: the flags scoped in it so far
    i, in_class = 0, False
    while i < len(s):
        c = s[i]
        if c == "\\":
            out.append(s[i:i + 2])
            i += 2
            continue
        if in_class:
            out.append(c)
            if c == "]" and not (out[-2] == "[" or out[-2:] == ["[", "^"]):
                in_class = False
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            if s.startswith("[^]", i) or s.startswith("[]", i):
                j = i + (3 if s[i + 1] == "^" else 2)
                out.append(s[i + 1:j])
                i = j
                continue
            i += 1
            continue
        m = FLAG_GROUP.match(s, i)
        if m and i > 0:
            out.append(f"(?{m.group(1)}:")
            frames[-1].append(m.group(1))
            i = m.end()
            continue
        if c == "(":
            frames.append([])
        elif c == ")":
            out.append(")" * len(frames.pop()))
        elif c == "|" and frames[-1]:
            out.append(")" * len(frames[-1]) + "|" + "".join(f"(?{f}:" for f in frames[-1]))
            i += 1
            continue
        out.append(c)
        i += 1
    out.append(")" * len(frames[0]))
    return "".join(out)


# -- a true positive made from the pattern itself -------------------------------------------

CANDIDATES = [chr(c) for c in range(33, 127)]


def _member(c: str, items: list, ignorecase: bool) -> bool:
    negate = False
    hit = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            hit |= c == chr(av) or (ignorecase and c.lower() == chr(av).lower())
        elif op is C.RANGE:
            lo, hi = av
            hit |= lo <= ord(c) <= hi or (ignorecase and (lo <= ord(c.lower()) <= hi or lo <= ord(c.upper()) <= hi))
        elif op is C.CATEGORY:
            name = str(av)
            yes = {"CATEGORY_DIGIT": c.isdigit(), "CATEGORY_WORD": c.isalnum() or c == "_",
                   "CATEGORY_SPACE": c.isspace()}
            base = name.replace("NOT_", "")
            if base in yes:
                hit |= yes[base] != ("NOT_" in name)
    return hit != negate


class Gen:
    def __init__(self, seed: int) -> None:
        rnd = random.Random(seed)
        self.order = CANDIDATES[:]
        rnd.shuffle(self.order)
        self.k = seed
        self.depth = 0  # inside a capture group: the secret, spread over its class

    def pick(self, pool: list[str]) -> str:
        if not pool:
            raise ValueError("empty class")
        if not self.depth and " " in pool:
            return " "
        self.k += 1
        return pool[(self.k * 7) % len(pool)]

    def gen(self, parsed, ignorecase: bool) -> str:  # noqa: ANN001
        out = []
        for op, av in parsed:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append(self.pick([c for c in self.order if c != chr(av)]))
            elif op is C.ANY:
                out.append(self.pick([c for c in self.order if c != "\n"]))
            elif op is C.IN:
                pool = [c for c in self.order + [" "] if _member(c, av, ignorecase)]
                out.append(self.pick(pool))
            elif op is C.BRANCH:
                out.append(self.gen(av[1][0], ignorecase))
            elif op is C.SUBPATTERN:
                group, add, _del, sub = av
                ic = (ignorecase or bool(add & re.IGNORECASE)) and not (_del & re.IGNORECASE)
                if group is not None:
                    self.depth += 1
                out.append(self.gen(sub, ic))
                if group is not None:
                    self.depth -= 1
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
                lo, hi, sub = av
                n = lo
                if self.depth:
                    n = lo if lo >= 32 else min(hi, 32)
                out.append("".join(self.gen(sub, ignorecase) for _ in range(n)))
            elif op is C.AT and av is C.AT_BOUNDARY and self.k % 2 and out and out[-1][-1:].isalnum():
                out.append(" ")  # some seeds: a word boundary between two words is a space
            elif op in (C.AT, C.GROUPREF):
                pass
            else:
                raise ValueError(f"unsupported {op}")
        return "".join(out)


def entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def secret_of(m: re.Match[str], group: int) -> tuple[int, int]:
    """gitleaks' choice: its secretGroup, else the first group that matched, else the match."""
    if group and m.lastindex and group <= m.re.groups:
        return m.span(group)
    for g in range(1, m.re.groups + 1):
        if m.group(g):
            return m.span(g)
    return m.span(0)


def allowed(secret: str, match: str, allow: list[dict], stop: list[str]) -> bool:
    if any(w in secret.lower() for w in stop):
        return True
    for a in allow:
        if a.get("paths") and a.get("condition") == "AND":
            continue
        target = {"match": match, "line": match}.get(a.get("regexTarget", ""), secret)
        if any(re.search(translate(r), target) for r in a.get("regexes", [])):
            return True
        if any(w in secret.lower() for w in a.get("stopwords", [])):
            return True
    return False


def example(rule: dict, pattern: re.Pattern[str], glob: dict) -> tuple[str, str]:
    parsed = P.parse(pattern.pattern, pattern.flags & ~re.MULTILINE)
    kw = rule.get("keywords", [])
    for seed in range(200):
        try:
            text = Gen(seed).gen(parsed, bool(pattern.flags & re.IGNORECASE))
        except ValueError:
            continue
        m = pattern.search(text)
        if not m:
            continue
        s, e = secret_of(m, rule.get("secretGroup", 0))
        secret = text[s:e]
        if len(secret) < 4 or (rule.get("entropy") and entropy(secret) <= rule["entropy"]):
            continue
        if rule["id"].startswith("generic") and not any(c.isdigit() for c in secret):
            continue
        if allowed(secret, m.group(0), rule.get("allowlists", []) + [glob], glob.get("stopwords", [])):
            continue
        if kw and not any(k in text.lower() for k in kw):
            text = f"{kw[0]} {text}"  # the keyword gates the rule: a log line names the service
            m = pattern.search(text)
            if not m or text[slice(*secret_of(m, rule.get("secretGroup", 0)))] != secret:
                continue
        if any(ord(c) < 32 and c != "\t" for c in text):
            continue
        return text, secret
    raise SystemExit(f"no example for {rule['id']}")


def near_miss(text: str, secret: str, pattern: re.Pattern[str]) -> str:
    for short in (secret[: max(1, len(secret) // 3)], secret[:3], "x"):
        miss = text.replace(secret, short, 1)
        if not pattern.search(miss) or pattern.search(miss).group(0) == "":  # type: ignore[union-attr]
            return miss
    return ""


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src = Path(sys.argv[1])
    text = src.read_text()
    commit = re.search(r"at commit ([0-9a-f]{40})", text)
    data = tomllib.loads(text)
    glob = data["allowlist"]
    rows, skipped = [], []
    for rule in data["rules"]:
        if "regex" not in rule:
            skipped.append(rule["id"])
            continue
        regex = "(?m)" + translate(rule["regex"])
        pattern = re.compile(regex)
        ex, secret = example(rule, pattern, glob)
        allow = []
        for a in rule.get("allowlists", []):
            if a.get("paths") and (a.get("condition") == "AND" or not (a.get("regexes") or a.get("stopwords"))):
                continue  # a condition on the file's path: a log has none
            allow.append((a.get("regexTarget", "secret"), tuple(translate(r) for r in a.get("regexes", [])),
                          tuple(a.get("stopwords", []))))
        if rule["id"] == "generic-api-key":
            allow.append(GENERIC_IN_LOGS)
        rows.append((rule["id"], tuple(rule.get("keywords", [])), regex, rule.get("secretGroup", 0),
                     float(rule.get("entropy", 0.0)), tuple(allow), ex, secret, near_miss(ex, secret, pattern)))
    lines = [
        '"""gitleaks\' default rule set as data. Generated by scripts/import_gitleaks.py from',
        f"gitleaks' config/gitleaks.toml (gitleaks commit {commit.group(1) if commit else '?'}, MIT licence,",
        "Copyright (c) 2019 Zachary Rice); do not edit by hand. Patterns translated from Go's syntax;",
        "examples made up from each pattern (no real credential is in this file).",
        f"Not taken: {', '.join(skipped) or 'none'} (a rule on a file's name, nothing to look for in a log).",
        '"""',
        "",
        "# fmt: off",
        "# (id, keywords, regex, secretGroup, entropy, allowlists (target, regexes, stopwords), example,",
        "#  the secret in it, a near miss or '')",
        "RULES: tuple[tuple[str, tuple[str, ...], str, int, float, tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...],",
        "                   str, str, str], ...] = (",
    ]
    for row in rows:
        lines.append(f"    {row!r},")
    lines.append(")")
    g_regexes = tuple(translate(r) for r in glob.get("regexes", []))
    lines.append("")
    lines.append("# gitleaks' global allowlist: values that are never secrets (placeholders, paths, true/false)")
    lines.append(f"GLOBAL_ALLOW: tuple[str, ...] = {g_regexes!r}")
    lines.append(f"GLOBAL_STOPWORDS: tuple[str, ...] = {tuple(glob.get('stopwords', []))!r}")
    lines.append("")
    lines.append("# every rule id of the source config, taken or not (tests check the set is taken whole)")
    lines.append(f"UPSTREAM_IDS: tuple[str, ...] = {tuple(r['id'] for r in data['rules'])!r}")
    DEST.write_text("\n".join(lines) + "\n")
    print(f"{len(rows)} rules written to {DEST.relative_to(ROOT)}; skipped: {skipped}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
