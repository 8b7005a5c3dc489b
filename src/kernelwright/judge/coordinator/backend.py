"""Which devices the judge can use: the backend (CUDA, ROCm or the CPU interpreter) and its
device count, found without initialising the CUDA driver, and how many workers share each GPU
by default."""

from __future__ import annotations

import os

BACKENDS = ("auto", "cpu", "cuda", "hip")


class DeviceUnavailable(RuntimeError):
    """The requested device does not exist on this machine."""


class SandboxUnavailable(DeviceUnavailable):
    """This machine cannot confine candidates as asked (`--sandbox strict`, or an unknown level):
    nothing is judged (the commands exit 2 with the reason, as for a missing device)."""


def detect_backend(device: str = "auto") -> tuple[str, int]:
    """Return (backend, number of devices) for `device` in auto|cpu|cuda|hip."""
    if device not in BACKENDS:
        raise DeviceUnavailable(f"unknown device {device!r}; use one of {', '.join(BACKENDS)}")
    if device == "cpu":
        return "cpu", min(3, max(1, (os.cpu_count() or 2) - 1))
    import torch

    # Counted through NVML (amd-smi on ROCm), which leaves this process able to fork children that
    # use the GPU: `torch.cuda.is_available()` initialises the CUDA driver, after which a forked
    # child cannot (judge-suite starts the pool while the suite loads, and loading runs some test
    # modules in forked processes; two ROCm modules that touch the GPU at import were lost so).
    # Where NVML is missing torch falls back to the driver's count.
    count = torch.cuda.device_count()
    backend = "hip" if getattr(torch.version, "hip", None) else "cuda"
    if device == "auto":
        if count < 1:
            return detect_backend("cpu")
        return backend, count
    if count < 1 or backend != device:
        have = f"a {backend} GPU" if count > 0 else "no GPU"
        raise DeviceUnavailable(f"--device {device} requested, but this machine's torch sees {have}; "
                                "use --device auto or --device cpu (Triton interpreter)")
    return backend, count


def default_workers_per_device(n_devices: int) -> int:
    """Workers per GPU when none is asked for: one per two CPU cores of the GPU's share, at most 8.
    A worker's checks are mostly compilation (CPU) and its children run Python. On an H200 with 16
    cores that is 8, the setting every suite run in docs/benchmarks.md since the third session used
    (TritonBench-revised: all 184 tasks in 551 s)."""
    return max(1, min(8, (os.cpu_count() or 2) // (2 * max(1, n_devices))))
