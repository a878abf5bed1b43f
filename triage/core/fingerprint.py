"""Stable fingerprints for failures: what stays the same between two occurrences.

Following Sentry's grouping and Socorro's signatures: the exception type, the message with
its variables masked, and the names (not line numbers, not install prefixes) of the top
frames that belong to the engine or model code. Library and interpreter frames are skipped
because they are the same for unrelated crashes.
"""

from __future__ import annotations

import hashlib
import re

from triage.core.recache import re_compile

_MASKS = [
    (re_compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I), "<uuid>"),
    (re_compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re_compile(r"\b[0-9a-f]{16,}\b"), "<id>"),
    (re_compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?"), "<time>"),
    (re_compile(r"\b\d\d:\d\d:\d\d(?:\.\d+)?\b"), "<time>"),
    # a file named by its settings (fused MoE configs: .../E=64,N=1408,device_name=NVIDIA_A100.json)
    (re_compile(r"(?:/[\w.@+-]+)+/[\w.@+-]*=[\w.@+=,-]*"), "<path>"),
    (re_compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?"), "<path>"),
    (re_compile(r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b"), "<ip>"),
    (re_compile(r"\[\s*\d+(?:\s*,\s*\d+)*\s*\]"), "<shape>"),
    (re_compile(r"\((?:\s*\d+\s*,)+\s*\d*\s*\)"), "<shape>"),
    (re_compile(r"\b(?:TP|DP|PP|EP|rank|Rank|GPU|gpu|cuda:|device )\s?\d+\b"), "<rank>"),
    (re_compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?"), "<n>"),
    (re_compile(r"'[^'\s]{24,}'"), "'<str>'"),
]

_LIBRARY = re_compile(
    r"(?:^|/)(?:python\d[\d.]*/(?!site-packages|dist-packages)|lib/python[\d.]+/(?!site-packages|dist-packages)[^/]+$|"
    r"torch/(?:nn/modules|utils|_dynamo|_inductor|autograd|_ops|distributed/c10d_logger)|"
    r"torch/(?:_tensor\.py|overrides\.py|_compile\.py|fx/|_library/|_higher_order_ops/|cuda/__init__\.py)|"
    r"(?:starlette|uvicorn|fastapi|anyio|uvloop|click|typer)/|<frozen |"
    r"asyncio|concurrent/futures|threading\.py|multiprocessing|contextlib\.py|functools\.py)"
)
_SITE = re_compile(r"^.*?/(?:site-packages|dist-packages)/")


def mask(message: str) -> str:
    out = message
    for rx, repl in _MASKS:
        out = rx.sub(repl, out)
    return " ".join(out.split())[:300]


def module_path(file: str) -> str:
    """`/usr/lib/python3.10/site-packages/sglang/srt/x.py` -> `sglang/srt/x.py`."""
    f = file.replace("\\", "/")
    f = _SITE.sub("", f)
    for root in ("sglang/", "vllm/", "tensorrt_llm/", "text_generation_server/", "torch/", "transformers/"):
        i = f.find(root)
        if i > 0:
            return f[i:]
    return f.rsplit("/", 3)[-1] if f.count("/") > 3 else f.lstrip("./")


def is_library(file: str) -> bool:
    return bool(_LIBRARY.search(file.replace("\\", "/")))


_PACKAGE_ROOTS = ("sglang/", "vllm/", "tensorrt_llm/", "text_generation_server/", "torch/", "transformers/")


def frame_module(file: str) -> str:
    """The package-relative module of a frame, the same for a wheel and a source checkout:
    `/sgl-workspace/sglang/python/sglang/srt/x.py` and `.../dist-packages/sglang/srt/x.py` are
    both `sglang/srt/x.py` (the last package root on the path wins)."""
    f = "/" + _SITE.sub("", file.replace("\\", "/"))
    for root in _PACKAGE_ROOTS:
        i = f.rfind("/" + root)
        if i >= 0:
            return f[i + 1 :]
    return module_path(file)


def top_frames(frames: list[tuple[str, str | None]], n: int = 3) -> list[str]:
    """Innermost `n` engine/model frames as `module/path.py:function`."""
    picked: list[str] = []
    for file, func in reversed(frames):
        if is_library(file):
            continue
        picked.append(f"{frame_module(file)}:{func or '?'}")
        if len(picked) == n:
            break
    return picked


def fingerprint(exception: str, message: str, frames: list[tuple[str, str | None]]) -> str:
    parts = [exception.rsplit(".", 1)[-1], mask(message), *top_frames(frames)]
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]
