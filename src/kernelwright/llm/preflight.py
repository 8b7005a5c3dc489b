"""Checks to run before a long job: is there a GPU, is Triton importable, does the model answer?

`kernelwright doctor` prints them; long commands call `preflight(...)`, which raises
`PreflightError` listing every failed check, so an hour-long run never dies in minute one on a
missing key. torch and triton are imported only inside the checks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from .client import LLMClient
from .errors import LLMError
from .settings import LLMSettings

PING_MESSAGES = [{"role": "user", "content": "Reply with the single word: ok"}]
PREFLIGHT_MAX_RETRIES = 2  # a model that needs more than this to say "ok" is not fit to start


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


def check_gpu() -> CheckResult:
    try:
        import torch
    except ImportError:
        return CheckResult("gpu", False, "PyTorch is not installed: install a CUDA or ROCm build "
                                         "of torch (https://pytorch.org/get-started)")
    if not torch.cuda.is_available():
        build = f"ROCm {torch.version.hip}" if torch.version.hip else (
            f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU only")
        return CheckResult("gpu", False, f"no GPU visible to PyTorch {torch.__version__} "
                                         f"({build} build): check the driver, "
                                         f"CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES, and that "
                                         f"torch was built for your GPU")
    backend = f"ROCm {torch.version.hip}" if torch.version.hip else f"CUDA {torch.version.cuda}"
    count = torch.cuda.device_count()
    return CheckResult("gpu", True, f"{torch.cuda.get_device_name(0)} "
                                    f"({count} device{'s' * (count > 1)}, {backend})")


def check_triton() -> CheckResult:
    try:
        import triton
    except ImportError as exc:
        return CheckResult("triton", False, f"cannot import triton ({exc}): pip install triton")
    return CheckResult("triton", True, f"triton {triton.__version__}")


def check_model(model: str, settings: LLMSettings) -> CheckResult:
    """Send a tiny prompt, bypassing the cache (the point is to reach the model)."""
    name = f"model {model}"
    if settings.offline:
        return CheckResult(name, True, "offline replay: not contacted")
    try:
        client = LLMClient(model, replace(settings, cache=False,
                                          max_retries=min(settings.max_retries,
                                                          PREFLIGHT_MAX_RETRIES)))
        completion = client.complete(PING_MESSAGES, max_tokens=16, temperature=0.0,
                                     use_cache=False)
    except LLMError as exc:
        return CheckResult(name, False, str(exc))
    answer = completion.text.strip().replace("\n", " ")
    return CheckResult(name, True, f"answered in {completion.latency_s:.2f} s "
                                   f"({completion.attempts} attempt(s)): {answer[:40]!r}")


def run_checks(model: str | None, settings: LLMSettings, *, gpu: bool = True,
               on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    checks: list[Callable[[], CheckResult]] = []
    if gpu:
        checks += [check_gpu, check_triton]
    if model:
        checks.append(lambda: check_model(model, settings))
    results = []
    for check in checks:
        result = check()
        results.append(result)
        if on_result:
            on_result(result)
    return results


def preflight(model: str | None = None, settings: LLMSettings | None = None, *,
              gpu: bool = True) -> list[CheckResult]:
    """Run the checks (the model's only if one is given or configured); raise `PreflightError`
    if any fails, else return the results for display."""
    settings = settings or LLMSettings()
    results = run_checks(model or settings.model, settings, gpu=gpu)
    if not all(r.ok for r in results):
        raise PreflightError(results)
    return results
