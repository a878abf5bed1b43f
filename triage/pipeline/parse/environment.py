"""The server's environment (engine, version, model, parallelism, backends) from its log."""

from __future__ import annotations

from collections import Counter
from typing import Any

from triage.core.lazyre import lazy
from triage.core.models import Environment, Failure
from triage.pipeline.parse.config import Config
from triage.pipeline.parse.lines import LogLine

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


# Evidence of the engine, strongest first. A single frame's path is never enough: SGLang imports
# vLLM kernels in some releases, and a vLLM traceback passes through torch and transformers.
_LAUNCH = [
    ("sglang", lazy(r"sglang\.launch_server|\bsglang serve\b|sglang\.srt\.|server_args=ServerArgs\(")),
    ("vllm", lazy(r"\bvllm serve\b|vllm\.entrypoints|Initializing a V1 LLM engine|"
                           r"Initializing an LLM engine|vLLM API server version|\bvLLM is using\b|non-default args:")),
    ("trtllm", lazy(r"\[TensorRT-LLM\]|\[TRT-LLM\]|trtllm-serve|trtllm-build|tensorrt_llm\.")),
    ("tgi", lazy(r"text_generation_launcher|text_generation_server|shard-manager|text-generation-launcher")),
    ("triton", lazy(r"tritonserver|model_lifecycle\.cc|TRITONBACKEND_|Triton Inference Server")),
    ("lmdeploy", lazy(r"\blmdeploy\b|turbomind|\[TM\]\[")),
]
_PKG = lazy(r"/(sglang|vllm|tensorrt_llm|text_generation_server|lmdeploy)/")
_PKG_ENGINE = {"sglang": "sglang", "vllm": "vllm", "tensorrt_llm": "trtllm", "text_generation_server": "tgi",
               "lmdeploy": "lmdeploy"}


def command_engine(command: str) -> str | None:
    """The engine a launch command starts (`vllm serve ...` -> vllm), if it says."""
    return next((engine for engine, rx in _LAUNCH if rx.search(command)), None)


def guess_engine(lines: list[LogLine], cfg: Config, failures: list[Failure] | None = None) -> str | None:
    """The engine that wrote the log, from the whole of it: launch and config lines, the prefix
    dialect of its lines, then the packages of the outermost and innermost frames of its
    tracebacks. Each kind of evidence votes once per engine, however many lines repeat it."""
    if cfg.engine:
        return cfg.engine
    votes: Counter[str] = Counter()
    dialects: Counter[str] = Counter()
    for ln in lines:
        if ln.dialect in ("sglang", "vllm"):
            dialects[ln.dialect] += 1
        for engine, rx in _LAUNCH:
            if engine not in votes and rx.search(ln.text):
                votes[engine] += 4
    for engine, n in dialects.items():
        votes[engine] += 3 if n >= 3 else 1
    for f in failures or []:
        ends = [f.frames[0], f.frames[-1]] if f.frames else []
        for fr in ends:
            m = _PKG.search(fr.file)
            if m:
                votes[_PKG_ENGINE[m.group(1)]] += 1
        pkgs = Counter(_PKG_ENGINE[m.group(1)] for fr in f.frames if (m := _PKG.search(fr.file)))
        if pkgs:
            votes[pkgs.most_common(1)[0][0]] += 1  # the package most of its frames are in
    if not votes:
        return None
    best = votes.most_common(2)
    if len(best) > 1 and best[0][1] == best[1][1]:
        return None  # a tie is not knowledge
    return best[0][0]


_GPU_NAME = [
    lazy(r"device_name=(NVIDIA_[\w-]+?|AMD_[\w-]+?)(?:\.json|,|\s|$)"),
    lazy(r"Your ((?:NVIDIA |Tesla |GeForce |Quadro )?[\w -]{2,30}?) GPU has compute capability"),
    lazy(r"GPU \d+: ((?:NVIDIA|Tesla|AMD) [\w -]+?)(?: \(UUID|$)"),
]
_GPU_MEM = lazy(r"GPU (\d{1,4}) has a total capacity of (\d{1,9}(?:\.\d{1,9})?) GiB")


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


def build_environment(lines: list[LogLine], cfg: Config, version_override: str | None = None,
                      failures: list[Failure] | None = None) -> Environment:
    s = cfg.settings
    env = Environment(engine=guess_engine(lines, cfg, failures), version=version_override or cfg.version,
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
