"""Budgets: cost (USD), tokens and wall time, for the whole run and for each task.

Spending is read from the run store (what was really paid: cache hits are free), so a resumed
run counts what the killed one spent. Time counts from the start of this invocation. A budget
is checked before every LLM call: when one is spent, no new call starts and the task-run ends
with its best verified kernel.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..store import RunStore


@dataclass(frozen=True)
class Limits:
    max_cost: float | None = None      # USD
    max_tokens: int | None = None
    time_limit: float | None = None    # seconds

    def __post_init__(self) -> None:
        for name in ("max_cost", "max_tokens", "time_limit"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"--{name.replace('_', '-')} must be positive, got {value}")


class Budget:
    def __init__(self, store: RunStore, run_limits: Limits = Limits(), task_limits: Limits = Limits()) -> None:
        self.store = store
        self.run_limits = run_limits
        self.task_limits = task_limits
        self.started = time.monotonic()
        self._task_started: dict[str, float] = {}

    def start_task(self, task: str) -> None:
        self._task_started.setdefault(task, time.monotonic())

    def exhausted(self, task: str) -> str | None:
        """Why no new LLM call may start for `task`, or None."""
        now = time.monotonic()
        for scope, limits, (cost, tokens), since in (
                ("run", self.run_limits, self.store.spend(), self.started),
                (f"task {task}", self.task_limits, self.store.spend(task), self._task_started.get(task, now))):
            if limits.max_cost is not None and cost >= limits.max_cost:
                return f"the {scope}'s cost budget is spent (${cost:.4f} of ${limits.max_cost:g})"
            if limits.max_tokens is not None and tokens >= limits.max_tokens:
                return f"the {scope}'s token budget is spent ({tokens} of {limits.max_tokens})"
            if limits.time_limit is not None and now - since >= limits.time_limit:
                return f"the {scope}'s time limit is reached ({now - since:.0f} s of {limits.time_limit:g} s)"
        return None

    def seconds_left(self, task: str) -> float | None:
        """Wall time left under the run's and the task's time limits (None: no limit)."""
        now = time.monotonic()
        left = [limit - (now - since) for limit, since in (
            (self.run_limits.time_limit, self.started),
            (self.task_limits.time_limit, self._task_started.get(task, now))) if limit is not None]
        return max(0.0, min(left)) if left else None
