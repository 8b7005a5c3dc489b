"""Which executor runs the judge's workers: `local` (worker processes on this host's GPUs) or
`ray` (one actor per GPU of a Ray cluster, raypool.py). The commands pick one with `--executor`."""

from __future__ import annotations

from ..common.options import JudgeOptions

EXECUTORS = ("local", "ray")


def check_executor(executor: str, address: str | None) -> None:
    """ValueError (a usage error) for an unknown executor, or --address without Ray."""
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise ValueError("--address is for --executor ray")


def open_pool(executor: str, address: str | None, device: str, options: JudgeOptions,
              workers_per_device: int | None = None, workers: int | None = None):
    """A judge pool on `executor`. With Ray, `device` and the per-device worker counts are the
    cluster's (one actor per GPU); `address` None starts a local Ray."""
    check_executor(executor, address)
    if executor == "ray":
        from .raypool import RayJudgePool

        return RayJudgePool(address, options=options)
    from .. import JudgePool  # looked up at the call: tests stub kernelwright.judge.JudgePool

    return JudgePool(device, workers=workers, options=options, workers_per_device=workers_per_device)
