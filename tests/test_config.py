"""The launch configuration a server printed, in every form it takes."""

from triage.pipeline.parse.config import extract
from triage.pipeline.parse.environment import build_environment
from triage.pipeline.parse.lines import parse_line


def cfg_of(*raw: str):
    return extract([parse_line(i + 1, t) for i, t in enumerate(raw)])


def test_sglang_server_args_repr():
    c = cfg_of("[2025-06-24 22:26:45] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3.2-Exp', "
               "tp_size=8, mem_fraction_static=0.85, attention_backend='nsa', kv_cache_dtype='fp8_e4m3', "
               "disable_radix_cache=False, cuda_graph_bs=[1, 2, 4], json_model_override_args='{}', lora_paths=None)")
    assert c.engine == "sglang"
    assert c.settings["tp_size"] == 8
    assert c.settings["mem_fraction_static"] == 0.85
    assert c.settings["attention_backend"] == "nsa"
    assert c.settings["cuda_graph_bs"] == [1, 2, 4]
    assert c.settings["disable_radix_cache"] is False
    assert c.settings["lora_paths"] is None


def test_sglang_hard_wrapped_mid_word():
    c = cfg_of("[2025-03-18 09:12:01] server_args=ServerArgs(model_path='/m', tp_size=2, disable_custom_all_reduce=Fa",
               "lse, watchdog_timeout=300)",
               "[2025-03-18 09:12:09 TP0] Load weight begin. avail mem=78.52 GB")
    assert c.settings["disable_custom_all_reduce"] is False
    assert c.settings["watchdog_timeout"] == 300


def test_sglang_0519_dict_form():
    c = cfg_of("[2026-10-30 12:00:00] server_args={'model_path': 'Qwen/Qwen3-8B', 'tp_size': 2, "
               "'mem_fraction_static': 0.871, 'attention_backend': 'fa3', 'disable_radix_cache': True}")
    assert c.engine == "sglang"
    assert c.settings["disable_radix_cache"] is True
    assert c.settings["mem_fraction_static"] == 0.871


def test_vllm_namespace_and_version():
    c = cfg_of("INFO 09-03 08:14:51 api_server.py:495] vLLM API server version 0.6.0",
               "INFO 09-03 08:14:51 api_server.py:496] args: Namespace(host=None, port=8000, model='Qwen/Qwen2-72B', "
               "tensor_parallel_size=2, gpu_memory_utilization=0.95, enforce_eager=False, dispatch_function=<function serve at 0x7f>)")
    assert c.engine == "vllm"
    assert c.version == "0.6.0"
    assert c.settings["tensor_parallel_size"] == 2
    assert c.settings["enforce_eager"] is False
    assert c.settings["dispatch_function"] == "<function serve at 0x7f>"


def test_vllm_non_default_args_and_engine_config():
    c = cfg_of("INFO 05-12 10:11:05 [cli_args.py:325] non-default args: {'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 131072}",
               "INFO 05-12 10:11:14 [core.py:65] Initializing a V1 LLM engine (v0.9.1) with config: model='meta-llama/Llama-3.1-8B-Instruct', "
               "max_seq_len=131072, tensor_parallel_size=1, enforce_eager=False, kv_cache_dtype=auto, compilation_config={\"level\":3,\"use_cudagraph\":true}")
    assert c.version == "0.9.1"
    assert c.cli == {"model_tag": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 131072}
    assert c.settings["kv_cache_dtype"] == "auto"
    assert c.settings["compilation_config"] == '{"level":3,"use_cudagraph":true}'


def test_launch_command_from_a_shell_killed_line():
    c = cfg_of("./run.sh: line 22:    41 Killed                  python3 -m sglang.launch_server --model-path /m --tp 2 --enable-torch-compile")
    assert c.launch_command == "python3 -m sglang.launch_server --model-path /m --tp 2 --enable-torch-compile"


def test_environment_table_fields():
    c = cfg_of("[2025-06-24 22:26:45] server_args=ServerArgs(model_path='m', tp_size=8, dp_size=2, attention_backend='nsa', "
               "kv_cache_dtype='fp8_e4m3', disable_radix_cache=True, disable_cuda_graph=False, quantization='fp8')")
    env = build_environment([], c)
    assert (env.engine, env.model, env.tp_size, env.dp_size) == ("sglang", "m", 8, 2)
    assert env.kv_cache_dtype == "fp8_e4m3" and env.quantization == "fp8"
    assert env.prefix_cache == "disabled" and env.cuda_graph == "enabled"


def test_version_from_install_path():
    c = cfg_of('  File "/opt/conda/envs/sglang-0.4.7/lib/python3.10/site-packages/sglang/srt/x.py", line 1, in f')
    assert c.version == "0.4.7"


def test_gpu_model_memory_and_count():
    lines = [
        "[2025-06-24 22:26:45] server_args=ServerArgs(model_path='m', tp_size=4, dp_size=2)",
        "[2025-06-24 22:27:01 TP0] Using default MoE kernel config. Performance might be sub-optimal! Config file not "
        "found at /sgl/configs/E=257,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8.json",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 3 has a total capacity of 139.81 GiB",
    ]
    parsed = [parse_line(i + 1, t) for i, t in enumerate(lines)]
    env = build_environment(parsed, extract(parsed))
    assert (env.gpu, env.gpu_memory_gib, env.gpu_count) == ("NVIDIA H200", 139.81, 8)
