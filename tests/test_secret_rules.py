"""Every redaction rule on its own true positive and near miss (gitleaks style), driven by the
table in triage/pipeline/secret_rules.py; tokens hard-wrapped across lines; PEM bodies; bounded cost."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from conftest import linear

from triage.pipeline.redact import (
    MASK,
    _masker,
    _pattern,
    entropy,
    keywords_in,
    redact_data,
    redact_lines,
    redact_text,
    rules_for,
    secret_setting,
)
from triage.pipeline.secret_rules import RULES, SecretRule

IDS = [r.id for r in RULES]


def test_rule_ids_are_unique_and_keywords_lower_case():
    assert len(set(IDS)) == len(IDS)
    for r in RULES:
        assert r.keywords and all(k == k.lower() for k in r.keywords), r.id


@pytest.mark.parametrize("rule", RULES, ids=IDS)
def test_rule(rule: SecretRule):
    """Each rule's promises, in one test per rule (four tests per rule were 1,100 items, whose
    overhead under xdist cost more than the checks)."""
    masks_its_example(rule)
    leaves_its_near_miss_alone(rule)
    a_report_wide_keyword_pass_keeps_every_rule_a_string_needs(rule)
    the_mask_keeps_what_is_not_secret(rule)


def masks_its_example(rule: SecretRule) -> None:
    line = rule.example.format(s=rule.secret)
    assert re.search(rule.regex, line), "the rule's own regex finds its example"
    assert any(k in line.lower() for k in rule.keywords), "the keyword prefilter lets the example through"
    out = redact_text(line)
    assert rule.secret not in out and MASK in out, out


def a_report_wide_keyword_pass_keeps_every_rule_a_string_needs(rule: SecretRule) -> None:
    # redact_data finds the keywords once in all of the data's strings joined (keywords_in)
    line = rule.example.format(s=rule.secret)
    data = {"failures": [{"message": "RuntimeError: boom", "lines": ["x", line, line.upper()]}], "n": 3}
    kw = keywords_in(data)
    assert RULES.index(rule) in rules_for(line, kw) and RULES.index(rule) in {i for _, rules in kw for i in rules}
    assert rules_for(line, kw) == rules_for(line) and rules_for(line.upper(), kw) == rules_for(line.upper())
    assert rules_for("RuntimeError: boom", kw) == set() == rules_for("x", kw)
    assert rule.secret not in str(redact_data(data))
    assert keywords_in({"message": "RuntimeError: boom", "n": [1, 2.5, None]}) == ()


def test_the_keyword_pass_answers_as_every_rule_does_for_each_string_of_a_report():
    from pathlib import Path

    from triage.catalogue.load import load_catalogue
    from triage.pipeline.analyze import Options, analyze_file
    from triage.pipeline.redact import _strings

    root = Path(__file__).resolve().parents[1]
    cat = load_catalogue([])
    for log in sorted((root / "examples").glob("*.log")) + sorted((root / "tests" / "fixtures").glob("*.log")):
        data = analyze_file(str(log), cat, Options(workers=1)).model_dump()
        for extra in (["token=abc KEY", "password: hunter2-db"], ["token=abc İstanbul"]):  # lower() lengthens İ
            data["extra"] = extra
            kw = keywords_in(data)
            for text in _strings(data, []):
                assert rules_for(text, kw) == rules_for(text), (log.name, text[:80])
    assert not any("\n" in k for r in RULES for k in r.keywords)  # the joined text's separator


def leaves_its_near_miss_alone(rule: SecretRule) -> None:
    if rule.group is None:
        assert redact_text(rule.near_miss) == rule.near_miss
    else:
        # gitleaks' rule alone: triage's own rules mask some of its near-shaped tokens on purpose
        # (minimum lengths where gitleaks has exact ones: `sk-ant-api03-` cut short is still masked)
        assert rule.near_miss
        assert _pattern(rule).sub(_masker(rule), rule.near_miss) == rule.near_miss


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def test_gitleaks_default_rule_set_is_taken_whole():
    """Every rule of gitleaks' default config (its ids are recorded by the script that generated
    the table, from a copy kept outside the repository) is in the table, but the one that only
    names a file."""
    from triage.pipeline.gitleaks_rules import UPSTREAM_IDS

    upstream = set(UPSTREAM_IDS)
    taken = {r.gitleaks for r in RULES if r.group is not None}
    assert len(upstream) >= 220 and taken == upstream - {"pkcs12-file"}
    assert all(r.id == f"gitleaks:{r.gitleaks}" for r in RULES if r.group is not None)


def test_go_patterns_are_translated_with_their_meaning():
    import sys

    sys.path.insert(0, str(SCRIPTS))
    from import_gitleaks import translate

    # a flag in the middle applies to the rest of its group, reopened after each `|` of it
    p = re.compile(translate(r"\b(p8e-(?i)[a-z0-9]{4})x|(a(?i)b|c)d"))
    assert p.fullmatch("p8e-AbCdx") and not p.fullmatch("p8e-AbCdX") and p.fullmatch("aBd") and p.fullmatch("Cd")
    assert not p.fullmatch("Abd")
    assert translate(r"\b(pat[[:alnum:]]{14})\z") == r"\b(pat[A-Za-z0-9]{14})\Z"
    assert translate(r"(?i)[\w.-]{0,50}?(?:adafruit)x") == r"(?i)(?:adafruit)x"


def test_gitleaks_allowlists_and_entropy_apply():
    """gitleaks' verdicts, each rule alone (triage's own rules mask some of these anyway)."""
    def alone(gid: str, text: str) -> str:
        rule = next(r for r in RULES if r.gitleaks == gid and r.group is not None)
        return _pattern(rule).sub(_masker(rule), text)

    # the generic rule: masked; an allowlisted name (`primary_key`, read on the match widened by
    # the identifier before its keyword), a stop word, no digit, low entropy: not
    assert alone("generic-api-key", "acme_access = 'Zq8xV2pL9mW4rT7yB3nK'") == "acme_access = '[REDACTED]'"
    for kept in ("primary_key = Zq8xV2pL9mW4rT7yB3nK ", "acme_token = 'Zq8xV2pL9mWabout'",
                 "acme_token = 'ZqxVpLmWrTyBnKcJdQ'", "acme_token = 'ab12ab12ab12ab'"):
        assert alone("generic-api-key", kept) == kept
    # curl-auth-user's allowlist: a placeholder password is not a secret; a real one is
    assert alone("curl-auth-user", "curl -u user:$PASSWORD https://x") == "curl -u user:$PASSWORD https://x"
    assert MASK in alone("curl-auth-user", "curl -u user:hunter2x https://x")
    # the global allowlist: a path is not a secret
    assert alone("generic-api-key", "auth_file = /etc/triage/a1b2.conf ") == "auth_file = /etc/triage/a1b2.conf "


def the_mask_keeps_what_is_not_secret(rule: SecretRule) -> None:
    """Text around the secret stays, so the report still says what was configured."""
    before, _, after = rule.example.format(s="\0").partition("\0")
    out = redact_text(rule.example.format(s=rule.secret))
    head = re.split(r"[\s'\"=:({\[]", before)[0]
    assert out.startswith(head)
    tail = re.split(r"[\s'\"=:;)}\]]", after[::-1])[0][::-1]
    assert out.endswith(tail)


WRAPPED = [r for r in RULES if r.wrap is not None]


@pytest.mark.parametrize("rule", WRAPPED, ids=[r.id for r in WRAPPED])
def test_token_hard_wrapped_across_two_lines(rule: SecretRule):
    token = rule.secret
    for cut in (len(token) // 3, len(token) // 2, len(token) - 3):
        first, second = token[:cut], token[cut:]
        for lines in ([f"[2025-01-01 00:00:01] using {first}", f"{second} for the hub"],
                      [f"2025-01-01T00:00:01Z stdout P auth {first}", f"2025-01-01T00:00:01Z stdout F {second}"]):
            out = redact_lines(lines)
            assert len(out) == 2
            joined = "\n".join(out)
            assert second not in joined and first not in joined, (rule.id, cut, out)
            assert "for the hub" in joined or "stdout F" in joined


@pytest.mark.parametrize("rule", WRAPPED, ids=[r.id for r in WRAPPED])
def test_a_whole_token_at_the_end_of_a_line_leaves_the_next_line_alone(rule: SecretRule):
    out = redact_lines([f"key {rule.secret}", "Traceback (most recent call last):"])
    assert out[1] == "Traceback (most recent call last):"


@pytest.mark.parametrize("token", ["hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "sk-ant-api03-Qq1Ww2Ee3Rr4Tt5Yy6Uu7",
                                   "sk-proj-Zx9Yw8Xv7Wu6Vt5Us4Tr3Sq2"])
def test_wrapped_token_of_a_made_up_length(token: str):
    """The hardening suite's planted tokens are not of the real lengths: wrapped, they go too."""
    cut = len(token) // 2
    out = redact_lines([f"[2025-01-01 00:00:01] key {token[:cut]}", f"{token[cut:]} rejected"])
    assert token[:cut] not in "\n".join(out) and token[cut:] not in "\n".join(out)
    assert out[1].endswith(" rejected")


@pytest.mark.parametrize("following", ["Traceback (most recent call last):", "2025-01-01 00:00:00 INFO ready",
                                       "[2025-01-01 00:00:00] ready", "ERROR 05-12 10:11:12 boom", "  File \"/x.py\""])
def test_a_token_at_the_end_of_a_line_leaves_an_ordinary_next_line_alone(following: str):
    for rule in WRAPPED:
        out = redact_lines([f"key {rule.secret[:10]}", following])
        assert out[1] == following, rule.id


def test_wrapped_token_inside_one_string():
    token = next(r.secret for r in RULES if r.id == "huggingface-token")
    out = redact_text(f"login {token[:10]}\n{token[10:]} ok")
    assert token[10:] not in out and out.count("\n") == 1 and out.endswith(" ok")


PEM_BODY = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", "VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dV", "Mvw=="]


@pytest.mark.parametrize("end", [True, False], ids=["with-end", "end-cut-off"])
def test_private_key_body_across_lines(end: bool):
    lines = ["[2025-01-01] loading key -----BEGIN RSA PRIVATE KEY-----", *PEM_BODY]
    if end:
        lines.append("-----END RSA PRIVATE KEY-----")
    lines.append("[2025-01-01] next line")
    out = redact_lines(lines)
    assert len(out) == len(lines)
    for part in PEM_BODY:
        assert not any(part in x for x in out)
    assert out[0].startswith("[2025-01-01] loading key -----BEGIN RSA PRIVATE KEY-----")
    assert out[-1] == "[2025-01-01] next line"


def test_private_key_in_one_json_line():
    line = '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n' + PEM_BODY[0] + '\\n-----END PRIVATE KEY-----\\n"}'
    assert PEM_BODY[0] not in redact_text(line)


def test_evidence_runs_are_redacted_together_only_when_consecutive():
    token = next(r.secret for r in RULES if r.id == "huggingface-token")
    ev = [{"line": 4, "text": f"x {token[:12]}"}, {"line": 5, "text": f"{token[12:]} y"},
          {"line": 9, "text": token[12:] + " z"}]
    out = redact_data({"evidence": ev})["evidence"]
    assert out[0]["text"] == f"x {MASK}" and out[1]["text"] == f"{MASK} y"
    assert out[2]["text"] == token[12:] + " z"  # line 9 does not continue line 4: a lone fragment is not a token


@pytest.mark.parametrize(("name", "value", "secret"), [
    ("api_key", "abc", True), ("hf_token", "x-y-z", True), ("PGPASSWORD", "hunter2", True),
    ("AZURE_OPENAI_KEY", "k", True), ("ssl_keyfile_password", "pw", True), ("client_secret_id", "x", True),
    ("wandb_key", "0123456789abcdef0123456789abcdef01234567", True),
    ("cache_key", "layer_0_attn", False), ("api_key", None, False), ("hf_token", "None", False),
    ("max_new_token", 512, False), ("tokenizer_path", "org/m", False), ("eos_token", "</s>", False),
    ("pad_token", "<|endoftext|>", False), ("skip_tokenizer_init", False, False),
])
def test_settings_named_like_secrets(name, value, secret):
    assert secret_setting(name, value) is secret


def test_entropy_gates_the_generic_key_rule():
    assert entropy("aaaaaaaaaaaaaaaa") == 0
    low, high = "cache_key=aaaaaaaa1111111111", "cache_key=Zq8xV2pL9mW4rT7yB3nK"
    assert redact_text(low) == low
    assert MASK in redact_text(high)


def test_every_rule_credits_gitleaks_or_says_it_has_none():
    credited = [r for r in RULES if r.gitleaks]
    assert len(credited) >= 20
    for r in credited:
        assert re.fullmatch(r"[a-z0-9-]+(?:, [a-z0-9-]+)*", r.gitleaks), r.id


PATHOLOGICAL = ["-----BEGIN PRIVATE KEY-----\n", "a_key=", "wandb.login(key=", "A_PASSWORD_", "password: ",
                "hf_" + "a" * 20 + "\n", "x_key: ", "api_key='", "hf_a1\n", "dapi\nab12ab12\n",
                # gitleaks' rules: curl's (they scanned from each `curl` to the end of the line), the
                # generic one on its keywords, a context rule, a prefixed token with a long body
                "curl -u a:b curl -H ", "a_key=a1", "adafruit_key=", "pypi-AgEIcHlwaS5vcmc", "-----BEGIN "]


def _cost(text: str) -> float:
    t = time.process_time()  # CPU time: another process (or xdist worker) does not inflate it
    redact_text(text, ips=True)
    return time.process_time() - t


@pytest.mark.parametrize("unit", PATHOLOGICAL, ids=[repr(u[:12]) for u in PATHOLOGICAL])
def test_redaction_is_linear_on_pathological_input(unit: str):
    """The new shapes on top of tests/test_hardening.py's long lines: four times the text costs
    about four times as much (a quadratic path would cost sixteen), whatever the machine's load.
    16 and 64 KiB (64 and 256 KiB cost 4.6 s of the suite's CPU): the short text costs 5-40 ms,
    and with 10 ms of slack a quadratic path (16x) still breaks the 8x bound from 1.3 ms on."""
    small, big = unit * ((1 << 14) // len(unit)), unit * ((1 << 16) // len(unit))
    t_small, t_big = linear(_cost, small, big, slack=0.01)
    assert t_big < 8 * t_small + 0.01, (t_small, t_big)
    assert t_big < 10, t_big
