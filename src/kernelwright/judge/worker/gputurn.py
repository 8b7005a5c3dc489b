"""The GPU lock as a worker holds it (`GpuTurns`, a part of `process.Worker`): whether its
children take it shared around their GPU work, holding the GPU exclusively (a timing turn, or a
task judged again alone after running out of memory), the wait for a timing turn counted in the
verdict and bounded during one (`MAX_TURN_WAIT_S`, `lockguard`'s check while it waits), and the
candidate's GPU memory cap, lifted while the worker has the GPU alone.

The lock itself (the flock on the device's lock files, the turnstile) is `common.gpulock`.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

from ..common import lockholders
from ..common.gpulock import DRAIN_REPORT_S, MAX_LOCK_CREDIT_S, device_lock
from ..common.knobs import TRACE, trace
from ..common.options import JudgeOptions, WorkerOptions
from ..common.requests import MemoryFractionRequest
from ..common.verdict import Verdict
from .child_process import ChildFailure, ChildProcess
from .failures import CaseFailed, JudgeError, ask

# The longest a worker waits for its timing turn during a verdict (the most a child's queueing is
# credited per reply: `MAX_LOCK_CREDIT_S`)
MAX_TURN_WAIT_S = MAX_LOCK_CREDIT_S


class GpuTurns:
    """The worker's members that hold the GPU lock; `Worker` sets the state they read."""

    device: str
    options: WorkerOptions
    # This worker holds the GPU exclusively: its children then take no lock themselves.
    exclusive_held: bool
    # During a verdict's cascade: raises the candidate's failure if its processes hold the GPU lock.
    lock_guard: Callable[[str], None] | None

    @property
    def share_gpu(self) -> bool:
        """Whether a request's children take the GPU lock shared around their GPU work: not while
        this worker holds it exclusively, and never when it is its GPU's only worker (the pool
        says how many share it: `gpu_workers`). Alone on its GPU, its children then take no lock,
        step aside at no launch and sync before no compile; its timing turns still take the lock
        exclusively (uncontended: one flock per task), so another run's checks on the same GPU
        still wait for them."""
        return self.options.gpu_workers > 1 and not self.exclusive_held

    @contextlib.contextmanager
    def exclusive(self, task_name: str) -> Iterator[tuple[float, float]]:
        """Hold this GPU exclusively for the block (a no-op when already held); yields (seconds
        spent waiting for it, of which at the turnstile draining readers in flight). A long drain
        is traced with the processes it waits for (KERNELWRIGHT_TRACE=1). During a verdict the wait
        raises the candidate's `gpu_lock_held` failure when the candidate's processes hold the lock
        (`lockguard`), and a `JudgeError` after `MAX_TURN_WAIT_S`: a hold nobody can be named for
        (a descriptor inherited from a locker that is gone) ends in a verdict, not a hang."""
        if self.exclusive_held:
            yield 0.0, 0.0
            return
        mark = time.monotonic()

        def long_drain(holders: list[str]) -> None:
            trace(task_name, f"taking the GPU alone: draining for {DRAIN_REPORT_S:g} s so far, behind "
                  + ("; ".join(holders) if holders else "no holder found in /proc/locks"))

        check = self._turn_wait_check(mark)
        with device_lock(self.device, exclusive=True, on_long_drain=long_drain if TRACE else None,
                         check=check) as drained:
            self.exclusive_held = True
            try:
                yield time.monotonic() - mark, drained
            finally:
                self.exclusive_held = False

    def _turn_wait_check(self, since: float):
        """What a wait for the timing turn runs every second during a verdict (None outside one)."""
        guard = self.lock_guard
        if guard is None:
            return None

        def check() -> None:
            guard("while its worker waited for the GPU alone")
            if time.monotonic() - since > MAX_TURN_WAIT_S:
                raise JudgeError(f"waited more than {MAX_TURN_WAIT_S:g} s for the GPU alone, behind "
                                 f"pid(s) {sorted(lockholders.gpu_lock_holders() or {})} holding its lock")
        return check

    @contextlib.contextmanager
    def timing_turn(self, verdict: Verdict) -> Iterator[None]:
        """`exclusive`, with the wait added to the verdict's `wait_exclusive` and the time held to
        `performance`."""
        with self.exclusive(verdict.task) as (waited, drained):
            got = time.monotonic()
            seconds = verdict.stage_seconds
            seconds["wait_exclusive"] = round(seconds.get("wait_exclusive", 0.0) + waited, 3)
            # the part of it spent with the turnstile closed (other workers' new checks queued)
            seconds["wait_exclusive_drain"] = round(seconds.get("wait_exclusive_drain", 0.0) + drained, 3)
            try:
                yield
            finally:
                seconds["performance"] = round(seconds.get("performance", 0.0) + time.monotonic() - got, 3)
                trace(verdict.task, f"timing turn: waited {waited:.2f} s ({drained:.2f} s draining others' "
                                    f"checks), held the GPU {time.monotonic() - got:.2f} s")

    def candidate_memory_cap(self, cand: ChildProcess, fraction: float, opts: JudgeOptions, stage: str) -> None:
        """Set the candidate's GPU memory cap (1.0: the whole GPU). The cap keeps a runaway candidate from
        starving the other workers' processes; while this worker has the GPU alone it only failed
        legitimate large shapes (two 8 GiB tensors of fast_rope_embedding, cloned per block). On
        the CPU the child only acknowledges it."""
        ask(cand, MemoryFractionRequest(fraction=fraction), opts.perf_timeout, "setting the candidate's memory cap",
            stage)

    @contextlib.contextmanager
    def alone_with(self, cand: ChildProcess, opts: JudgeOptions) -> Iterator[None]:
        """The candidate's memory cap lifted for the block (the caller holds the GPU exclusively)."""
        self.candidate_memory_cap(cand, 1.0, opts, "performance")
        try:
            yield
        finally:
            try:
                self.candidate_memory_cap(cand, self._memory_fraction, opts, "performance")
            except (CaseFailed, JudgeError, ChildFailure):
                pass  # the candidate is finished with either way; its verdict already says why

    @property
    def _memory_fraction(self) -> float:
        """The share of GPU memory a candidate process may take while the GPU is shared."""
        return self.options.memory_fraction
