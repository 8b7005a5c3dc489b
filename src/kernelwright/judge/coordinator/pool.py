"""The judge coordinator: runs the static stage itself and hands the rest to worker processes.

The coordinator lives in the trusted process (CLI, agent) and never imports candidate code. It
starts one worker per GPU (a few on CPU) as separate Python processes, sends them judge requests
over private pipes and collects verdicts. A worker that dies or stops answering is replaced and
the candidate gets a `judge_error` verdict: a run never crashes and never loses a result.
Candidates come in, and their verdicts go out, through `submissions` (`submit`, `judge`,
`judge_many`); this module judges each candidate file on its workers.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from ...tasks import Task
from ...tasks.files import ref_files
from ..common.capabilities import check_level
from ..common.gpulock import MAX_LOCK_CREDIT_S
from ..common.options import JudgeOptions
from ..common.privdir import private_dir
from ..common.requests import JudgeRequest
from ..common.verdict import FailureKind, Verdict, judge_error_verdict
from .backend import DeviceUnavailable, SandboxUnavailable, default_workers_per_device, detect_backend
from .health import DeviceHealth
from .static import check_source
from .submissions import PoolClosed, Submissions
from .workerhandle import WorkerHandle, WorkerLost, remove_worker_caches, sweep_stale


class SlotLost(WorkerLost):
    """This attempt's worker cannot be used again (its GPU out of service, its Ray actor dead):
    not the candidate's verdict; it is judged again on another GPU."""


MAX_REJUDGE = 2  # a candidate whose attempt was lost (SlotLost) is judged again at most this often
# outcomes that may be the GPU's doing rather than the candidate's (health.py): a broken context,
# and a wedged GPU (every candidate timing out); a lost worker counts too
SUSPECT_KINDS = {FailureKind.GPU_FAULT.value, FailureKind.TIMEOUT.value}


def known_good_job() -> tuple[Task, Path]:
    """The kernel that checks a GPU under suspicion (health.py): the built-in vector_add task and
    its Triton reference, which passes on every supported GPU and under the interpreter."""
    from ...tasks.registry import builtin_task_paths, load_builtin_task

    task = load_builtin_task(builtin_task_paths()["vector_add"])
    assert task.triton_reference is not None
    return task, Path(task.triton_reference)


def static_verdict(task: Task, candidate: Path) -> Verdict | None:
    """Run the static stage; return a failing verdict, or None when the candidate may run."""
    result = check_source(candidate, task.entry_point.name)
    if result.ok:
        return None
    return Verdict(task=task.name, candidate=str(candidate), stage="static", call=False, correct=False,
                   reason=result.reason, kind=FailureKind(result.kind or FailureKind.JUDGE_ERROR))


def job_timeout(task: Task, opts: JudgeOptions) -> float:
    """A worker enforces every stage's timeout itself; this outer bound only catches a stuck
    worker, so it is the sum of everything the worker could legitimately spend, plus margin.
    `opts` as the worker applies them (`JudgeOptions.resolved`)."""
    n_items = len(task.correctness_cases) * opts.seeds + 1
    perf_requests = len(task.perf_cases) * (2 * opts.perf_blocks + 8) if opts.perf else 0
    # Capped at a week: a task with thousands of perf cases must not overflow poll()'s timeout.
    # every request may also compile, for up to compile_timeout: the first few of each stage do
    compiles = (4 + len(task.perf_cases) * 2) * opts.compile_timeout
    return min(opts.load_timeout * 3 + opts.call_timeout + opts.case_timeout * n_items * 2
               + opts.perf_timeout * perf_requests + compiles + 60 + MAX_LOCK_CREDIT_S, 7 * 24 * 3600.0)


_sandbox_warnings: set[str] = set()


def check_sandbox(level: str) -> None:
    """Before any worker starts: `--sandbox strict` on a machine that cannot confine candidates
    fully raises `SandboxUnavailable`; `auto` on one says once per process what is missing."""
    code, message = check_level(level)
    if code is not None:
        raise SandboxUnavailable(message)
    if message and message not in _sandbox_warnings:
        _sandbox_warnings.add(message)
        sys.stderr.write(f"warning: {message}\n")


class JudgePool(Submissions):
    """Judge candidates on every device of one backend. Thread-safe; use as a context manager.
    Candidates come in through `submit`, `judge` and `judge_many` (`Submissions`); each file is
    judged here (`_judge_file`): the static stage, then a free worker whose GPU is in service."""

    def __init__(self, device: str = "auto", workers: int | None = None,
                 options: JudgeOptions | None = None, workers_per_device: int | None = 1,
                 gpus: tuple[int, ...] | None = None) -> None:
        """`workers`: on CPU, how many interpreter workers; on GPUs, how many devices to use
        (default all). `gpus`: which GPUs, by their index among those this process sees
        (`--gpus 0,2`; each worker pinned to one through CUDA_/HIP_VISIBLE_DEVICES). `workers_per_device` > 1 overlaps compilation and correctness checks of
        several candidates on one GPU; timing stays exclusive per GPU (a lock file per device).
        None picks `default_workers_per_device`."""
        self.options = options or JudgeOptions()
        check_sandbox(self.options.sandbox)
        self.backend, count = detect_backend(device)
        self.device_ids = choose_gpus(self.backend, count, gpus)
        if self.backend == "cpu":
            self.n_devices = 1
            n = workers if workers is not None else count
        else:
            self.n_devices = len(self.device_ids) if workers is None else max(1, min(workers, len(self.device_ids)))
            per_device = workers_per_device or default_workers_per_device(self.n_devices)
            n = self.n_devices * max(1, per_device)
        self.n_workers = max(1, n)
        # workers per GPU: a GPU with one worker needs no shared lock around its checks
        self.gpu_workers = 1 if self.backend == "cpu" else max(1, self.n_workers // self.n_devices)
        self._workers: list[WorkerHandle | None] = [None] * self.n_workers
        self._free: queue.Queue[int] = queue.Queue()
        for i in range(self.n_workers):
            self._free.put(i)
        self.health = DeviceHealth(self.n_devices, self._device_name)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.device_info: dict = {}
        self.private = private_dir()  # 0700, ours: lock files, submitted sources, Triton caches
        sweep_stale(self.private)
        protect_coordinator()
        self._init_submissions()  # `submit` and the rest: submissions.py
        # Workers die with the *thread* that started them (PR_SET_PDEATHSIG follows the thread),
        # so they are all started from one thread that lives as long as the pool; a judge_many
        # thread that ends must not take its workers with it.
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kernelwright-spawner")
        # what confined children may read from their first fork (`admit`)
        self._task_files: list[str] = []

    # -- workers ----------------------------------------------------------------------------
    def _spawn(self, index: int) -> WorkerHandle:
        """The worker at `index`, its process started (a new one if it has none or it died)."""
        handle = self._workers[index]
        if handle is None or handle.process.poll() is not None:
            handle = self._spawner.submit(WorkerHandle, self.backend, self.device_ids[index % self.n_devices],
                                          self.options,
                                          private=self.private, gpu_workers=self.gpu_workers,
                                          task_files=tuple(self._task_files)).result()
            self._workers[index] = handle
        return handle

    def _worker(self, index: int) -> WorkerHandle:
        """The worker at `index`, started and ready. Only the process start goes through the
        spawner thread; the handshake is awaited here, so workers start side by side (one after
        another, eight took 34 s on the H200 before the last one judged anything)."""
        handle = self._spawn(index)
        try:
            info = handle.wait_ready()
        except BaseException:
            self._workers[index] = None
            raise
        with self._lock:
            self.device_info = dict(info)
        return handle

    def admit(self, tasks: Iterable[Task]) -> "JudgePool":
        """Let the confined children of workers started from now on read these tasks' files (their
        checkouts) from their first fork: the spares a worker forks ahead then serve its first
        candidate. A worker started before admits a task at its first request for it, forking
        its spares again (`Worker._admit`); `judge_many` admits its jobs' tasks itself."""
        for task in tasks:
            self._task_files += [f for f in ref_files(task.ref) if f not in self._task_files]
        return self

    def start(self, wait: bool = True) -> "JudgePool":
        """Start every worker now (otherwise each starts on first use). With wait=False only the
        processes are started: they get ready in the background (a suite loads its tasks
        meanwhile), and the first request to each waits for what is left."""
        for i in range(self.n_workers):
            self._spawn(i)
        if wait:
            for i in range(self.n_workers):
                self._worker(i)
        return self

    def close(self) -> None:
        # first, so that a judging thread that loses its worker to this close (Ctrl-C) raises
        # PoolClosed instead of recording a verdict for a task that was never judged: a stored
        # verdict is final, and the resumed run would skip it
        self._closing.set()
        pids = []
        for i, handle in enumerate(self._workers):
            if handle is not None:
                pids.append(handle.process.pid)
                handle.close()
                self._workers[i] = None
        self._spawner.shutdown(wait=True)
        self._close_submissions()
        remove_worker_caches(self.private, pids)

    def __enter__(self) -> "JudgePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- judging one candidate file (`submit`, `judge` and `judge_many` end here) -------------
    def _judge_file(self, task: Task, candidate: Path, options: JudgeOptions | None) -> Verdict:
        """The verdict of one candidate file: the static stage here, the rest on a free worker.
        A verdict from a GPU that was then found broken (health.py), or a worker that cannot be
        used again (a dead Ray actor), costs an attempt, not the verdict: the candidate is judged
        again on another GPU, at most MAX_REJUDGE times, then gets a judge error naming each loss."""
        candidate = candidate.expanduser().resolve()
        opts = options or self.options
        failed = static_verdict(task, candidate)
        if failed is not None:
            return failed
        resolved = opts.resolved(self.backend)
        request = JudgeRequest(task_ref=task.ref, candidate_path=str(candidate), seeds=opts.draw_seeds(),
                               options=resolved)
        losses, started = [], time.monotonic()
        for _attempt in range(1 + MAX_REJUDGE):
            try:
                verdict = self._judge_once(task, request, resolved)
            except SlotLost as exc:
                losses.append(str(exc))
                continue
            if losses:  # (its total: every attempt's)
                verdict.stage_seconds["total"] = round(time.monotonic() - started, 3)
            return verdict
        if self._closing.is_set():  # lost to the close, not to the GPUs: no verdict, a resume judges it
            raise PoolClosed("the judge pool was closed while this candidate was judged")
        verdict = judge_error_verdict(task.name, str(candidate), "judged %d times, and each time lost: %s"
                                      % (len(losses), "; ".join(dict.fromkeys(losses))), seeds=request.seeds)
        verdict.stage_seconds["total"] = round(time.monotonic() - started, 3)
        return verdict

    def _judge_once(self, task: Task, request: JudgeRequest, resolved: JudgeOptions) -> Verdict:
        """One attempt on one worker. SlotLost: this attempt's verdict cannot stand (its GPU is
        out of service, or was taken out after it); the caller judges the candidate again elsewhere."""
        index = self._take_slot()
        started = time.monotonic()  # (the verdict's total: from a worker taking it up)
        try:
            try:
                worker = self._worker(index)
                data = worker.judge(request, job_timeout(task, resolved))
                data["task"] = data.get("task") or task.name
                verdict, suspect = Verdict.from_dict(data), data.get("kind") in SUSPECT_KINDS
            except WorkerLost as exc:
                if self._closing.is_set():
                    raise PoolClosed("the judge pool was closed while this candidate was judged") from exc
                self._lost(index, exc)  # (a dead Ray actor raises SlotLost here)
                verdict, suspect = judge_error_verdict(task.name, request.candidate_path, str(exc),
                                                       seeds=request.seeds), True
            verdict.stage_seconds["total"] = round(time.monotonic() - started, 3)  # (not the check's)
            device = self._device_of(index)
            if suspect and not self.health.in_service(device):  # another worker's check retired it meanwhile
                raise SlotLost(f"{self._device_name(device)} was taken out of service while this candidate "
                               f"was judged there ({verdict.kind.value})")
            if self.health.record(device, suspect):
                why = self.health.check(device, lambda: self._known_good_fails(index))
                if why is not None:
                    raise SlotLost(f"{self._device_name(device)} was taken out of service after this "
                                   f"candidate's {verdict.kind.value}: {why}")
            return verdict
        finally:
            self._give_back(index)

    # -- which worker, and whether its GPU is still in service (health.py) -------------------
    def _device_of(self, index: int) -> int:
        return index % self.n_devices

    def _device_name(self, device: int) -> str:
        return "the CPU interpreter" if self.backend == "cpu" else f"GPU {self.device_ids[device]}"

    def _take_slot(self) -> int:
        """A free worker whose GPU is in service. PoolClosed when the pool closes meanwhile;
        SlotLost when no GPU is left in service (each candidate's verdict then says why)."""
        while True:
            if self._closing.is_set():
                raise PoolClosed("the judge pool was closed before this candidate was judged")
            if self.health.all_retired():
                raise SlotLost("every GPU of this run is out of service: " + "; ".join(
                    f"{d['device']}: {d['why']}" for d in self.health.report()))
            try:
                index = self._free.get(timeout=0.5)
            except queue.Empty:
                continue
            if self.health.in_service(self._device_of(index)):
                return index
            # a worker of a retired GPU leaves the queue for good (closed with the pool)

    def _give_back(self, index: int) -> None:
        self._free.put(index)

    def _lost(self, index: int, exc: WorkerLost) -> None:
        """A worker died or stopped answering mid-candidate: a fresh one takes its place."""
        self._replace(index)

    def _known_good_fails(self, index: int) -> str | None:
        """Judge the known-good kernel on a fresh worker at `index` (its GPU under suspicion; fresh,
        so that nothing a candidate left in the old worker's caches can fail the check): None
        when it passes, else what went wrong. PoolClosed when the pool closes meanwhile (a
        close is not the GPU's failure)."""
        if self._closing.is_set():
            raise PoolClosed("the judge pool was closed before a GPU was checked")
        task, path = known_good_job()
        self.admit([task])
        opts = replace(self.options, perf=False, profile="off").resolved(self.backend)
        request = JudgeRequest(task_ref=task.ref, candidate_path=str(path), seeds=opts.draw_seeds(), options=opts)
        try:
            self._replace(index)
            data = self._worker(index).judge(request, job_timeout(task, opts))
        except Exception as exc:  # noqa: BLE001 - a check that cannot run says the GPU cannot either
            if self._closing.is_set():
                raise PoolClosed("the judge pool was closed while a GPU was checked") from exc
            if isinstance(exc, WorkerLost):
                self._lost(index, exc)
            return f"its worker was lost judging it: {exc}" if isinstance(exc, WorkerLost) else \
                f"the check itself failed: {exc!r}"
        if self._closing.is_set():
            raise PoolClosed("the judge pool was closed while a GPU was checked")
        if data.get("correct"):
            return None
        return f"{task.name}'s reference Triton kernel got {data.get('kind')}: {str(data.get('reason'))[:300]}"

    def _replace(self, index: int) -> None:
        handle = self._workers[index]
        self._workers[index] = None
        if handle is not None:
            handle.kill()
            remove_worker_caches(self.private, [handle.process.pid])  # a killed worker cannot


def choose_gpus(backend: str, count: int, gpus: tuple[int, ...] | None) -> tuple[int, ...]:
    """The GPU indices the pool uses: all of them, or `gpus` (checked: each seen, none twice)."""
    if gpus is None:
        return tuple(range(count)) if backend != "cpu" else (0,)
    if backend == "cpu":
        raise DeviceUnavailable("--gpus was given, but the judge runs on the CPU interpreter here (no GPU seen): "
                                "drop --gpus, or run where `kernelwright doctor` lists GPUs")
    bad = [g for g in gpus if not 0 <= g < count]
    if bad or len(set(gpus)) != len(gpus) or not gpus:
        raise DeviceUnavailable(f"--gpus {','.join(map(str, gpus))}: this machine's torch sees {count} GPU(s), "
                                f"indices 0..{count - 1}, each at most once (`kernelwright doctor` lists them)")
    return tuple(gpus)


def protect_coordinator() -> None:
    """Make this (the coordinator's) process non-dumpable: a candidate runs as the same user, and
    could otherwise read `/proc/<coordinator>/environ` (the API keys the agent was started with)
    and its memory. The cost: no core dumps of this process, and a debugger or py-spy needs root
    to attach. KERNELWRIGHT_KEEP_DUMPABLE=1 keeps it as it is (for debugging the coordinator)."""
    from ..common.procs import make_undumpable

    if os.environ.get("KERNELWRIGHT_KEEP_DUMPABLE", "") in ("", "0"):
        make_undumpable()


__all__ = ["DeviceUnavailable", "JudgeOptions", "JudgePool", "PoolClosed", "SandboxUnavailable", "detect_backend"]
