"""Secrets out of the Report before any renderer sees it.

Reports get pasted into public issues and post-mortems; logs carry Hugging Face tokens,
API keys and passwords in URLs. Redaction walks every string of the Report (evidence,
messages, settings, the patched command), so Markdown and JSON are covered alike.
"""

from __future__ import annotations

from typing import Any

import regex

from triage.models import Report

MASK = "[REDACTED]"

# (what, pattern); group "keep" (when present) is kept in front of the mask
SECRETS: list[tuple[str, regex.Pattern[str]]] = [
    ("Hugging Face token", regex.compile(r"\bhf_[A-Za-z0-9]{20,}\b")),
    ("OpenAI-style key", regex.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}\b")),
    ("AWS access key", regex.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("AWS secret", regex.compile(r"(?i)(?P<keep>aws_secret_access_key\s*[=:]\s*['\"]?)[A-Za-z0-9/+=]{40}")),
    ("authorization header", regex.compile(
        r"(?i)(?P<keep>\b(?:authorization|proxy-authorization)['\"]?\s*[:=]\s*['\"]?(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{8,}")),
    ("bearer token", regex.compile(r"(?i)(?P<keep>\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}")),
    ("password in URL", regex.compile(r"(?P<keep>\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]+:)[^\s@/'\"]+(?=@)")),
    ("API key flag", regex.compile(
        r"(?P<keep>--(?:api-key|api_key|hf-token|hf_token|token|admin-api-key|password)(?:=|\s+)['\"]?)[^\s'\",)]+")),
    ("API key setting", regex.compile(
        r"(?i)(?P<keep>['\"]?(?:api_key|admin_api_key|hf_token|access_token|secret_key|password)['\"]?\s*[=:]\s*['\"])[^'\"]{4,}(?=['\"])")),
    ("token env", regex.compile(r"(?P<keep>\b(?:HF_TOKEN|HUGGING_FACE_HUB_TOKEN|OPENAI_API_KEY|VLLM_API_KEY)=)\S+")),
]
IPV4 = regex.compile(r"\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b")
IPV6 = regex.compile(r"(?<![\w:])(?:[0-9a-fA-F]{1,4}:){3,7}[0-9a-fA-F]{1,4}(?![\w:])")


def redact_text(text: str, ips: bool = False) -> str:
    if not text:
        return text
    for _name, rx in SECRETS:
        text = rx.sub(lambda m: (m.groupdict().get("keep") or "") + MASK, text)
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


def redact_report(report: Report, ips: bool = False) -> Report:
    """A copy of `report` with secrets (and, with `ips`, IP addresses) masked everywhere."""
    data = report.model_dump()
    # a setting whose name says it is a secret is masked whatever its value looks like
    settings = data.get("environment", {}).get("settings", {})
    for key in list(settings):
        if regex.search(r"(?i)(api_key|token|password|secret)", key) and settings[key] not in (None, "", False):
            settings[key] = MASK
    launch = report.environment.launch_settings
    out = Report.model_validate(_walk(data, ips))
    out.environment.launch_settings = {
        k: (MASK if regex.search(r"(?i)(api_key|token|password|secret)", k) and v not in (None, "", False)
            else _walk(v, ips)) for k, v in launch.items()}
    return out
