"""How busy the judge was during a run: a wrapper around the judge that integrates, over time,
how many candidates were being judged (capped at the pool's workers). It answers "did the GPUs
idle while the model was thinking?" without touching the judge."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING

from .protocols import Judge

if TYPE_CHECKING:
    from ..judge import Verdict
    from ..tasks import Task


class JudgeMeter:
    """A `Judge` itself: submit passes through to the judge it wraps."""

    def __init__(self, judge: Judge, slots: int) -> None:
        self.judge = judge
        self.slots = max(1, slots)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last = self._start = time.monotonic()
        self.busy_slot_s = 0.0      # integral of min(in flight, slots) dt
        self.idle_s = 0.0           # time with nothing to judge at all
        self.submitted = 0

    def _advance(self, delta: int) -> None:
        with self._lock:
            now = time.monotonic()
            dt = now - self._last
            self.busy_slot_s += min(self._in_flight, self.slots) * dt
            if self._in_flight == 0:
                self.idle_s += dt
            self._last = now
            self._in_flight += delta

    def submit(self, task: Task, code: str, candidate_id: str | None = None) -> Future[Verdict]:
        self._advance(+1)
        self.submitted += 1
        future = self.judge.submit(task, code, candidate_id)
        future.add_done_callback(lambda _f: self._advance(-1))
        return future

    def report(self) -> dict:
        self._advance(0)
        wall = max(1e-9, self._last - self._start)
        out: dict = {"wall_s": round(wall, 3), "workers": self.slots, "candidates": self.submitted,
                     "utilization": round(self.busy_slot_s / (self.slots * wall), 4),
                     "idle_fraction": round(self.idle_s / wall, 4)}
        health = getattr(self.judge, "health", None)  # a JudgePool's GPUs (a test's judge may have none)
        if health is not None and health.retired:
            out["out_of_service"] = health.report()  # the GPUs taken out of the run, and why
        if health is not None and health.warnings:
            out["suspect_gpus"] = list(health.warnings)  # the last GPU failed a check and was kept
        return out
