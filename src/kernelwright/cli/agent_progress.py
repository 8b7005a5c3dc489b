"""Live progress of an agent run (generate, optimize, bench): attempts done of the planned total,
the elapsed time, tasks finished and how many of them have a verified kernel, the best speedups,
tokens and cost, the estimated time and cost to finish, and the latest event. Fed by the
session's events, from many threads. On a narrow terminal the line keeps the count, the elapsed
time and the best result, and leaves out the rest in reverse order of importance (`progress_line`).

On a terminal it is a live line; elsewhere (a pipe, CI, --json) a line per event on stderr, so a
long run (a kernel timed under the interpreter for minutes) never looks hung."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Mapping

from rich.console import Console

from ..agent.memory import Mode
from .progress_line import Field, ProgressLine
from .usage import plural

if TYPE_CHECKING:
    from ..llm.retry import RetryNotice

# Off a terminal, with no event for this long, a line repeats the latest one ("still ...") so that
# a kernel judged for minutes under the interpreter, or a long timing turn, never looks hung.
HEARTBEAT_S = 60.0


def clock(seconds: float) -> str:
    """Elapsed time as rich's TimeElapsedColumn shows it: H:MM:SS."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _answered(reply: Any) -> str:
    """What came of a call: answered (by the model, or by the cache with nothing sent), or failed."""
    if getattr(reply, "error", ""):
        failure = getattr(reply, "failure", "") or "error"
        return "the model's answer was unreadable" if failure == "unreadable" else f"the model failed: {failure}"
    return "answered from the cache (nothing sent)" if getattr(reply, "cache_hit", False) else "the model answered"


class AgentProgress:
    def __init__(self, tasks: int, runs: int, iterations: int, quiet: bool = False,
                 console: Console | None = None, done: int = 0) -> None:
        """`done`: the iterations a resumed run has stored already (counted, not timed)."""
        self.tasks, self.runs = tasks, runs
        self.total = tasks * runs * iterations
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self.tokens, self.cost, self.calls, self.done = 0, 0.0, 0, done
        self._done_before = done
        self.best: dict[str, float | None] = {}        # task -> best verified speedup (None: untimed)
        self.ended: dict[str, int] = {}                # task -> task-runs ended
        self.latest = "starting the judge"
        self._asking: dict[tuple[str, str], str] = {}  # (task, run) -> the role of the call being made
        console = console or Console(stderr=True)
        # a live line only on a terminal: in a pipe or CI its last frame would stay behind, cut short
        self.line = ProgressLine(console, self.fields, enabled=not quiet and console.is_terminal)
        self._lines = console if quiet or not console.is_terminal else None
        self._printed = time.monotonic()  # when the last off-terminal line was printed
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> "AgentProgress":
        self.line.__enter__()
        if self._lines is not None:
            self._lines.print(f"[0:00] starting the judge; {plural(self.total, 'iteration')} planned", highlight=False)
            self._printed = time.monotonic()
            self._beat = threading.Thread(target=self._heartbeat, name="kw-progress-heartbeat", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=1.0)
        self.line.__exit__(*exc)

    def _print_line(self, text: str) -> None:
        """One off-terminal line, with the elapsed time (the caller holds the lock)."""
        assert self._lines is not None
        elapsed = int(time.monotonic() - self._started)
        self._lines.print(f"[{elapsed // 60}:{elapsed % 60:02d}] {text}", markup=False, highlight=False, soft_wrap=True)
        self._printed = time.monotonic()

    def _heartbeat(self) -> None:
        """Off a terminal: after HEARTBEAT_S without a line, say what is still going on."""
        while not self._stop.wait(min(HEARTBEAT_S, 5.0)):
            with self._lock:
                quiet_s = time.monotonic() - self._printed
                if quiet_s >= HEARTBEAT_S:
                    self._print_line(f"still working, {int(quiet_s)} s since the last event: {self.latest}")

    def event(self, kind: str, data: dict[str, Any]) -> None:
        with self._lock:
            latest = self._apply(kind, data)
            if latest is None:
                return
            self.latest = latest
            if self._lines is not None:
                self._print_line(latest)
        self.line.refresh()

    def retrying(self, tags: Mapping[str, str], notice: RetryNotice) -> None:
        """The LLM client's hook: a call failed and waits to be sent again (minutes, at worst)."""
        self.event("retrying", {"task": tags.get("task", ""), "run": tags.get("run", ""), "notice": notice})

    def sending(self, tags: Mapping[str, str]) -> None:
        """The LLM client's hook: a call the cache does not answer is sent (a replay is not waited for)."""
        self.event("sending", {"task": tags.get("task", ""), "run": tags.get("run", "")})

    def _apply(self, kind: str, data: dict[str, Any]) -> str | None:
        """The event's line, or None for one that shows nothing by itself."""
        where = f"{data.get('task', '')} run {data.get('run', '')}"
        if kind == "asking":  # said once the call is sent: the cache may answer it at once
            self._asking[(str(data["task"]), str(data["run"]))] = data["role"]
            return None
        if kind == "sending":
            role = self._asking.get((str(data["task"]), str(data["run"])))
            return f"{where}: waiting for the model" + (f" ({role})" if role else "")
        if kind == "retrying":
            return f"{where}: waiting for the model ({data['notice'].describe()})"
        if kind == "model_unavailable":
            return f"{where}: the model is unavailable, stopping"
        if kind == "call":
            reply = data["reply"]
            self.calls += 1
            self.tokens += reply.tokens
            self.cost += reply.cost_usd
            return f"{where}: {_answered(reply)} ({reply.role})"
        if kind == "attempt":
            a = data["attempt"]
            self.done += Mode(a.mode).by_llm  # an iteration: not the given kernel, not a tuned variant
            if a.passed:
                old = self.best.get(a.task)
                self.best[a.task] = a.speedup if old is None or (a.speedup or 0) > old else old
            speed = f", {a.speedup:.3f}x" if a.passed and a.speedup is not None else ""
            return f"{a.task} run {a.run} attempt {a.index} ({a.mode}): {a.kind}{speed}"
        if kind == "ended":
            self.ended[data["task"]] = self.ended.get(data["task"], 0) + 1
            # a run that ends early (correct without the optimizer, a budget) leaves iterations unplanned
            return f"{where} ended: {data['reason']}"
        if kind == "judging":
            return f"{where}: judging attempt {data['index']}"
        return f"{data.get('task', '')} {kind}"

    def fields(self) -> list[Field]:
        """The line's fields, in display order; priority 1 is the last to go on a narrow terminal:
        the count, the elapsed time, the best result, then the tasks, the bar, the tokens and
        cost, the estimate and the latest event."""
        with self._lock:
            elapsed = time.monotonic() - self._started
            finished = [t for t, n in self.ended.items() if n >= self.runs]
            solved = sum(1 for t in finished if t in self.best)
            speeds = sorted((s for s in self.best.values() if s is not None), reverse=True)[:3]
            state = ("best " + ", ".join(f"{s:.2f}x" for s in speeds) if speeds
                     else "verified, untimed" if self.best else "no verified kernel yet")
            fields = [Field("attempts", 6, style="bold"), Field.bar(self.done, self.total, 5),
                      Field(f"{self.done}/{self.total}", 1, " ", style="progress.download"),
                      Field(clock(elapsed), 2, " ", style="progress.elapsed")]
            if self.tasks > 1:
                fields.append(Field(f"tasks {len(finished)}/{self.tasks} ({solved} verified)", 4))
            fields += [Field(state, 3, style="green" if self.best else ""),
                       Field(f"{self.tokens} tok ${self.cost:.3f}", 7)]
            timed = self.done - self._done_before  # this invocation's iterations: its time and cost
            if timed > 0:
                left = max(0, self.total - self.done)
                fields.append(Field(f"~{elapsed / timed * left / 60:.0f} min, "
                                    f"~${self.cost / timed * left:.2f} to go", 8))
            fields.append(Field(self.latest, 9, style="dim", width=(15, 70)))
            return fields
