"""Live progress of an agent run: attempts done of the planned total, the best verified kernel so
far, tokens and cost. Fed by the session's events (from many threads)."""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class AgentProgress:
    def __init__(self, total: int, quiet: bool = False) -> None:
        self.quiet = quiet
        self._lock = threading.Lock()
        self.tokens, self.cost, self.calls = 0, 0.0, 0
        self.best: dict[str, float | None] = {}
        self.passed: set[str] = set()
        self.done = 0
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"), console=Console(stderr=True), disable=quiet, transient=False)
        self._bar = self._progress.add_task("attempts", total=total, status="starting the judge")

    def __enter__(self) -> "AgentProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        with self._lock:
            if kind == "call":
                reply = data["reply"]
                self.calls += 1
                self.tokens += reply.tokens
                self.cost += reply.cost_usd
                status = f"iteration {data.get('index', '')} asking the model"
            elif kind == "judging":
                status = f"{data['task']} run {data['run']}: judging attempt {data['index']}"
            elif kind == "attempt":
                a = data["attempt"]
                self.done += a.mode != "given"
                if a.passed:
                    self.passed.add(a.task)
                    old = self.best.get(a.task)
                    if a.speedup is not None and (old is None or a.speedup > old):
                        self.best[a.task] = a.speedup
                    self.best.setdefault(a.task, None)
                status = f"{a.task} run {a.run} attempt {a.index} ({a.mode}): {a.kind}"
            elif kind == "ended":
                status = f"{data['task']} run {data['run']} ended: {data['reason']}"
            else:
                status = f"{kind}: {data}"
            self._progress.update(self._bar, completed=self.done, status=self._status(status))

    def _status(self, latest: str) -> str:
        speeds = [s for s in self.best.values() if s is not None]
        best = f"best {max(speeds):.3f}x" if speeds else ("passed" if self.passed else "no verified kernel yet")
        return f"{best} · {self.tokens} tokens · ${self.cost:.4f} · {latest[:80]}"
