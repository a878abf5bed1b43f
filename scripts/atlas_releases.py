"""Which packages and releases the source atlas reads, and where their source lives upstream.

Shared by scripts/atlas_fetch.py and scripts/build_atlas.py. The engines are read release by
release (every final release from the first one triage supports); the libraries whose errors
surface in engine logs are read one release per minor version (the newest patch), which keeps
their messages' ranges honest at minor-version resolution for a tenth of the downloads.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from triage.catalogue.atlas import repo_path


@dataclass(frozen=True)
class Package:
    name: str  # the name the atlas and reports use
    dist: str  # the PyPI distribution
    first: str  # the oldest release read
    repo: str  # owner/name on GitHub, for links to a line at a release's tag
    repo_prefix: str  # where the wheel's top-level package sits in the repository
    tag: str = "v{version}"
    every_release: bool = True  # False: the newest patch of each minor version
    # wheel paths kept (below the top-level package); empty: every .py file of the package
    only: tuple[str, ...] = field(default=())
    top: tuple[str, ...] = field(default=())  # the wheel's top-level package folders
    # wheel paths left out: vendored code (CUTLASS's Python DSL in flashinfer/data), generated
    # kernels and experimental kernels whose asserts no server log shows
    skip: tuple[str, ...] = field(default=())
    # wheel path prefix -> repository path prefix, for files the build copies into the wheel from
    # elsewhere in the repository (Triton's backends: third_party/nvidia/backend/ becomes
    # triton/backends/nvidia/); the first prefix that matches wins, else repo_prefix
    paths: tuple[tuple[str, str], ...] = field(default=())

    def keeps(self, wheel_path: str) -> bool:
        if not any(wheel_path.startswith(t + "/") for t in self.top):
            return False
        if "/tests/" in wheel_path or "/test/" in wheel_path or wheel_path.rsplit("/", 1)[-1].startswith("test_"):
            return False
        if any(part in wheel_path for part in ("/third_party/", "/vendor/", "/_vendor/")):
            return False
        if any(wheel_path.startswith(p) for p in self.skip):
            return False
        return not self.only or any(wheel_path.startswith(p) for p in self.only)

    def link(self, version: str, wheel_path: str, line: int) -> str:
        tag = self.tag.format(version=version)
        return f"https://github.com/{self.repo}/blob/{tag}/{repo_path(self.repo_prefix, self.paths, wheel_path)}#L{line}"


PACKAGES: dict[str, Package] = {p.name: p for p in (
    Package("sglang", "sglang", "0.3.0", "sgl-project/sglang", "python/", top=("sglang",)),
    Package("vllm", "vllm", "0.4.0", "vllm-project/vllm", "", top=("vllm",)),
    Package("lmdeploy", "lmdeploy", "0.4.0", "InternLM/lmdeploy", "", every_release=False, top=("lmdeploy",)),
    Package("flashinfer", "flashinfer-python", "0.2.0", "flashinfer-ai/flashinfer", "", top=("flashinfer",),
            skip=("flashinfer/data/", "flashinfer/experimental/", "flashinfer/moe_ep/kernel_src/")),
    Package("xgrammar", "xgrammar", "0.1.0", "mlc-ai/xgrammar", "python/", top=("xgrammar",)),
    Package("transformers", "transformers", "4.36.0", "huggingface/transformers", "src/",
            every_release=False, top=("transformers",),
            only=tuple(f"transformers/{p}" for p in (
                "configuration_utils.py", "tokenization_utils_base.py", "tokenization_utils.py",
                "tokenization_utils_fast.py", "tokenization_python.py", "tokenization_utils_tokenizers.py",
                "models/auto/configuration_auto.py", "models/auto/tokenization_auto.py",
                "dynamic_module_utils.py", "utils/hub.py", "generation/configuration_utils.py",
                "modeling_rope_utils.py"))),
    Package("huggingface_hub", "huggingface_hub", "0.19.0", "huggingface/huggingface_hub", "src/",
            every_release=False, top=("huggingface_hub",)),
    # Triton, the kernel compiler SGLang and vLLM JIT-compile their kernels with: its Python
    # side (the JIT, the compiler driver, the language's semantic checks, the backends'
    # compiler.py/driver.py). Its C++/MLIR passes are in triton/_C's binaries, not read.
    # Left out: language/extra/ (libdevice wrappers generated from CUDA's and ROCm's device
    # libraries), ops/ (the example kernel library of 2.x-3.1, removed in 3.2; no server calls
    # it), tools/ (offline AOT compile/link/disasm scripts), profiler/ (Proton, vendored from
    # third_party/proton), experimental/ (Gluon, the lower-level kernel language of 3.4 on, and
    # the 3.9 sanitizer: a third of 3.9's Python, and no server kernel in these releases' logs
    # goes through it) and the test helpers (_internal_testing.py, _test_runner.py,
    # _filecheck.py): no server's crash goes through them.
    Package("triton", "triton", "2.1.0", "triton-lang/triton", "python/", every_release=False, top=("triton",),
            skip=("triton/language/extra/", "triton/ops/", "triton/tools/", "triton/profiler/",
                  "triton/experimental/", "triton/_internal_testing.py", "triton/_test_runner.py",
                  "triton/_filecheck.py"),
            paths=(("triton/backends/nvidia/", "third_party/nvidia/backend/"),
                   ("triton/backends/amd/", "third_party/amd/backend/"))),
)}

_FINAL = re.compile(r"^\d+(\.\d+)*(\.post\d+)?$")


def available(dist: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", dist, "--disable-pip-version-check"],
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def select(pkg: Package, versions: list[str]) -> list[str]:
    """The releases of `versions` the atlas reads for `pkg`, oldest first."""
    keep: list[Version] = []
    for v in versions:
        if not _FINAL.match(v):
            continue
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if parsed >= Version(pkg.first):
            keep.append(parsed)
    keep.sort()
    if not pkg.every_release:
        newest: dict[tuple[int, int], Version] = {}
        for v in keep:
            newest[(v.major, v.minor)] = v
        keep = sorted(newest.values())
    return [str(v) for v in keep]


def releases(pkg: Package) -> list[str]:
    return select(pkg, available(pkg.dist))
