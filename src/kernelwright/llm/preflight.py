"""Checks to run before a long job: where kernels are judged (a GPU, or Triton's CPU
interpreter), is Triton importable, is the model set up (key, URL, SDK package) and does it answer?

`kernelwright doctor` prints them; long commands call `preflight(...)`, which raises
`PreflightError` listing every failed check, so an hour-long run never dies in minute one on a
missing key. torch and triton are imported only inside the checks.
"""

from __future__ import annotations

import os

from dataclasses import dataclass, replace
from typing import Callable

from .client import LLMClient
from .errors import LLMError
from .settings import LLMSettings

PING_MESSAGES = [{"role": "user", "content": "Reply with the single word: ok"}]
PREFLIGHT_MAX_RETRIES = 2  # a model that needs more than this to say "ok" is not fit to start
# A 16-token answer needs no reasoning model's minutes: a server that accepts the connection and
# then says nothing must not hold the start of a run for three times llm.timeout_s (300 s); each
# attempt waits llm.preflight_timeout_s (10 s; KERNELWRIGHT_LLM_PREFLIGHT_TIMEOUT_S).


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str


class PreflightError(RuntimeError):
    def __init__(self, results: list[CheckResult]) -> None:
        self.results = results
        failed = "; ".join(f"{r.name}: {r.detail}" for r in results if not r.ok)
        super().__init__(f"preflight failed: {failed}")


DEVICES = ("auto", "cpu", "cuda", "hip")
INTERPRETER_NOTE = ("the judge runs kernels under Triton's CPU interpreter, a supported mode (static, call "
                    "and correctness checks; speed is measured on GPUs only)")


def _torch_build(torch) -> str:
    return (f"ROCm {torch.version.hip}" if torch.version.hip else
            f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only")


def check_device(device: str = "auto") -> CheckResult:
    """Where kernels will be judged. `auto`: a GPU if PyTorch sees one, else the CPU
    interpreter (ok: a supported mode); `cpu`: the interpreter; `cuda`/`hip`: that GPU or FAIL."""
    if device not in DEVICES:
        return CheckResult("gpu", False, f"unknown device {device!r}: use one of {', '.join(DEVICES)}")
    try:
        import torch
    except ImportError:
        return CheckResult("gpu", False, "PyTorch is not installed: on a CPU-only machine "
                           "`pip install torch --index-url https://download.pytorch.org/whl/cpu`, on a GPU "
                           "machine the CUDA or ROCm build (https://pytorch.org/get-started)")
    if device == "cpu":
        return CheckResult("gpu", True, f"not used (--device cpu): {INTERPRETER_NOTE}; "
                                        f"PyTorch {torch.__version__} ({_torch_build(torch)} build)")
    build = _torch_build(torch)
    count = torch.cuda.device_count()
    if count < 1:
        why = (f"no GPU visible to PyTorch {torch.__version__} ({build} build)")
        if device == "auto":
            return CheckResult("gpu", True, f"none, {why}: {INTERPRETER_NOTE}. To judge on a GPU, "
                                            "install the CUDA or ROCm build of torch and check the driver")
        fix = ("this torch cannot use a GPU: install the CUDA or ROCm build (https://pytorch.org/get-started)"
               if build == "CPU only" else
               "check the driver, CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES, and that torch was built for your GPU")
        return CheckResult("gpu", False, f"--device {device}: {why}: {fix}; or use --device cpu "
                                            f"(Triton's CPU interpreter)")
    backend = "hip" if torch.version.hip else "cuda"
    if device in ("cuda", "hip") and device != backend:
        return CheckResult("gpu", False, f"--device {device}, but this torch is a {build} build "
                                            f"(its GPUs are {backend}): use --device {backend} or auto")
    return CheckResult("gpu", True, f"{backend}: {count} device{'s' * (count > 1)} ({build}): "
                                       f"{list_gpus(torch, count, backend)}")


def list_gpus(torch, count: int, backend: str) -> str:
    """Each GPU this process sees, by the index `--gpus` takes, and the variable that chose them
    (a worker pinned to GPU i gets the i-th of these)."""
    names = "; ".join(f"{i}: {torch.cuda.get_device_name(i)}" for i in range(count))
    var = "HIP_VISIBLE_DEVICES" if backend == "hip" else "CUDA_VISIBLE_DEVICES"
    visible = os.environ.get(var)
    chosen = f" ({var}={visible})" if visible else ""
    return f"{names}{chosen}; judge on some of them with --gpus 0,2"


def check_triton() -> CheckResult:
    try:
        import triton
    except ImportError as exc:
        return CheckResult("triton", False, f"cannot import triton ({exc}): pip install triton")
    return CheckResult("triton", True, f"triton {triton.__version__}")


def check_sandbox() -> CheckResult:
    """What this machine gives the judge's sandbox (`--sandbox auto` uses all of it; `strict`
    needs Landlock's files, network and signals). Informational: `auto` judges either way."""
    from ..judge.common.capabilities import check_level, probe

    caps = probe()
    _code, strict_refusal = check_level("strict", caps)
    detail = caps.summary() + ("; --sandbox strict would refuse to judge here" if strict_refusal else "")
    return CheckResult("sandbox", True, detail)


def check_suite(suite: str) -> list[CheckResult]:
    """The Python modules `suite`'s tasks need beyond kernelwright's dependencies (the optional
    extras: the ROCm suite's scipy), each installed or not, with what installs it."""
    from importlib.metadata import PackageNotFoundError, version

    from ..suites.extras import EXTRA_MODULES, suite_extras

    extras = suite_extras(suite)
    if not extras:
        return [CheckResult(f"suite {suite}", True, "needs no optional module")]
    results = []
    for _, module, why, installed in extras:
        if not installed:
            results.append(CheckResult(module, False, f"not installed, and {why}: {EXTRA_MODULES[module]}"))
            continue
        try:
            found = f"{module} {version(module)}"
        except PackageNotFoundError:
            found = module
        results.append(CheckResult(module, True, f"{found}: {why}"))
    return results


def model_setup_problems(model: str, settings: LLMSettings) -> list[CheckResult]:
    """Everything that stops `model` before a request is sent, all at once, each with its fix:
    an unknown model name, a missing key or URL, a missing SDK package."""
    import importlib.util

    from .models import parse_model

    name = f"model {model}"
    try:
        spec = parse_model(model)
    except LLMError as exc:
        return [CheckResult(name, False, str(exc))]
    problems = []
    package = "anthropic" if spec.info.protocol == "anthropic" else "openai"
    if importlib.util.find_spec(package) is None:
        problems.append(CheckResult(f"package {package}", False,
                                    f"the {package!r} package (needed by {spec.provider}) is not installed: "
                                    f"pip install 'kernelwright[llm]'"))
    if not settings.offline:
        try:
            settings.endpoint(spec)
        except LLMError as exc:
            problems.insert(0, CheckResult(name, False, str(exc)))
    return problems


def check_model(model: str, settings: LLMSettings) -> CheckResult:
    """Send a tiny prompt, bypassing the cache (the point is to reach the model)."""
    name = f"model {model}"
    if settings.offline:
        return CheckResult(name, True, "offline replay: not contacted")
    try:
        client = LLMClient(model, replace(settings, cache=False,
                                          max_retries=min(settings.max_retries,
                                                          PREFLIGHT_MAX_RETRIES),
                                          timeout_s=min(settings.timeout_s, settings.preflight_timeout_s)))
        completion = client.complete(PING_MESSAGES, max_tokens=16, temperature=0.0,
                                     use_cache=False)
    except LLMError as exc:
        return CheckResult(name, False, str(exc))
    answer = completion.text.strip().replace("\n", " ")
    return CheckResult(name, True, f"answered in {completion.latency_s:.2f} s "
                                   f"({completion.attempts} attempt(s)): {answer[:40]!r}")


def run_checks(model: str | None, settings: LLMSettings, *, gpu: bool = True, device: str = "auto",
               on_result: Callable[[CheckResult], None] | None = None,
               suite: str | None = None) -> list[CheckResult]:
    """Every check, each reported (`on_result`) as it finishes: a failure never hides the
    next one. The model is pinged only when nothing stops it before a request (key, URL,
    package); otherwise each of those problems is its own failed result. `suite`: also the
    optional modules that suite's tasks need."""
    results: list[CheckResult] = []

    def record(result: CheckResult) -> None:
        results.append(result)
        if on_result:
            on_result(result)

    if gpu:
        record(check_device(device))
        record(check_triton())
        record(check_sandbox())
    if suite:
        for result in check_suite(suite):
            record(result)
    if model:
        problems = model_setup_problems(model, settings)
        for problem in problems:
            record(problem)
        if not problems:
            record(check_model(model, settings))
    return results


def preflight(model: str | None = None, settings: LLMSettings | None = None, *,
              gpu: bool = True, device: str = "auto") -> list[CheckResult]:
    """Run the checks (the model's only if one is given or configured); raise `PreflightError`
    if any fails, else return the results for display. `device="auto"` accepts the CPU
    interpreter when there is no GPU; `device="cuda"` (or "hip") requires that GPU."""
    settings = settings or LLMSettings()
    results = run_checks(model or settings.model, settings, gpu=gpu, device=device)
    if not all(r.ok for r in results):
        raise PreflightError(results)
    return results
