"""What each stage may use of its worker, as structural types: the stages are handed the `Worker`
(process.py), and these say which few of its members each one reads, so a stage can be read (and
driven by a test double) without the rest of the worker: its spares, its references, its
caches, the verdict's beginning and end.

- `CheckingWorker`: the call, correctness and perf-size checks (`correctness`): how the
  worker's children share the GPU, the candidate's memory cap, and holding the GPU alone to
  check again what ran out of memory next to other workers.
- `TimingWorker`: the performance stage (`performance`), which also runs perf-size checks: its
  timing turn, and the candidate's processes (paused while the reference is timed, their CPU use
  measured between calls).
- `GuardedWorker`: `lockguard`, which fails a candidate whose processes hold the GPU lock.

Nothing inherits from them; `tests/unit/test_judge_seams.py` checks that `Worker` fits each one
(with mypy, and member by member at run time).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..common.options import JudgeOptions
    from ..common.verdict import Verdict
    from .child_process import ChildProcess


class CheckingWorker(Protocol):
    device: str  # "cuda" or "cpu" (the interpreter: some dtypes are skipped there)
    reply_limit: int  # the largest reply of its reference (a candidate's follows it, per item)
    exclusive_held: bool  # it holds the GPU alone now (a timing turn, or a task judged again alone)

    @property
    def share_gpu(self) -> bool:
        """Whether a request's children take the GPU lock shared around their GPU work."""
        ...

    def candidate_memory_cap(self, cand: ChildProcess, fraction: float, opts: JudgeOptions, stage: str) -> None:
        ...

    def exclusive(self, task_name: str) -> AbstractContextManager[tuple[float, float]]:
        """The GPU held alone for the block; yields (seconds waited, of which draining readers)."""
        ...

    def alone_with(self, cand: ChildProcess, opts: JudgeOptions) -> AbstractContextManager[None]:
        """The candidate's memory cap lifted for the block (the GPU is held alone)."""
        ...


class TimingWorker(CheckingWorker, Protocol):
    info: dict[str, Any]  # the device's description (name, l2_bytes: the roofline, the L2 flush)

    def timing_turn(self, verdict: Verdict) -> AbstractContextManager[None]:
        """`exclusive`, its wait and hold counted in the verdict's stage seconds."""
        ...

    def candidate_tree(self, cand: ChildProcess) -> list[int]:
        """The candidate's process and every process it started, wherever they went."""
        ...

    def pause_candidate(self, cand: ChildProcess) -> list[int]:
        """SIGSTOP all of the candidate's tree; returns what to resume besides its group."""
        ...

    def resume_candidate(self, cand: ChildProcess, others: list[int]) -> None:
        ...


class GuardedWorker(Protocol):
    exclusive_held: bool

    def own_children(self) -> set[int]:
        """Its reference processes and spares: never the candidate's."""
        ...

    def kill_candidate(self, cand: ChildProcess) -> None:
        ...
