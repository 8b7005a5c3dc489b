"""Tell the worker when a child compiles, so a hang is caught fast and a slow compile is not.

A child (candidate or reference) runs its requests under the worker's clock. Compiling a Triton
kernel can take minutes (some ROCm references do, as do autotuners of hundreds of configs), while
a host loop that never ends or a kernel that never terminates should be caught in seconds. The
worker cannot see inside the child, so the child says when it compiles: a `compile` notice
"start" when it enters Triton's compiler (or a kernel's launcher build, or a batch of autotuner
configs compiled ahead, `precompile.py`), "end" when it leaves it, and a `tune` notice before an
autotuner benchmarks each config. The worker bounds compiling by its own generous limit and
running by a short one (`ChildProcess.recv`, `JudgeOptions.compile_timeout` & co.).

Only the main thread sends (it is the only one writing replies to the pipe, so notices never
interleave with a reply's frame); compiles on other threads are covered by a main-thread span
(precompile's pool runs inside one), or else count as running. Under the CPU interpreter nothing
compiles: everything is running.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, ContextManager, Iterator


class CompileWatch:
    """Counts this process's compile spans (nested ones count once) and tells `tell` each
    "start"/"end" and each autotuner config about to be benchmarked; `seconds` is the time spent
    compiling so far (on the main thread)."""

    def __init__(self, tell: Callable[[dict], None], clock: Callable[[], float] = time.monotonic) -> None:
        self._tell = tell
        self._clock = clock
        self._depth = 0
        self._since = 0.0
        self.seconds = 0.0

    def _send(self, msg: dict) -> None:
        try:
            self._tell(msg)
        except Exception:  # noqa: BLE001 - a closed pipe: the worker has given up on us already
            pass

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._depth += 1
        if self._depth == 1:
            self._since = self._clock()
            self._send({"op": "compile", "state": "start"})
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                self.seconds += self._clock() - self._since
                self._send({"op": "compile", "state": "end"})

    def tuning_config(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._send({"op": "tune"})

def both(*makers: Callable[[], ContextManager[Any]]) -> Callable[[], ContextManager[Any]]:
    """A context-manager factory entering each of `makers`' context managers in order."""
    @contextlib.contextmanager
    def entered() -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for make in makers:
                stack.enter_context(make())
            yield
    return entered
