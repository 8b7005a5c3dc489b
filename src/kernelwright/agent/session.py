"""A session: every task × run of one agent invocation, run concurrently against one judge pool
and one LLM client, with the run directory as its memory.

Task-runs run on a bounded thread pool: while one waits for the model, another's candidate is
judged, so neither the GPUs nor the provider idle (the LLM layer bounds requests per provider,
the judge pool bounds candidates per worker). A task-run that hits a bug is reported and left
open, so `--resume` tries it again; it never takes the others down.
"""

from __future__ import annotations

import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..store import RunStore
from ..tasks import Task
from .brief import brief_for
from .loop import RunContext, TaskRun
from .results import TaskResult, write_outputs

if TYPE_CHECKING:
    from ..llm.cache import CachedResponse, ResponseCache
    from .retrieval import Example


class RunCache:
    """The LLM response cache of an agent run: the run directory's own cache, which makes a
    resumed run free, read before the user's global cache (when that is on), which replays
    identical requests of earlier runs (same prompt, seed and sample)."""

    def __init__(self, run_cache: ResponseCache, shared: ResponseCache | None = None) -> None:
        self.run_cache, self.shared = run_cache, shared

    def get(self, key: str) -> CachedResponse | None:
        hit = self.run_cache.get(key)
        if hit is None and self.shared is not None:
            hit = self.shared.get(key)
        return hit

    def put(self, key: str, model_id: str, request: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        self.run_cache.put(key, model_id, request, response)
        if self.shared is not None:
            self.shared.put(key, model_id, request, response)

    def __len__(self) -> int:
        return len(self.run_cache)

    def close(self) -> None:
        self.run_cache.close()
        if self.shared is not None:
            self.shared.close()


def golden_sources(task: Task) -> list[str]:
    """The task's own solutions, which a 1-shot example must never be (nor a near-copy of)."""
    from .brief import golden_file

    paths = [p for p in (task.triton_reference, task.reference_impl, golden_file(task)) if p]
    out = []
    for p in paths:
        try:
            out.append(Path(p).read_text(errors="replace"))
        except OSError:
            pass
    return out


def make_retrieve(corpus_paths: Sequence[Path] = ()) -> Callable[[str, Task], Example | None]:
    """(query, task) -> the 1-shot example (`Retriever.best_for`: code similarity for a Triton-code
    query, the operators of a PyTorch one), never the task's own solution."""
    from .retrieval import Retriever, load_corpus

    retriever = Retriever(load_corpus(list(corpus_paths)))
    excluded: dict[str, list[str]] = {}
    lock = threading.Lock()

    def retrieve(query: str, task: Task) -> Example | None:
        with lock:
            if task.ref not in excluded:
                excluded[task.ref] = golden_sources(task)
            return retriever.best_for(query, task.instruction, exclude=excluded[task.ref])

    return retrieve


class AgentSession:
    def __init__(self, store: RunStore, tasks: Sequence[Task], ctx: RunContext,
                 start_codes: dict[str, str] | None = None, concurrency: int = 4) -> None:
        self.store, self.tasks, self.ctx = store, list(tasks), ctx
        self.start_codes = start_codes or {}
        self.concurrency = max(1, concurrency)
        self.errors: list[str] = []
        self._briefs: dict[str, Any] = {}
        self._stop = threading.Event()
        ctx.stopping = self._stop.is_set

    def stop(self) -> None:
        """No new LLM call or candidate starts; task-runs in flight end as "interrupted"."""
        self._stop.set()

    def pending(self) -> list[tuple[Task, int]]:
        ended = self.store.ended()
        return [(t, r) for t in self.tasks for r in range(self.ctx.settings.runs) if (t.name, r) not in ended]

    def judge_given(self) -> None:
        """optimize: the user's kernel judged in every pending task-run that has not judged it,
        before anything is asked of the model (so a failing one costs no request, not even the
        ping), on the judge pool the run goes on with."""
        todo = [(t, r) for t, r in self.pending() if t.name in self.start_codes]
        self._each(todo, lambda run: run.judge_given())

    def needs_model(self) -> bool:
        """Whether any pending task-run will call the model next (the caller pings it then)."""
        return any(self._task_run(t, r).needs_model() for t, r in self.pending())

    def run(self) -> list[TaskResult]:
        if self.ctx.settings.search == "evolve":
            self._epochs()
        else:
            self._each(self.pending(), lambda run: run.execute())
        return write_outputs(self.store, [t.name for t in self.tasks], self.ctx.settings.runs, self.ctx.settings.search)

    def _epochs(self) -> None:
        """--search evolve: each task's pending runs (its islands) run one epoch (migrate_every
        iterations) together, then its next epoch starts, so an island that starts epoch e sees
        its task's other islands' epochs < e complete: what migrates is a function of the store,
        never of timing, and a resumed run (which replays the epochs from the first: finished
        ones return at once) asks the same. The barrier is per task (an archive is a task's), so
        a slow task holds back only its own runs; `concurrency` still bounds the task-runs at work."""
        settings = self.ctx.settings
        epochs = -(-settings.iterations // settings.migrate_every)
        slots = threading.BoundedSemaphore(self.concurrency)

        def task_epochs(task: Task, runs: list[int]) -> None:
            try:
                for epoch in range(epochs):
                    if self._stop.is_set() or self.ctx.outage.reason is not None:
                        return
                    until = None if epoch == epochs - 1 else (epoch + 1) * settings.migrate_every
                    ended = self.store.ended()
                    todo = [(task, r) for r in runs if (task.name, r) not in ended]
                    self._each(todo, lambda run: self._holding(slots, lambda: run.execute(until=until)),
                               bound=len(todo))
            except Exception as exc:  # noqa: BLE001 - one task's bug must not stop the other tasks
                if not self._stop.is_set():
                    self.errors.append(f"{task.name}: {exc!r}\n{traceback.format_exc(limit=6)}")
                    self.ctx.on_event("error", {"task": task.name, "error": repr(exc)})

        by_task: dict[str, tuple[Task, list[int]]] = {}
        for task, run in self.pending():
            by_task.setdefault(task.name, (task, []))[1].append(run)
        # at most `concurrency` tasks at once (each holds a thread while its islands work or wait)
        self._spread([partial(task_epochs, t, runs) for t, runs in by_task.values()], self.concurrency)

    def _holding(self, slots: threading.BoundedSemaphore, work: Callable[[], Any]) -> Any:
        """`work()` while holding one of `slots` (the session's task-runs at work); nothing once
        the session is stopping (Ctrl-C: an island that was waiting for a slot does not start)."""
        with slots:
            if self._stop.is_set():
                return None
            return work()

    def _task_run(self, task: Task, run: int) -> TaskRun:
        if task.name not in self._briefs:
            self._briefs[task.name] = brief_for(task)
        return TaskRun(task, self._briefs[task.name], run, self.ctx, self.start_codes.get(task.name))

    def _each(self, todo: list[tuple[Task, int]], work: Callable[[TaskRun], Any], bound: int | None = None) -> None:
        """`work` on each task-run of `todo`, concurrently (at most `bound`, default the session's
        concurrency); a task-run's bug is reported (errors), never the others' end."""
        def one(task: Task, run: int, task_run: TaskRun) -> None:
            try:
                work(task_run)
            except Exception as exc:  # noqa: BLE001 - one task-run's bug must not stop the others
                if self._stop.is_set():
                    return
                self.errors.append(f"{task.name} run {run}: {exc!r}\n{traceback.format_exc(limit=6)}")
                self.ctx.on_event("error", {"task": task.name, "run": run, "error": repr(exc)})

        runs = [(t, r, self._task_run(t, r)) for t, r in todo]  # briefs: here, once
        self._spread([partial(one, t, r, tr) for t, r, tr in runs], bound or self.concurrency)

    def _spread(self, jobs: list[Callable[[], None]], bound: int | None = None) -> None:
        """Each of `jobs` on a thread (at most `bound` at once; default: all), waited for."""
        pool = ThreadPoolExecutor(max_workers=max(1, min(bound or len(jobs), len(jobs))),
                                  thread_name_prefix="task-run")
        futures = [pool.submit(job) for job in jobs]
        try:
            for f in futures:
                f.result()
        except BaseException:
            # Ctrl-C: stop starting work and return at once; the caller closes the judge pool,
            # which ends the candidates in flight without verdicts (so a resume judges them)
            self._stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)

