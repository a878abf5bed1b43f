"""The redaction rule set, as data: what a secret looks like in a server log.

Derived from gitleaks' default rules (github.com/gitleaks/gitleaks, config/gitleaks.toml,
MIT licence), the rule set most teams already trust for commits; `gitleaks` names the rule(s)
each entry follows so that a change upstream can be traced here. The patterns are adapted, not
copied: gitleaks looks for a secret in a commit and wants few false alarms, so its lengths are
exact and its generic rule is gated by entropy; a crash report is pasted into a public issue,
so here a near-shaped token is masked too (minimum lengths, not exact ones). Rules with no
gitleaks counterpart (NGC, Groq, Replicate, Azure connection strings, names of settings and
variables, URL passwords) say so with an empty `gitleaks`.

Each rule has, gitleaks style, a keyword prefilter (the rule runs only on text that contains
one of them, lower-cased), one true positive and one near miss; tests/test_secret_rules.py runs
every rule on both. In `regex`, a group named `keep` is kept in front of the mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from triage.pipeline.gitleaks_rules import RULES as _GITLEAKS


@dataclass(frozen=True)
class Wrap:
    """A token with a known length, to be found when a log hard-wraps it across two lines:
    `prefix` ends one line with fewer than `lengths` body characters, the next line starts with
    exactly the rest."""

    prefix: str  # regex
    chars: str  # regex character class of the body
    lengths: tuple[int, ...]  # possible body lengths after the prefix


# eq=False: a rule is hashed by identity, for redact.py's caches keyed by rule (a field-wise hash
# walked gitleaks' generic rule's 1,400 stop words at every look-up)
@dataclass(frozen=True, eq=False)
class SecretRule:
    """One kind of secret: the keywords that gate it and the pattern that finds it."""

    id: str
    gitleaks: str  # gitleaks rule id(s) this follows; "" when gitleaks has none
    keywords: tuple[str, ...]  # lower-case; the rule runs only on text holding one of them
    regex: str
    example: str  # a log line; `{s}` is where `secret` goes
    secret: str  # must not survive redaction of `example`
    near_miss: str  # looks alike, must come out unchanged
    wrap: Wrap | None = None
    entropy: float = 0.0  # minimum Shannon entropy (bits/char) of the masked part, as gitleaks' `entropy`
    # gitleaks' own rules (gitleaks_rules.py): the group masked (gitleaks' secretGroup; 0: the first
    # group that matched, or the whole match when there is none); None: a triage rule (`keep` kept)
    group: int | None = None
    # gitleaks' allowlists of the rule: (target: secret | match | line, regexes, stopwords)
    allow: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = ()


# A name that says its value is a secret, whatever the value looks like. It must end in one of
# these words: `tokenizer_path` and `max_prefill_tokens` are not secrets.
SECRET_WORD = (r"(?:api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key(?:[_-]?id)?|auth[_-]?key"
               r"|token|passw(?:or)?d|passphrase|secret|credentials?|client[_-]?secret|wandb[_-]?key|ngc[_-]?key"
               r"|openai[_-]?key|(?<=[_-])(?:pass|pwd))")
# a value that is clearly not a secret: unset, a switch, a number, a tokenizer's special token
# (`1234567890:AAH...`, a Telegram bot token, starts like a number: not one when a `:` follows)
NOT_SECRET_VALUE = (r"(?!(?:None|none|null|NULL|nil|True|true|False|false|\d+(?:\.\d+)?|\*+)(?![\w.:-]))"
                    r"(?!<\|?/?[\w. -]{0,40}\|?>|\[[A-Z]{1,10}\])")
# Before a quote: up to three backslashes, for a log line that carries JSON in a string
# (`\"private_key_id\": \"...\"`) or a repr of one. ESC_QUOTE: an optional quote so escaped.
ESC = r"\\{0,3}"
ESC_QUOTE = rf"(?:{ESC}['\"])?"
# a variable in the environment's style: `HF_TOKEN`, `PGPASSWORD`, `AZURE_OPENAI_KEY`, `CLIENT_SECRET_ID`
# (`DB_PASS`, `MYSQL_PWD`, `SSH_PASSPHRASE` too; `PWD=/root` alone is the shell's directory)
ENV_NAME = (r"(?:(?:[A-Z0-9]{1,40}_){0,8}(?:[A-Z0-9]{0,40}(?:PASSWORD|PASSWD|PASSPHRASE|SECRET)[A-Z0-9_]{0,40}"
            r"|TOKEN|KEY|KEY_ID|CREDENTIALS?|[A-Z0-9]{0,40}API_?KEY)|(?:[A-Z0-9]{1,40}_){1,8}(?:PASS|PWD))")
_TOKEN_CHARS = "[A-Za-z0-9]"
# the keywords of the rules that go by a setting's name
GENERIC = ("key", "token", "pass", "pwd", "secret", "credential")
# a value ends before the punctuation of the sentence around it: `SECRET_FILE=/run/pw: no such
# file` keeps its colon (`SECRET_FILE=[REDACTED]: ...`), which the mask used to swallow
KEEP_PUNCT = r"(?<![:;,.])"


def _fill(n: int, alphabet: str = "AbCdEfGhJkLmNpQrStUvWxYz23456789") -> str:
    """A made-up body of `n` characters (examples only: no real credential is ever in this file)."""
    return (alphabet * (n // len(alphabet) + 1))[:n]


def _hex(n: int) -> str:
    return _fill(n, "0123456789abcdef")


RULES: list[SecretRule] = [
    # -- tokens recognised by their prefix --------------------------------------------------
    SecretRule(
        "huggingface-token", "huggingface-access-token", ("hf_",),
        r"\bhf_[A-Za-z0-9]{20,}\b",
        "login failed for token {s}", "hf_" + _fill(34),
        "from transformers import hf_hub_download; hf_transfer enabled",
        Wrap(r"\bhf_", _TOKEN_CHARS, (34,))),
    SecretRule(
        "huggingface-org-token", "huggingface-organization-api-token", ("api_org_",),
        r"\bapi_org_[A-Za-z0-9]{20,}\b",
        "using {s}", "api_org_" + _fill(34), "api_org_name=acme"),
    SecretRule(
        "anthropic-key", "anthropic-api-key, anthropic-admin-api-key", ("sk-ant-",),
        r"\bsk-ant-[A-Za-z0-9_-]{16,}",
        "ANTHROPIC said 401 for {s}", "sk-ant-api03-" + _fill(93) + "AA", "task-ant-colony started",
        Wrap(r"\bsk-ant-(?:api|admin)\d\d-", "[A-Za-z0-9_-]", (95,))),
    SecretRule(
        "openai-key", "openai-api-key", ("sk-",),
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}",
        "openai.AuthenticationError: Incorrect API key provided: {s}",
        "sk-proj-" + _fill(74) + "T3BlbkFJ" + _fill(74), "disk-usage-monitor started; sk-learn 1.5",
        Wrap(r"\bsk-(?:proj-|svcacct-|admin-)?", "[A-Za-z0-9_-]", (48, 124, 156))),
    SecretRule(
        "stripe-key", "stripe-access-token", ("sk_live", "sk_test", "sk_prod", "rk_live", "rk_test", "rk_prod"),
        r"\b[sr]k_(?:live|test|prod)_[A-Za-z0-9]{10,99}\b",
        "billing client with {s}", "sk_live_" + _fill(24), "mask_live_view enabled; risk_test_mode=1"),
    SecretRule(
        "groq-key", "", ("gsk_",),
        r"\bgsk_[A-Za-z0-9]{20,}\b",
        "GROQ_API_KEY is {s}", "gsk_" + _fill(52), "desk_lamp gsk_short",
        Wrap(r"\bgsk_", _TOKEN_CHARS, (52,))),
    SecretRule(
        "replicate-token", "", ("r8_",),
        r"\br8_[A-Za-z0-9]{20,}\b",
        "replicate client token {s}", "r8_" + _fill(37), "layer8_norm r8_cache",
        Wrap(r"\br8_", _TOKEN_CHARS, (37,))),
    SecretRule(
        "ngc-key", "", ("nvapi-",),
        r"\bnvapi-[A-Za-z0-9_-]{20,}",
        "export NGC_API_KEY={s}", "nvapi-" + _fill(64), "nvapi-version 2 loaded",
        Wrap(r"\bnvapi-", "[A-Za-z0-9_-]", (64,))),
    SecretRule(
        "databricks-token", "databricks-api-token", ("dapi",),
        r"\bdapi[a-f0-9]{32}(?:-\d)?\b",
        "workspace token {s}", "dapi" + _hex(32), "dapi_version=2.0 dapi1234",
        Wrap(r"\bdapi", "[a-f0-9]", (32,))),
    SecretRule(
        "perplexity-key", "perplexity-api-key", ("pplx-",),
        r"\bpplx-[A-Za-z0-9]{20,}\b",
        "PPLX key {s}", "pplx-" + _fill(48), "pplx-client 0.2"),
    SecretRule(
        "github-token", "github-pat, github-oauth, github-app-token, github-refresh-token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",
        "git clone https://{s}@github.com/org/repo", "ghp_" + _fill(36), "ghp_short gho_id=3",
        Wrap(r"\bgh[pousr]_", _TOKEN_CHARS, (36,))),
    SecretRule(
        "github-fine-grained-pat", "github-fine-grained-pat", ("github_pat_",),
        r"\bgithub_pat_\w{30,}",
        "GH token {s}", "github_pat_" + _fill(82), "github_pat_scope=repo",
        Wrap(r"\bgithub_pat_", r"\w", (82,))),
    SecretRule(
        "gitlab-token", "gitlab-pat, gitlab-deploy-token, gitlab-runner-authentication-token, gitlab-ptt, "
        "gitlab-cicd-job-token, gitlab-oauth-app-secret, gitlab-feed-token, gitlab-incoming-mail-token, "
        "gitlab-scim-token, gitlab-kubernetes-agent-token, gitlab-feature-flag-client-token",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glft-", "glimt-", "glsoat-", "glagent-", "glffct-"),
        r"\bgl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|soat|agent|ffct)-[A-Za-z0-9_.-]{20,}",
        "CI_JOB with {s}", "glpat-" + _fill(20), "glpat-short glft-x",
        Wrap(r"\bglpat-", "[A-Za-z0-9_-]", (20,))),
    SecretRule(
        "slack-token", "slack-bot-token, slack-user-token, slack-app-token, slack-legacy-token, "
        "slack-legacy-workspace-token, slack-config-access-token, slack-config-refresh-token",
        ("xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxo-", "xoxe", "xapp-"),
        r"\b(?:xox[abposre]|xoxe\.xox[bp]|xapp)-[A-Za-z0-9-]{10,}",
        "slack notifier {s}", "xoxb-1234567890-1234567890123-" + _fill(24), "xoxb- xapp-1"),
    SecretRule(
        "slack-webhook", "slack-webhook-url", ("hooks.slack.com",),
        r"(?P<keep>\bhooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9+/]{16,}",
        "alerting to https://{s}", "hooks.slack.com/services/T0" + _fill(7) + "/B0" + _fill(7) + "/" + _fill(24),
        "see https://hooks.slack.com/ for setup"),
    SecretRule(
        "aws-access-key", "aws-access-token", ("akia", "asia", "abia", "acca", "a3t"),
        r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
        "aws_access_key_id={s}", "AKIA" + _fill(16, "QWERTYUPASDFGHJK2345"), "AKIAX is not a key; ASIAN market",
        Wrap(r"\b(?:AKIA|ASIA|ABIA|ACCA)", "[A-Z0-9]", (16,))),
    SecretRule(
        "aws-secret-key", "", ("aws_secret_access_key", "secretaccesskey", "aws_secret_key"),
        r"(?i)(?P<keep>aws_?secret(?:_?access)?_?key['\"]?\s*[=:]\s*['\"]?)[A-Za-z0-9/+=]{40}",
        "aws_secret_access_key = {s}", _fill(40), "aws_secret_access_key is required"),
    SecretRule(
        "gcp-api-key", "gcp-api-key", ("aiza",),
        r"\bAIza[\w-]{35}",
        "maps key {s}", "AIza" + _fill(35), "AIzaShort",
        Wrap(r"\bAIza", r"[\w-]", (35,))),
    SecretRule(
        "gcp-private-key-id", "", ("private_key_id",),
        rf"(?i)(?P<keep>private_key_id{ESC_QUOTE}\s*[=:]\s*{ESC_QUOTE})[A-Za-z0-9]{{16,}}",
        '{{"type": "service_account", "private_key_id": "{s}"}}', _hex(40), '"private_key_id": ""'),
    SecretRule(
        "jwt", "jwt", ("eyj",),
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        "session {s}", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlX2hlcmU", "eyJhbGciOiJIUzI1NiJ9 alone"),
    # the body too, across lines when the log breaks it (see redact.py); to the end of the
    # base64 lines when the END line is cut off
    SecretRule(
        "private-key", "private-key", ("-----begin",),
        r"(?P<keep>-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----)"
        r"(?:(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----)){0,8192}?-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"|[^\n]*(?:\n[ \t]*(?:[A-Za-z0-9+/]{16,}={0,2}|[A-Za-z0-9+/]{1,15}={1,2})[ \t]*(?=\n|$))*)",
        "key: -----BEGIN PRIVATE KEY-----{s}", "\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _fill(40) + "\\n-----END PRIVATE KEY-----",
        "-----BEGIN CERTIFICATE----- is public"),
    SecretRule(
        "azure-storage-key", "", ("accountkey", "sharedaccesskey"),
        r"(?i)(?P<keep>\b(?:AccountKey|SharedAccessKey)\s*=\s*)[A-Za-z0-9+/=]{16,}",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={s};EndpointSuffix=core.windows.net",
        _fill(86) + "==", "AccountKey=;AccountName=acme"),
    # -- the kinds gitleaks' default set has no rule for (issue 35: they reached every output) ---
    SecretRule(
        "google-oauth-token", "", ("ya29.",),
        r"\bya29\.[A-Za-z0-9_-]{20,}",
        "google.auth refreshed credentials: token={s}", "ya29.a0" + _fill(60), "ya29.short"),
    SecretRule(
        "google-oauth-client-secret", "", ("gocspx-",),
        r"\bGOCSPX-[A-Za-z0-9_-]{20,}",
        "oauth client_secret {s}", "GOCSPX-" + _fill(28), "GOCSPX-short",
        Wrap(r"\bGOCSPX-", "[A-Za-z0-9_-]", (28,))),
    SecretRule(
        "stripe-webhook-secret", "", ("whsec_",),
        r"\bwhsec_[A-Za-z0-9+/=]{20,}",
        "stripe webhook signing with {s}", "whsec_" + _fill(32), "whsec_unset"),
    SecretRule(
        "dockerhub-token", "", ("dckr_",),
        r"\bdckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",
        "docker login -u acme -p {s}", "dckr_pat_" + _fill(27), "dckr_pat_short"),
    SecretRule(
        "xai-key", "", ("xai-",),
        r"\bxai-[A-Za-z0-9]{32,}",
        "XAI client with {s}", "xai-" + _fill(80), "xai-grok-2 model loaded"),
    SecretRule(
        "langsmith-key", "", ("lsv2_",),
        r"\blsv2_(?:pt|sk)_[A-Za-z0-9_]{20,}",
        "LangSmith tracing with {s}", "lsv2_pt_" + _hex(32) + "_" + _hex(10), "lsv2_pt_short"),
    SecretRule(
        "discord-webhook", "", ("discord",),
        r"(?P<keep>\b(?:discord(?:app)?\.com)/api/webhooks/\d{5,30}/)[A-Za-z0-9_-]{20,}",
        "alerting to https://{s}", "discord.com/api/webhooks/123456789012345678/" + _fill(68),
        "see https://discord.com/api/webhooks/ for setup"),
    # gitleaks has these four with exact lengths; a near-shaped one is masked too (lengths are minimums)
    SecretRule(
        "azure-ad-client-secret", "azure-ad-client-secret", ("q~",),
        r"(?<![\w~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{28,}",
        "AZURE_CLIENT_SECRET is {s}", "aB3" + "8Q~" + _fill(34), "Q~ marks the spot: abc8Q~short"),
    SecretRule(
        "sendgrid-key", "sendgrid-api-token", ("sg.",),
        r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
        "mailer with {s}", "SG." + _fill(22) + "." + _fill(43), "SG.short.x in config"),
    SecretRule(
        "npm-token", "npm-access-token", ("npm_",),
        r"\bnpm_[A-Za-z0-9]{30,}",
        "//registry.npmjs.org/:_authToken={s}", "npm_" + _fill(36), "npm_config_cache=/tmp"),
    SecretRule(
        "telegram-bot-token", "telegram-bot-api-token", (":aa",),
        r"(?:(?<=/bot)|(?<![\w:]))\d{5,16}:AA[A-Za-z0-9_-]{30,}",  # also in the API's URL: .../bot<token>/
        "bot https://api.telegram.org/bot{s}/sendMessage", "1234567890:AA" + _fill(33), "12:AA at 10:AAM"),
    # curl's `-u user:password` (gitleaks' curl-auth-user masks the user too; this keeps it)
    SecretRule(
        "curl-user", "curl-auth-user", ("curl",),
        r"(?P<keep>\bcurl\b[^\n]{0,1024}?\s(?:-u|--user)(?:=|[ \t]{1,5})['\"]?[^\s:'\"]{1,128}:)(?!\$\{?\w)[^\s'\"]{1,256}",
        "+ curl -sf -u admin:{s} https://registry.internal/v2/", "hunter2-curl", "curl -u admin https://x"),
    # a JSON field named just `key` (kaggle.json's `{"username": "...", "key": "..."}`), when its
    # value is shaped like a credential: `"key": "default"` stays
    SecretRule(
        "key-field", "", ("key",),
        rf"(?P<keep>(?<![\w.-]){ESC}(?P<q>['\"])key{ESC}(?P=q)\s*:\s*{ESC}(?P=q))"
        r"(?=[A-Za-z0-9_+/-]{0,200}\d)(?=[A-Za-z0-9_+/-]{0,200}[A-Za-z])[A-Za-z0-9_+/-]{16,200}={0,2}(?![\w=])",
        '{{"username": "acme", "key": "{s}"}}', _hex(32), '{"key": "layer_norm_weight"}', entropy=3.0),
    # -- credentials in URLs and headers ----------------------------------------------------
    SecretRule(
        "url-password", "", ("://",),
        r"(?P<keep>\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@'\"]{0,256}:)[^\s/'\"]{1,256}(?=@[^\s@/'\"]{1,256}(?:[/\s'\"?#]|$))",
        "connecting to postgres://admin:{s}@db.internal:5432/app", "p@ss:w0rd@x", "see http://host:8000/v1/models"),
    SecretRule(
        "authorization-header", "curl-auth-header", ("authorization",),
        r"(?i)(?P<keep>\b(?:authorization|proxy-authorization)['\"]?\s*[:=]\s*['\"]?(?:bearer|basic|token|digest)\s+)"
        r"[^\s'\",}]{4,}",
        "headers={{'Authorization': 'Bearer {s}'}}", "tokBearer0123456789abcdef", "Authorization: Bearer"),
    SecretRule(
        "api-key-header", "curl-auth-header", ("x-api-key", "x-auth-token", "api-key:", "api_key:", "apikey:"),
        r"(?i)(?P<keep>\b(?:x-api-key|x-auth-token|api-key|api_key|apikey)['\"]?\s*[:=]\s*['\"]?)"
        rf"{NOT_SECRET_VALUE}[^\s'\",}}]{{4,}}",
        "request headers x-api-key: {s}", "hdrKey0123abcd", "x-api-key: None"),
    SecretRule(
        "bearer-token", "curl-auth-header", ("bearer",),
        r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}",
        "sent bearer {s}", "abcDEF0123456789ghiJKL", "bearer token missing"),
    SecretRule(
        "basic-credentials", "curl-auth-header", ("basic",),
        r"(?P<keep>\bBasic\s+)(?=[A-Za-z0-9+/]{0,200}[0-9+/=])[A-Za-z0-9+/]{12,200}={0,2}",
        "Authorization: Basic {s}", "dXNlcjpodW50ZXIyaHVudGVyMg==", "Basic block allocator initialised"),
    SecretRule(
        "query-secret", "", ("token=", "key=", "auth=", "sig=", "signature=", "password=", "passwd=", "secret=",
                             "credential=", "security-token="),
        r"(?i)(?P<keep>[?&;](?:[A-Za-z0-9]+[_.-]){0,8}(?:token|api[_-]?key|apikey|key|auth|sig|signature|password|passwd"
        r"|secret|credential|x-amz-signature|x-amz-credential|x-amz-security-token)=)[^&\s'\"#<>]+",
        "GET https://blob.example.net/c/m.bin?sv=2022&sig={s}", "SASsig0123abcdef", "GET /v1/models?limit=10"),
    # -- secrets recognised by the name they are given ----------------------------------------
    # the value is a whole shell word: `--api-key "ab'cd"` is printed back as `--api-key 'ab'"'"'cd'`
    SecretRule(
        "secret-flag", "", ("api-key", "api_key", "token", "password", "passphrase", "secret"),
        r"(?P<keep>--(?:[A-Za-z0-9_]+-){0,8}(?:api-key|api_key|hf-token|hf_token|token|password|passphrase|secret"
        r"|secret-key)(?:=|\s+))"
        r"(?!--|<[\w. -]{1,40}>)(?:'[^'\n]*'|\"(?:[^\"\\\n]|\\.){0,4096}\"|\\.|[^\s'\",)\\]){1,256}" + KEEP_PUNCT,
        "python -m sglang.launch_server --api-key {s} --tp 8", "flagKey-7f3a9b2c", "--skip-tokenizer-init --tp 8"),
    # the same flag in an argv printed as a Python list: `['--api-key', 'KEY', ...]`
    SecretRule(
        "secret-flag-listed", "", ("api-key", "api_key", "token", "password", "passphrase", "secret"),
        r"(?P<keep>(?P<q>['\"])--(?:[A-Za-z0-9_]+-){0,8}(?:api-key|api_key|hf-token|hf_token|token|password"
        r"|passphrase|secret|secret-key)(?P=q),\s*(?P<v>['\"]))(?!--|<[\w. -]{1,40}>)(?:(?!(?P=v))[^\\\n]|\\.){1,1024}?"
        r"(?=(?P=v))",
        "argv=['python', '-m', 'sglang.launch_server', '--api-key', '{s}', '--tp', '8']", "listKey-9a8b7c6d",
        "argv=['--skip-tokenizer-init', '--tp', '8']"),
    SecretRule(
        "wandb-login", "", ("wandb",),
        r"(?P<keep>\bwandb\.login\([^)\n]{0,80}?\bkey\s*=\s*['\"]?)[^'\"\s),]{1,256}",
        "wandb.login(key='{s}')", _hex(40), "wandb.login(anonymous='allow')"),
    SecretRule(
        "wandb-login-cli", "", ("wandb",),
        r"(?P<keep>\bwandb\s+login\s+(?:--?[\w-]+\s+){0,4})(?!-)[A-Za-z0-9_-]{20,}",
        "running: wandb login --relogin {s}", _hex(40), "wandb login succeeded for user acme"),
    SecretRule(
        "secret-setting-quoted", "generic-api-key", GENERIC,
        rf"(?i)(?P<keep>(?:\b|(?<=_)){SECRET_WORD}{ESC_QUOTE}\s*[=:]\s*\[?\s*{ESC}(?P<q>['\"]))(?!{ESC}(?P=q))"
        rf"(?!(?:None|null|True|False){ESC}(?P=q))(?!<\|?/?[\w.-]{{0,40}}\|?>(?P=q)|\[[A-Z]{{1,10}}\](?P=q))"
        rf"[^'\"\n]{{1,1024}}?(?={ESC}(?P=q))",
        "server_args=ServerArgs(model_path='m', api_key='{s}', tp_size=8)", "reprKey8c1d2e3f",
        "ServerArgs(tokenizer_path='org/model', eos_token='</s>', hf_token=None)"),
    SecretRule(
        "secret-setting", "generic-api-key", GENERIC,
        rf"(?i)(?P<keep>(?:(?<![\w.-])|(?<=_)){SECRET_WORD}\s*=\s*){NOT_SECRET_VALUE}[^\s'\",)\]}}]{{4,}}{KEEP_PUNCT}",
        "Namespace(model='m', ssl_keyfile_password={s}, port=8000)", "pw-s3cr3t-777",
        "max_prefill_tokens=16384 password=None token=8192"),
    SecretRule(
        "secret-name-value", "generic-api-key", GENERIC,
        # not a path's last component (`~/.aws/credentials: missing` names a file, not a value)
        rf"(?i)(?P<keep>(?:(?<![\w./-])|(?<=[_-]))(?:api[ _-]?key|{SECRET_WORD}){ESC_QUOTE}[ \t]*:[ \t]*{ESC_QUOTE})"
        rf"{NOT_SECRET_VALUE}[^\s'\",}}]{{4,}}{KEEP_PUNCT}",
        "config loaded: password: {s}", "Tr0ub4dor&3x", "#new-token: 8192, token usage: 0.50, #cached-token: 0"),
    SecretRule(
        "secret-env-variable", "generic-api-key", GENERIC,
        rf"(?P<keep>(?<![\w.-]){ENV_NAME}=){NOT_SECRET_VALUE}(?:'[^']*'|\"[^\"]*\"|\S+{KEEP_PUNCT})",
        "+ export PGPASSWORD={s}", "hunter2-db", "TOKENIZERS_PARALLELISM=false SGLANG_MAX_TOKENS=4096 KEY_COUNT=3"),
    # a setting named `*_key` is masked when its value is shaped like a credential (the name
    # alone is not enough: `cache_key`, `sort_key`); gitleaks gates its generic rule the same way
    SecretRule(
        "key-setting", "generic-api-key", ("key",),
        rf"(?i)(?P<keep>(?<=[a-z0-9_-])key{ESC_QUOTE}\s*[=:]\s*{ESC_QUOTE})"
        r"(?=[A-Za-z0-9_+/-]{0,200}\d)(?=[A-Za-z0-9_+/-]{0,200}[A-Za-z])[A-Za-z0-9_+/-]{16,200}={0,2}(?![\w.=])",
        "settings: wandb_key: {s}", _hex(40), "cache_key=layer_0_attn_k_cache rope_key=default",
        entropy=3.5),
]



def _template(example: str, secret: str) -> str:
    """A generated example as a `{s}` template (`str.format`'s braces escaped)."""
    def esc(t: str) -> str:
        return t.replace("{", "{{").replace("}", "}}")
    return esc(example).replace(esc(secret), "{s}", 1)


# gitleaks' default rule set, whole (triage/pipeline/gitleaks_rules.py, generated by
# scripts/import_gitleaks.py), applied after triage's own: what they have masked already is
# skipped. Ids are prefixed, some are the same as triage's (`jwt`, `private-key`).
GITLEAKS: list[SecretRule] = [
    SecretRule(f"gitleaks:{gid}", gid, keywords, regex, _template(example, secret), secret, miss,
               entropy=ent, group=group, allow=allow)
    for gid, keywords, regex, group, ent, allow, example, secret, miss in _GITLEAKS
]
RULES += GITLEAKS

# IP addresses: only with --redact-ips
IPV4 = r"\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b"
IPV6 = r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}(?![\w:])"
