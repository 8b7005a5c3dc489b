"""The environment a judge worker is started with: an allow-list, so that no secret of the user's
(OPENAI_API_KEY, ANTHROPIC_API_KEY, AWS_*, HF_TOKEN, GITHUB_TOKEN, ...) reaches the processes that
run candidate code. Candidate children are forked from the worker: they inherit its environment,
and `/proc/<pid>/environ` of a process shows the environment it was *exec'd* with, so the worker
itself must be exec'd with the clean one (cleaning `os.environ` after the start would not do).

Passed through (when set): the names in `ALLOWED`, the prefixes in `ALLOWED_PREFIXES` (except
addresses and the LLM layer's own settings, `NOT_BY_PREFIX`), and the names listed in
`KERNELWRIGHT_WORKER_ENV` (comma-separated, for a setup that needs more). Never passed, even when
named: a name that looks like a credential (`SECRET_WORDS`), and Triton's cache locations, which
the judge sets itself per process (`JUDGE_SETS`).
"""

from __future__ import annotations

import os
import re
from typing import Mapping

ALLOWED = frozenset({
    # the process basics
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "TERM",
    # Python
    "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS",
    "PYTHONFAULTHANDLER", "VIRTUAL_ENV", "CONDA_PREFIX",
    # compilers and libraries (Triton builds its launchers with the C compiler)
    "CC", "CXX", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "C_INCLUDE_PATH",
    # devices and their toolkits
    "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "ROCM_HOME", "HIP_PATH", "NVIDIA_VISIBLE_DEVICES",
    # CPU threading
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
})
ALLOWED_PREFIXES = ("LC_", "KERNELWRIGHT_", "TRITON_", "TORCH_", "PYTORCH_", "CUDA_", "CUBLAS_", "CUDNN_",
                    "NCCL_", "NVSHMEM_", "HIP_", "HSA_", "ROCR_", "AMD_", "MIOPEN_")
# A credential by its name: whole words of the name, so that CUDA_MODULE_LOADING passes and
# KERNELWRIGHT_OPENAI_API_KEY does not.
SECRET_WORDS = re.compile(r"(^|_)(KEY|KEYS|TOKEN|TOKENS|SECRET|SECRETS|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH|"
                          r"COOKIE|SESSION|PRIVATE|APIKEY)(_|$)", re.IGNORECASE)
# Passed only when named in KERNELWRIGHT_WORKER_ENV: addresses (a URL may carry a password), and
# the LLM and agent layer's own KERNELWRIGHT_ settings (models, endpoints, the config file, the
# answer cache), which no worker reads.
NOT_BY_PREFIX = re.compile(r"(^|_)(URL|URI|DSN|ENDPOINT|LLM|MODEL|CONFIG|CACHE|OFFLINE|OPENAI|ANTHROPIC|GEMINI|"
                           r"OLLAMA|VLLM|COMPATIBLE)(_|$)", re.IGNORECASE)
# Set by the judge in each child (its own Triton cache), never inherited from the user's shell.
JUDGE_SETS = frozenset({"TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR",
                        "TRITON_CACHE_MANAGER", "TRITON_REMOTE_CACHE_BACKEND", "TORCHINDUCTOR_CACHE_DIR"})
EXTRA_ENV = "KERNELWRIGHT_WORKER_ENV"


def is_passed(name: str, extra: frozenset[str] = frozenset()) -> bool:
    """Whether a variable of this name reaches the worker."""
    if name in JUDGE_SETS or SECRET_WORDS.search(name):
        return False
    if name in ALLOWED or name in extra:
        return True
    return name.startswith(ALLOWED_PREFIXES) and not NOT_BY_PREFIX.search(name)


def worker_environment(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The allow-listed part of `source` (default: this process's environment)."""
    source = os.environ if source is None else source
    extra = frozenset(n.strip() for n in source.get(EXTRA_ENV, "").split(",") if n.strip())
    return {k: v for k, v in source.items() if is_passed(k, extra)}
