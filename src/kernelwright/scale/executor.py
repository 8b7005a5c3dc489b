"""Which executor runs the judge's workers: `local` (worker processes on this host's GPUs) or
`ray` (one actor per GPU of a Ray cluster, raypool.py). The commands pick one with `--executor`."""

from __future__ import annotations

from ..judge.common.options import JudgeOptions

EXECUTORS = ("local", "ray")


def check_executor(executor: str, address: str | None, gpus: str | None = None) -> tuple[int, ...] | None:
    """The GPU indices of `--gpus` (None: every GPU); ValueError (a usage error) for an unknown
    executor, --address without Ray, --gpus with it (Ray picks each actor's GPU), or a bad list."""
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; use one of {', '.join(EXECUTORS)}")
    if address is not None and executor != "ray":
        raise ValueError("--address is for --executor ray")
    if gpus is None:
        return None
    if executor == "ray":
        raise ValueError("--gpus is for --executor local: on Ray each actor gets the GPU Ray reserves for it")
    try:
        ids = tuple(int(g) for g in gpus.split(",") if g.strip())
    except ValueError:
        raise ValueError(f"--gpus {gpus!r}: a comma list of GPU indices, e.g. --gpus 0,2") from None
    if not ids:
        raise ValueError("--gpus needs at least one GPU index, e.g. --gpus 0,2")
    return ids


def check_gpus_here(executor: str, gpus: str | None, device: str) -> None:
    """`--gpus` against this host's GPUs, before anything is written (DeviceUnavailable: a usage
    error), so that the corrected command can reuse the same --out."""
    ids = check_executor(executor, None, gpus) if executor == "local" else None
    if ids is None:
        return
    from ..judge.coordinator.backend import detect_backend
    from ..judge.coordinator.pool import choose_gpus

    backend, count = detect_backend(device)
    choose_gpus(backend, count, ids)


def judge_backend(executor: str, address: str | None, device: str) -> str:
    """Where candidates will be judged (cpu, cuda, hip): this host's `device`, or the Ray
    cluster's GPUs (a driver without a GPU may send work to a cluster with them)."""
    if executor == "ray":
        from .raypool import cluster_backend

        return cluster_backend(address)
    from ..judge.coordinator.backend import detect_backend

    return detect_backend(device)[0]


def open_pool(executor: str, address: str | None, device: str, options: JudgeOptions,
              workers_per_device: int | None = None, workers: int | None = None, gpus: str | None = None):
    """A judge pool on `executor`. With Ray, `device` and the per-device worker counts are the
    cluster's (one actor per GPU); `address` None starts a local Ray."""
    ids = check_executor(executor, address, gpus)
    if executor == "ray":
        from .raypool import RayJudgePool

        return RayJudgePool(address, options=options)
    from ..judge import JudgePool  # looked up at the call: tests stub kernelwright.judge.JudgePool

    if ids is None:  # (the keywords a stubbed pool in the tests takes)
        return JudgePool(device, workers=workers, options=options, workers_per_device=workers_per_device)
    return JudgePool(device, workers=workers, options=options, workers_per_device=workers_per_device, gpus=ids)
