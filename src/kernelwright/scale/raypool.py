"""`--executor ray`: the judge pool's workers as Ray actors, one per GPU of the cluster.

Each actor (`rayactor.NodeJudge`) starts the same worker process a local pool starts, on the GPU
Ray reserved for it (`num_gpus=1`, so timing stays exclusive per GPU as on one host). Where the
cluster has no GPUs, a custom resource `kw_gpu` stands for them (tests simulate GPUs so), and on
a cluster with neither there is one actor per node. The driver keeps everything else: the static
stage, the queue, the verdicts and the run directory, exactly as with the local executor.

Nothing lost, nothing doubled: an actor that dies (its node lost, the actor killed) mid-candidate
leaves the run with its GPU (the run says so on stderr) and the candidate is judged again on
another actor, at most `MAX_REJUDGE` times (pool.py), after which its verdict is a judge error
saying why. A GPU whose candidates keep faulting leaves the run by the same rule as on one host
(judge/coordinator/health.py). A candidate's verdict is recorded once, by the one call that
returned it."""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path

from ..judge.common.options import JudgeOptions
from ..judge.coordinator.backend import DeviceUnavailable
from ..judge.coordinator.health import DeviceHealth
from ..judge.coordinator.pool import JudgePool, SlotLost, check_sandbox, protect_coordinator
from ..judge.coordinator.workerenv import SECRET_WORDS
from ..judge.coordinator.workerhandle import WorkerLost
from ..judge.common.privdir import private_dir
from ..judge.common.requests import JudgeRequest

SIM_RESOURCE = "kw_gpu"  # a custom resource that stands for a GPU on a CPU-only (test) cluster
INSTALL_HINT = "pip install 'kernelwright[ray]'"


class ActorLost(SlotLost):
    """The actor (or its node) died: not the candidate's verdict; it is judged again elsewhere."""


def import_ray():
    try:
        import ray
    except ImportError:
        raise DeviceUnavailable(f"--executor ray needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def connect(address: str | None) -> None:
    """Join the cluster at `address`, or start a local Ray when there is none (an existing
    ray.init in this process, e.g. a test's cluster, is kept)."""
    ray = import_ray()
    check_reachable(address)  # (first: an address nobody answers is an error whatever is running here)
    if ray.is_initialized():
        return
    # A local Ray's daemons and actors are started from this process and inherit its environment:
    # the API keys must not be in it (a candidate runs as the same user, and /proc/<pid>/environ
    # of a daemon is readable to it), so they are out of os.environ while Ray starts.
    hidden = {k: os.environ.pop(k) for k in list(os.environ) if SECRET_WORDS.search(k)}
    try:
        # log_to_driver off: the workers' own stderr is the judge's, not the run's output
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, TimeoutError) as exc:
        raise DeviceUnavailable(f"cannot join the Ray cluster at {address}: {_why(exc)}. {JOIN_HINT}") from None
    finally:
        os.environ.update(hidden)


JOIN_HINT = ("Is `ray start --head` running there, and is the address the head's (host:6379, or "
             "ray://host:10001 for Ray Client)? Without --address a local Ray is started.")


def check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """A host:port address (a GCS) that does not answer a TCP connection in `timeout_s` is
    refused at once: Ray itself retries such an address for minutes with only its own log lines.
    ray://, auto and None are left to Ray."""
    import socket

    if not address or address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise DeviceUnavailable(f"--address {address!r}: give host:port (e.g. head-node:6379), ray://host:10001 "
                                "or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise DeviceUnavailable(f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}). "
                                f"{JOIN_HINT}") from None


def actor_slots(ray) -> list[dict]:
    """Ray options for each actor: one per GPU, per simulated GPU, or per alive node."""
    total = ray.cluster_resources()
    if total.get("GPU", 0) >= 1:
        return [{"num_gpus": 1, "num_cpus": 0}] * int(total["GPU"])
    if total.get(SIM_RESOURCE, 0) >= 1:
        return [{"resources": {SIM_RESOURCE: 1}, "num_cpus": 0}] * int(total[SIM_RESOURCE])
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return [{"num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)}
            for node in ray.nodes() if node.get("Alive")]


def cluster_backend(address: str | None = None, slots: list[dict] | None = None) -> str:
    """The backend the cluster's actors judge on: it decides the options the workers apply
    (`JudgeOptions.resolved`) and which tasks can run, so it is asked of one GPU of the cluster
    (this driver may have none); "cpu" on a cluster without GPUs."""
    connect(address)
    ray = import_ray()
    if not any("num_gpus" in s for s in (slots if slots is not None else actor_slots(ray))):
        return "cpu"
    return ray.get(ray.remote(num_gpus=1, num_cpus=0)(_node_backend).remote())


def cluster_slots() -> int:
    """How many judging actors the connected cluster has room for."""
    return len(actor_slots(import_ray()))


class _Remote:
    """What the pool reads of a handle's process (`pid`, `poll`), for an actor's worker."""

    def __init__(self) -> None:
        self.pid: int = -1
        self.code: int | None = None

    def poll(self):
        return self.code


class RayWorkerHandle:
    """The driver's end of one actor: the same `wait_ready`/`judge`/`kill`/`close` as
    `WorkerHandle`, over Ray instead of a pipe."""

    def __init__(self, ray, actor_class, slot: dict, index: int, options: JudgeOptions, task_files) -> None:
        self.ray, self.index = ray, index
        self.process = _Remote()
        self.info: dict | None = None
        self.busy = False  # judging now (a test kills a busy actor)
        # candidates judged, seconds of their round trips, seconds spent on the node: what Ray
        # adds is the difference (benchmarks/ray_overhead.py)
        self.judged, self.round_trip_s, self.node_s = 0, 0.0, 0.0
        self.actor = actor_class.options(**slot, max_restarts=0).remote("auto" if "num_gpus" in slot else "cpu",
                                                                        options, tuple(task_files))

    def wait_ready(self) -> dict:
        if self.info is None:
            try:
                self.info = self.ray.get(self.actor.ready.remote())
            except self.ray.exceptions.RayActorError as exc:
                self.process.code = 1
                raise ActorLost(f"judging actor {self.index} died while starting: {_why(exc)}") from None
            except self.ray.exceptions.RayTaskError as exc:
                self.process.code = 1
                raise DeviceUnavailable(f"judging actor {self.index} could not start its worker: {exc}") from None
            self.process.pid = self.info.get("worker_pid", -1)
        return self.info

    def judge(self, request: JudgeRequest, timeout: float) -> dict:
        from .rayactor import task_payload

        source = Path(request.candidate_path).read_text(encoding="utf-8")
        ref, task_bytes = task_payload(request.task_ref)
        self.busy = True
        started = time.monotonic()
        try:
            data, node_s = self.ray.get(self.actor.judge.remote(request.to_wire(), source, task_bytes, timeout),
                                timeout=timeout + 60)
        except self.ray.exceptions.RayActorError as exc:
            self.process.code = 1
            raise ActorLost(f"judging actor {self.index} ({self._where()}) died while judging this candidate: "
                            f"{_why(exc)}") from None
        except self.ray.exceptions.GetTimeoutError:
            self.kill()
            raise WorkerLost(f"judging actor {self.index} did not answer within {timeout:g} s") from None
        finally:
            self.busy = False
        self.judged += 1
        self.round_trip_s += time.monotonic() - started
        self.node_s += node_s
        data["candidate"] = request.candidate_path  # the driver's name for it, not the node's copy
        return data

    def _where(self) -> str:
        return f"node {self.info.get('node')}" if self.info else "not started"

    def kill(self) -> None:
        self.process.code = self.process.code or -9
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def close(self) -> None:
        # a busy actor would read "close" only after its candidate (minutes): killed at once, as
        # a local pool kills a worker that is judging when it closes
        if self.process.code is None and not self.busy:
            try:
                self.ray.get(self.actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - a dead actor has nothing to close
                pass
        self.kill()


def _node_backend() -> str:
    from ..judge.coordinator.backend import detect_backend

    return detect_backend("auto")[0]


def _why(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__


class RayJudgePool(JudgePool):
    """A `JudgePool` whose workers are Ray actors across a cluster (see the module's docstring)."""

    def __init__(self, address: str | None = None, options: JudgeOptions | None = None) -> None:
        # deliberately not JudgePool.__init__: no local device detection and no local workers
        ray = import_ray()
        self.options = options or JudgeOptions()
        check_sandbox(self.options.sandbox)
        protect_coordinator()  # this driver holds the API keys, as a local pool's coordinator does
        connect(address)
        self._ray = ray
        self._slots = actor_slots(ray)
        if not self._slots:
            raise DeviceUnavailable("the Ray cluster has no GPU, no 'kw_gpu' resource and no alive node")
        from .rayactor import NodeJudge

        self._actor_class = ray.remote(NodeJudge)
        self.backend = cluster_backend(address, self._slots)
        self.n_devices = self.n_workers = len(self._slots)
        self.gpu_workers = 1
        self._init_common()
        self.health = DeviceHealth(self.n_devices, self._device_name)

    def _init_common(self) -> None:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self._workers: list = [None] * self.n_workers  # RayWorkerHandle: the WorkerHandle interface
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(self.n_workers):
            self._free.put(i)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.device_info: dict = {}
        self.private = private_dir()
        self._init_submissions()
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelwright-spawner")
        self._task_files: list[str] = []

    def _spawn(self, index: int):
        handle = self._workers[index]
        if handle is None or handle.process.poll() is not None:
            handle = RayWorkerHandle(self._ray, self._actor_class, self._slots[index], index, self.options,
                                     self._task_files)
            self._workers[index] = handle
        return handle

    def _device_name(self, device: int) -> str:
        handle = self._workers[device] if 0 <= device < len(self._workers) else None
        where = f" on node {handle.info.get('node')}" if handle is not None and handle.info else ""
        return f"the GPU of judging actor {device}{where}"

    def _lost(self, index: int, exc: WorkerLost) -> None:
        """A dead actor (or node) takes its GPU out of the run at once and the candidate is judged
        again elsewhere (SlotLost); a worker that stopped answering is replaced, as locally."""
        if not isinstance(exc, ActorLost):
            self._replace(index)
            return
        self.health.retire(index, f"{exc} (the actor is not restarted)")
        with self._lock:
            self._workers[index] = None
        raise exc

    def _replace(self, index: int) -> None:
        handle = self._workers[index]
        self._workers[index] = None
        if handle is not None:
            handle.kill()

    def close(self) -> None:
        self._closing.set()
        for i, handle in enumerate(self._workers):
            if handle is not None:
                handle.close()
                self._workers[i] = None
        self._spawner.shutdown(wait=True)
        self._close_submissions()
