"""--search evolve's epochs are per task: a task's islands wait for each other at each epoch
boundary (what migrates is then a function of the store), but a slow task holds back only its
own runs, and the session's concurrency still bounds the task-runs at work (agent/session.py)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

from kernelwright.agent.session import AgentSession


class StubRun:
    def __init__(self, log, lock, busy, task, run, delay):
        self.log, self.lock, self.busy, self.task, self.run, self.delay = log, lock, busy, task, run, delay

    def execute(self, until=None):
        with self.lock:
            self.busy.append(1)
            peak = len(self.busy)
        time.sleep(self.delay)
        with self.lock:
            self.busy.pop()
            self.log.append((self.task, self.run, until, time.monotonic(), peak))


def session(delays: dict[str, float], runs: int, iterations: int, every: int, concurrency: int):
    tasks = [SimpleNamespace(name=name) for name in delays]
    settings = SimpleNamespace(search="evolve", runs=runs, iterations=iterations, migrate_every=every)
    ctx = SimpleNamespace(settings=settings, outage=SimpleNamespace(reason=None), on_event=lambda *a: None)
    store = SimpleNamespace(ended=lambda: set())
    s = AgentSession(store, tasks, ctx, concurrency=concurrency)
    log, lock, busy = [], threading.Lock(), []
    s._task_run = lambda task, run: StubRun(log, lock, busy, task.name, run, delays[task.name])
    return s, log


def test_a_slow_task_holds_back_only_its_own_islands():
    s, log = session({"slow": 0.6, "fast": 0.02}, runs=2, iterations=6, every=2, concurrency=4)
    s._epochs()
    fast_done = max(t for task, _r, _u, t, _p in log if task == "fast")
    slow_first = min(t for task, _r, _u, t, _p in log if task == "slow")
    assert fast_done < slow_first  # every epoch of the fast task ended before the slow one's first
    # each task's islands ran each epoch, boundaries in order: until = 2, 4, then the rest (None)
    for task in ("slow", "fast"):
        untils = [u for name, _r, u, _t, _p in log if name == task]
        assert untils == [2, 2, 4, 4, None, None]


def test_an_island_starts_epoch_e_only_when_its_tasks_islands_ended_epoch_e_minus_1():
    s, log = session({"a": 0.05}, runs=3, iterations=4, every=2, concurrency=8)
    s._epochs()
    first = [t for _n, _r, u, t, _p in log if u == 2]
    second = [t for _n, _r, u, t, _p in log if u is None]
    assert len(first) == len(second) == 3
    assert min(second) - 0.05 >= max(first) - 1e-3  # the second epoch started after the first ended


def test_the_concurrency_bounds_the_task_runs_at_work():
    s, log = session({f"t{i}": 0.05 for i in range(5)}, runs=2, iterations=2, every=1, concurrency=3)
    s._epochs()
    assert len(log) == 5 * 2 * 2
    assert max(p for *_x, p in log) <= 3


def test_a_tasks_bug_is_reported_and_the_other_tasks_go_on():
    s, log = session({"bad": 0.01, "good": 0.01}, runs=1, iterations=2, every=1, concurrency=2)
    make = s._task_run

    def task_run(task, run):
        if task.name == "bad":
            raise RuntimeError("no brief")
        return make(task, run)

    s._task_run = task_run
    s._epochs()
    assert [u for name, *_x in log for u in [_x[1]] if name == "good"] == [1, None]
    assert len(s.errors) == 1 and "bad" in s.errors[0] and "no brief" in s.errors[0]


def test_once_stopped_an_island_waiting_for_a_slot_does_not_start():
    s, log = session({"a": 0.2}, runs=3, iterations=2, every=2, concurrency=1)
    threading.Timer(0.1, s.stop).start()  # (Ctrl-C: AgentSession.stop) while run 0 holds the one slot
    s._epochs()
    assert len(log) == 1
