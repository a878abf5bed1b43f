"""The server's environment (engine, version, model, parallelism, backends) from its log."""

from __future__ import annotations

from collections import Counter
from typing import Any

import regex

from triage.models import Environment
from triage.parse.config import Config
from triage.parse.lines import LogLine

_KEYS = {
    "model": ["model_path", "model", "model_tag"],
    "tp_size": ["tp_size", "tensor_parallel_size"],
    "dp_size": ["dp_size", "data_parallel_size"],
    "pp_size": ["pp_size", "pipeline_parallel_size"],
    "attention_backend": ["attention_backend"],
    "kv_cache_dtype": ["kv_cache_dtype"],
    "quantization": ["quantization"],
}


def _first(settings: dict[str, Any], names: list[str]) -> Any:
    for n in names:
        v = settings.get(n)
        if v not in (None, "", "None"):
            return v
    return None


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def guess_engine(lines: list[LogLine], cfg: Config) -> str | None:
    if cfg.engine:
        return cfg.engine
    votes: Counter[str] = Counter()
    for ln in lines:
        t = ln.text
        if "sglang" in t or ln.dialect == "sglang":
            votes["sglang"] += 1
        if "vllm" in t or ln.dialect == "vllm":
            votes["vllm"] += 1
        if "tensorrt_llm" in t or "TensorRT-LLM" in t or "[TRT-LLM]" in t:
            votes["trtllm"] += 1
        if "text_generation" in t or "shard-manager" in t or "text-generation-launcher" in t:
            votes["tgi"] += 1
        if "tritonserver" in t or "model_lifecycle" in t or "Triton" in t:
            votes["triton"] += 1
    return votes.most_common(1)[0][0] if votes else None


_GPU_NAME = [
    regex.compile(r"device_name=(NVIDIA_[\w-]+?|AMD_[\w-]+?)(?:\.json|,|\s|$)"),
    regex.compile(r"Your ((?:NVIDIA |Tesla |GeForce |Quadro )?[\w -]{2,30}?) GPU has compute capability"),
    regex.compile(r"GPU \d+: ((?:NVIDIA|Tesla|AMD) [\w -]+?)(?: \(UUID|$)"),
]
_GPU_MEM = regex.compile(r"GPU (\d+) has a total capacity of ([\d.]+) GiB")


def _gpu(lines: list[LogLine], env: Environment) -> None:
    top_index = -1
    for ln in lines:
        t = ln.message
        if env.gpu is None:
            for rx in _GPU_NAME:
                m = rx.search(t)
                if m:
                    env.gpu = m.group(1).replace("_", " ").strip()
                    break
        m = _GPU_MEM.search(t)
        if m:
            top_index = max(top_index, int(m.group(1)))
            env.gpu_memory_gib = env.gpu_memory_gib or float(m.group(2))
    sizes = [x for x in (env.tp_size, env.dp_size if env.dp_size and env.dp_size > 1 else None, env.pp_size) if x]
    if sizes:
        count = 1
        for x in sizes:
            count *= x
        env.gpu_count = count
    if env.gpu_count is None and top_index >= 0:
        env.gpu_count = top_index + 1  # at least that many; the parallel sizes say more when printed


def build_environment(lines: list[LogLine], cfg: Config, version_override: str | None = None) -> Environment:
    s = cfg.settings
    env = Environment(engine=guess_engine(lines, cfg), version=version_override or cfg.version,
                      config_line=cfg.line, settings=s, launch_settings=cfg.cli)
    if cfg.launch_command:
        env.launch_command = cfg.launch_command
    model = _first(s, _KEYS["model"])
    env.model = str(model) if model is not None else None
    env.tp_size = _int(_first(s, _KEYS["tp_size"]))
    env.dp_size = _int(_first(s, _KEYS["dp_size"]))
    env.pp_size = _int(_first(s, _KEYS["pp_size"]))
    for k in ("attention_backend", "kv_cache_dtype", "quantization"):
        v = _first(s, _KEYS[k])
        setattr(env, k, str(v) if v is not None else None)
    _gpu(lines, env)
    if env.engine == "sglang" and s:
        if s.get("disable_cuda_graph") in (True, "True") or s.get("cuda_graph_backend_decode") == "disabled":
            env.cuda_graph = "disabled"
        elif "disable_cuda_graph" in s or "cuda_graph_backend_decode" in s:
            env.cuda_graph = "enabled"
        if "disable_radix_cache" in s:
            env.prefix_cache = "disabled" if s.get("disable_radix_cache") in (True, "True") else "enabled (radix cache)"
    elif env.engine == "vllm" and s:
        if s.get("enforce_eager") in (True, "True"):
            env.cuda_graph = "disabled (enforce_eager)"
        elif "enforce_eager" in s:
            env.cuda_graph = "enabled"
        if "enable_prefix_caching" in s:
            env.prefix_cache = "enabled" if s.get("enable_prefix_caching") in (True, "True") else "disabled"
    return env
