"""Secrets out of the Report before any renderer sees it.

Reports get pasted into public issues and post-mortems; logs carry Hugging Face tokens,
API keys and passwords in URLs. Redaction walks every string of the Report (evidence,
messages, settings, the patched command), so Markdown and JSON are covered alike.
"""

from __future__ import annotations

import re
from typing import Any

from triage.core.models import Report

MASK = "[REDACTED]"

# Names of settings, flags and variables whose value is a secret whatever it looks like. A name
# must end in one of these words: `tokenizer_path` and `max_prefill_tokens` are not secrets.
_SECRET_NAME = r"(?:api[_-]?key|access[_-]?key|token|passw(?:or)?d|secret(?:[_-]?key)?|credentials?|private[_-]?key)"
SECRET_SETTING = re.compile(rf"(?i)(?:^|[_-]){_SECRET_NAME}$")
# a value that is clearly not a secret: unset, a switch, a number
_NOT_SECRET_VALUE = r"(?!(?:None|none|null|NULL|True|true|False|false|\d+)(?![\w.-]))"

# (what, pattern); group "keep" (when present) is kept in front of the mask
SECRETS: list[tuple[str, re.Pattern[str]]] = [
    ("Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")),
    ("OpenAI-style key", re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}\b")),
    ("GitHub token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("JSON web token", re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    ("private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)")),
    ("AWS access key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("AWS secret", re.compile(r"(?i)(?P<keep>aws_secret_access_key\s*[=:]\s*['\"]?)[A-Za-z0-9/+=]{40}")),
    ("authorization header", re.compile(
        r"(?i)(?P<keep>\b(?:authorization|proxy-authorization)['\"]?\s*[:=]\s*['\"]?(?:bearer|basic|token|digest)\s+)"
        r"[^\s'\",}]{4,}")),
    ("x-api-key header", re.compile(r"(?i)(?P<keep>\bx-(?:api-key|auth-token)['\"]?\s*[:=]\s*['\"]?)[^\s'\",}]{4,}")),
    ("bearer token", re.compile(r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}")),
    # basic-auth credentials even without their header name (a parser may have split
    # "Authorization: Basic ..." into an exception name and a message)
    ("basic credentials", re.compile(r"(?P<keep>\bBasic\s+)(?=[A-Za-z0-9+/]{0,200}[0-9+/=])[A-Za-z0-9+/]{12,200}={0,2}")),
    ("password in URL", re.compile(r"(?P<keep>\b[a-z][a-z0-9+.-]{0,30}://[^\s:/@'\"]{0,256}:)[^\s@/'\"]{1,256}(?=@)")),
    ("secret in query string", re.compile(
        r"(?i)(?P<keep>[?&;](?:[A-Za-z0-9]+[_.-]){0,8}(?:token|api[_-]?key|apikey|key|auth|sig|signature|password|passwd|secret"
        r"|credential|x-amz-signature|x-amz-credential|x-amz-security-token)=)[^&\s'\"#<>]+")),
    ("API key flag", re.compile(
        r"(?P<keep>--(?:[A-Za-z0-9_]+-){0,8}(?:api-key|api_key|hf-token|hf_token|token|password|secret|secret-key)(?:=|\s+))"
        r"(?:'[^']*'|\"[^\"]*\"|[^\s'\",)]+)")),
    ("secret setting, quoted", re.compile(
        rf"(?i)(?P<keep>(?:\b|(?<=_)){_SECRET_NAME}['\"]?\s*[=:]\s*\[?\s*(?P<q>['\"]))(?!(?P=q))[^'\"]{{1,1024}}(?=(?P=q))")),
    ("secret setting", re.compile(
        rf"(?i)(?P<keep>(?:(?<![\w.-])|(?<=_)){_SECRET_NAME}\s*=\s*){_NOT_SECRET_VALUE}[^\s'\",)\]}}]{{4,}}")),
    ("secret environment variable", re.compile(
        rf"(?P<keep>\b(?:[A-Z0-9]+_){{0,8}}(?:API_KEY|TOKEN|PASSWORD|PASSWD|SECRET|SECRET_KEY|CREDENTIALS)=){_NOT_SECRET_VALUE}"
        r"(?:'[^']*'|\"[^\"]*\"|\S+)")),
]
IPV4 = re.compile(r"\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}(?![\w:])")


def _mask(m: re.Match[str]) -> str:
    keep = m.groupdict().get("keep") or ""
    if m.string.startswith(MASK, m.start() + len(keep)):  # masked already by an earlier pattern
        return m.group(0)
    return keep + MASK


def redact_text(text: str, ips: bool = False) -> str:
    if not text:
        return text
    for _name, rx in SECRETS:
        text = rx.sub(_mask, text)
    if ips:
        text = IPV4.sub("[IP]", text)
        text = IPV6.sub("[IP]", text)
    return text


def _walk(value: Any, ips: bool) -> Any:
    if isinstance(value, str):
        return redact_text(value, ips)
    if isinstance(value, list):
        return [_walk(v, ips) for v in value]
    if isinstance(value, tuple):
        return tuple(_walk(v, ips) for v in value)
    if isinstance(value, dict):
        return {k: _walk(v, ips) for k, v in value.items()}
    return value


def redact_data(value: Any, ips: bool = False) -> Any:
    """Every string in plain data (a model's dump) with secrets masked."""
    return _walk(value, ips)


def redact_argv(argv: list[str], ips: bool = False) -> list[str]:
    """An argv with secrets masked. A flag and its value are separate items, so the value after a
    flag named like a secret (`--api-key KEY`) is masked whatever it looks like."""
    out = []
    for i, arg in enumerate(argv):
        prev = argv[i - 1] if i else ""
        named_secret = prev.startswith("-") and "=" not in prev and SECRET_SETTING.search(prev.lstrip("-").replace("-", "_"))
        out.append(MASK if named_secret else redact_text(arg, ips))
    return out


def redact_env(env: dict[str, str], ips: bool = False) -> dict[str, str]:
    return {k: MASK if secret_setting(k, v) else redact_text(v, ips) for k, v in env.items()}


def redact_report(report: Report, ips: bool = False) -> Report:
    """A copy of `report` with secrets (and, with `ips`, IP addresses) masked everywhere."""
    data = report.model_dump()
    # a setting whose name says it is a secret is masked whatever its value looks like
    settings = data.get("environment", {}).get("settings", {})
    for key in list(settings):
        if secret_setting(key, settings[key]):
            settings[key] = MASK
    launch = report.environment.launch_settings
    out = Report.model_validate(_walk(data, ips))
    out.environment.launch_settings = {k: MASK if secret_setting(k, v) else _walk(v, ips) for k, v in launch.items()}
    out.environment.launch_args = redact_argv(report.environment.launch_args, ips)
    out.diagnostics = [redact_text(d, ips) for d in report.diagnostics]
    return out


def secret_setting(name: str, value: Any) -> bool:
    """A setting named like a secret (`api_key`, `hf_token`, `ssl_keyfile_password`) that holds
    something: its value is masked. Unset values, switches and numbers are not secrets."""
    if value in (None, "", False, True, [], {}) or isinstance(value, (int, float)):
        return False
    if isinstance(value, str) and value.strip().lower() in ("none", "null", "true", "false", ""):
        return False
    return bool(SECRET_SETTING.search(str(name)))
