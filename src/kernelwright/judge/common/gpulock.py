"""The per-GPU reader-writer lock that keeps timing alone on its GPU.

Every judge process of this user on the machine (every worker, every child, every kernelwright
run) uses the same two lock files per GPU, in the judge's private directory (`privdir`; another
user's runs have their own and do not coordinate with ours):
- checking correctness holds it *shared*: children take it themselves around their own GPU work
  (`SharedHold`) and let go of it while Triton compiles a kernel and builds its launcher, which is
  CPU-only and most of a check;
- timing holds it *exclusive*: the worker takes it (`device_lock`) for one turn per task, and its
  children then run without taking anything.

Holding the lock in the worker for a whole check (the first design) made a waiting writer idle
every other worker behind the longest check in flight, compilation included: on the H200 the GPU
was held exclusively only 12-29% of a suite run and the rest was mostly convoy.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
from typing import Callable

from .knobs import env_numbers
from .lockholders import lock_holders
from .privdir import lock_base


def _writer_patience() -> float:
    return env_numbers("KERNELWRIGHT_WRITER_PATIENCE_S", (0.5,), 0.0, 600.0, meaning=" seconds")[0]


# How long a timing turn waits for a moment with no check in flight before it closes the turnstile.
# 5 s while a check held the GPU for a whole test function (closing at once idled every worker
# behind it); with checks looking at every launch, and nudged between launches, a drain costs a
# kernel's worth, and of the TritonBench turns that found such a moment, most found it within 2 s
# (38 of 93 waited the whole 5 s, with no turn on the GPU meanwhile). 2 s until the tenth
# session: with eight workers 79 of 137 turns still waited it out and drained anyway, the other 58
# finding their moment spread evenly over the 2 s. At 0.5 s TritonBench-revised ran in 551 s (all
# 184 tasks; 177 in 580 s at 2 s), turns waited 153 s in all instead of 356, and drains took 88 s,
# not 136 (docs/benchmarks.md, tenth session). The variable is for measuring.
WRITER_PATIENCE_S = _writer_patience()
# How often a shared holder looks, at a kernel launch, for a timing turn waiting at the turnstile.
# Without it a turn waited for the longest check in flight to finish (a whole GEAK test function:
# seconds) while every other worker queued behind it: in a TritonBench-revised run on the H200 the
# turns and their drains, one after another, filled 481 s of 517 (255 s of it drains).
YIELD_CHECK_S = 0.02
MAX_LOCK_CREDIT_S = 900.0  # queueing for the GPU that a child may add to one timeout
# A check that runs Python for seconds without a Triton launch (torch operations in a test
# function's own loops, say) never looks at the turnstile by itself: in a TritonBench run on the
# H200 ten timing turns drained 9-21 s behind such checks, with every other worker queued. A watcher
# thread sees a timer waiting on a stretch longer than this and nudges the main thread with a
# signal, whose handler takes the look between two bytecodes. KERNELWRIGHT_NO_NUDGE=1 turns it off.
NUDGE_AFTER_S = 0.1
NUDGE_SIGNAL = signal.SIGRTMIN + 3 if hasattr(signal, "SIGRTMIN") else None


def ensure_lock_files() -> list[str]:
    """This GPU's two lock files, created if need be: a confined child may open them (the policy
    names them) but could not create them in the judge's private directory."""
    lock, turnstile = _open_lock_files()
    paths = [lock.name, turnstile.name]
    lock.close()
    turnstile.close()
    return paths


def _open_lock_files():
    """(lock, turnstile): this GPU's two lock files, opened for flock."""
    base = lock_base()
    return open(base + ".lock", "a"), open(base + ".turnstile", "a")


# A writer that drains the readers for longer than this says who they are (see `lock_holders`).
DRAIN_REPORT_S = 2.0


# How often a writer that waits for the GPU runs its `check` (a candidate of its own holding the
# lock between requests fails: `lockguard`).
CHECK_EVERY_S = 1.0


def _acquire(lock, turnstile, exclusive: bool,
             on_long_drain: Callable[[list[str]], None] | None = None,
             check: Callable[[], None] | None = None) -> float:
    """A writer first waits `WRITER_PATIENCE_S` for a moment with no reader, letting readers come
    and go: closing the door at once idled every other worker at every timing turn. After that it
    passes a turnstile lock that every taker passes and keeps holding it until it has the GPU, so
    new readers queue behind it (flock alone let checks starve timing for minutes). Returns the
    seconds spent at the turnstile (0 when the lock came free within the patience): for a writer,
    how long it drained the readers in flight, while new ones queued. A writer given `check` or
    `on_long_drain` polls the turnstile and the lock instead of blocking on them (so it can give
    up; one that blocks may win a race for the turnstile against it): it calls `check` every
    `CHECK_EVERY_S` (it may raise, to give up) and, once, after `DRAIN_REPORT_S` of draining,
    `on_long_drain` with the readers still holding the lock."""
    if exclusive:
        deadline = time.monotonic() + WRITER_PATIENCE_S
        while time.monotonic() < deadline:
            if _try_flock(lock, fcntl.LOCK_EX):
                return 0.0
            time.sleep(0.005)
    closed = time.monotonic()
    if not exclusive or (check is None and on_long_drain is None):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        return time.monotonic() - closed
    checked = closed

    def wait_a_little() -> None:
        nonlocal checked
        if check is not None and time.monotonic() - checked >= CHECK_EVERY_S:
            checked = time.monotonic()
            check()
        time.sleep(0.005)

    while not _try_flock(turnstile, fcntl.LOCK_EX):
        wait_a_little()
    try:
        drain_began, reported = time.monotonic(), False
        while not _try_flock(lock, fcntl.LOCK_EX):  # drain, and name the readers in flight if it takes long
            if on_long_drain is not None and not reported and time.monotonic() - drain_began >= DRAIN_REPORT_S:
                reported = True
                on_long_drain(lock_holders(lock))
            wait_a_little()
    finally:
        fcntl.flock(turnstile, fcntl.LOCK_UN)
    return time.monotonic() - closed


def _try_flock(file, how: int) -> bool:
    try:
        fcntl.flock(file, how | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _turnstile_taken(turnstile) -> bool:
    """Someone holds the turnstile: a timing turn draining the readers (or, for an instant,
    another reader passing it)."""
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    fcntl.flock(turnstile, fcntl.LOCK_UN)
    return False


def _try_shared(lock, turnstile) -> bool:
    """Take the lock shared if that needs no waiting (no writer queued or holding it)."""
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        fcntl.flock(turnstile, fcntl.LOCK_UN)


@contextlib.contextmanager
def device_lock(device: str, exclusive: bool, on_long_drain: Callable[[list[str]], None] | None = None,
                check: Callable[[], None] | None = None):
    """Hold this GPU's lock (shared or exclusive) for the block; a no-op on CPU. Yields the
    seconds spent at the turnstile (see `_acquire`). A writer whose drain lasts `DRAIN_REPORT_S`
    calls `on_long_drain` once with the readers still holding the lock (`lock_holders`); one that
    waits calls `check` every `CHECK_EVERY_S`, which may raise to give up waiting."""
    if device == "cpu":
        yield 0.0
        return
    lock, turnstile = _open_lock_files()
    with lock, turnstile:
        drained = _acquire(lock, turnstile, exclusive, on_long_drain, check)
        try:
            yield drained
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class SharedHold:
    """A child's shared hold on its GPU, taken around the GPU work of one request and dropped
    while Triton compiles (after a device synchronise, so none of this process's kernels are
    still running when a timing turn starts). Seconds spent waiting and compiling unlocked are
    counted for the verdict's profile."""

    def __init__(self, device: str, synchronize: Callable[[], None],
                 on_wait: Callable[[str], None] | None = None,
                 can_yield: Callable[[], bool] = lambda: True) -> None:
        self.enabled = device != "cpu"
        self._sync = synchronize
        self._on_wait = on_wait  # told "waiting" / "got" around a queued acquisition (timeouts exclude it)
        self._can_yield = can_yield  # False while a synchronise would break something (graph capture)
        self._files = None
        self.held = False
        self.wait_s = 0.0
        self.compile_s = 0.0
        self.yield_s = 0.0  # of wait_s: queued after stepping aside for a timing turn
        self._checked = 0.0
        # The longest stretch held with no look at the turnstile (from taking the lock or the
        # last look to the next look or the release): how long this process can keep a
        # waiting timing turn, and every check queued behind it, waiting. `doing` names the work.
        self.doing = ""
        self.longest_s = 0.0
        self.longest_doing = ""
        self._looked = 0.0
        self._looked_doing = ""
        self._busy = 0  # inside our own lock calls: a nudge must not re-enter them
        self._held_event: threading.Event | None = None  # set while held, when nudging
        self.nudges = 0

    def _open(self):
        if self._files is None:
            self._files = _open_lock_files()
        return self._files

    def acquire(self) -> None:
        if not self.enabled or self.held:
            return
        self._busy += 1
        try:
            lock, turnstile = self._open()
            if not _try_shared(lock, turnstile):
                mark = time.monotonic()
                self._tell("waiting")
                _acquire(lock, turnstile, exclusive=False)
                self.wait_s += time.monotonic() - mark
                self._tell("got")
            self.held = True
            self._looked, self._looked_doing = time.monotonic(), self.doing
            if self._held_event is not None:
                self._held_event.set()
        finally:
            self._busy -= 1

    def _look(self, now: float) -> None:
        stretch = now - self._looked
        if stretch > self.longest_s:
            began = self._looked_doing
            self.longest_s = stretch
            self.longest_doing = began if began == self.doing else f"from {began} to {self.doing}"
        self._looked, self._looked_doing = now, self.doing

    def _tell(self, state: str) -> None:
        if self._on_wait is not None:
            self._on_wait(state)

    def release(self) -> None:
        """Drop the hold once this process's queued GPU work has finished."""
        if not self.held:
            return
        self._busy += 1
        try:
            self._sync()
            self._look(time.monotonic())
        except BaseException:  # noqa: BLE001 - a GPU fault: the work that caused it reports it
            pass
        finally:
            if self._held_event is not None:
                self._held_event.clear()
            fcntl.flock(self._files[0], fcntl.LOCK_UN)
            self.held = False
            self._busy -= 1

    def yield_turn(self) -> None:
        """Between two long pieces of GPU work in one request (a probe's runs at perf size take
        seconds each): let a waiting timing turn in, then carry on."""
        if self.held:
            self.release()
            self.acquire()

    def writer_waiting(self) -> bool:
        """A timing turn holds the turnstile (or, rarely, another reader is passing it)."""
        return _turnstile_taken(self._open()[1])

    def yield_if_timer_waits(self) -> None:
        """Called at every kernel launch: at most every `YIELD_CHECK_S`, step aside for a timing
        turn that is draining the readers, then carry on (a kernel's worth of drain, not a check's)."""
        if not self.held or self._busy:
            return
        now = time.monotonic()
        if now - self._checked < YIELD_CHECK_S:
            return
        self._busy += 1
        try:
            self._checked = now
            self._look(now)
            waiting = self.writer_waiting()
        finally:
            self._busy -= 1
        if waiting and self._can_yield():
            self.yield_turn()
            self.yield_s += time.monotonic() - now

    def start_nudging(self, signum: int | None = NUDGE_SIGNAL) -> bool:
        """Start the watcher thread and the signal handler it nudges (see `NUDGE_AFTER_S`).
        Only from the main thread, where Python runs signal handlers; False where not started."""
        if (not self.enabled or signum is None or self._held_event is not None
                or threading.current_thread() is not threading.main_thread()
                or os.environ.get("KERNELWRIGHT_NO_NUDGE", "") not in ("", "0")):
            return False
        self._held_event = threading.Event()
        if self.held:
            self._held_event.set()
        signal.signal(signum, self._on_nudge)
        signal.siginterrupt(signum, False)  # a system call the nudge interrupts is restarted
        threading.Thread(target=self._watch, args=(signum,), name="kernelwright-nudger", daemon=True).start()
        return True

    def _watch(self, signum: int) -> None:
        _, turnstile = _open_lock_files()  # its own open file: flock state belongs to the open file
        pid = os.getpid()
        nudged_for = None
        while True:
            self._held_event.wait()
            time.sleep(NUDGE_AFTER_S / 2)
            looked = self._looked
            if (not self.held or self._busy or looked == nudged_for
                    or time.monotonic() - looked < NUDGE_AFTER_S):
                continue
            if _turnstile_taken(turnstile):  # a timer waits at the turnstile
                nudged_for = looked  # once per stretch: the handler's look starts a new one
                self.nudges += 1
                os.kill(pid, signum)

    def _on_nudge(self, signum, frame) -> None:
        """The watcher's signal, handled in the main thread between two bytecodes: look now."""
        if self.held and not self._busy:
            self._checked = 0.0
            self.yield_if_timer_waits()

    @contextlib.contextmanager
    def hold(self, wanted: bool):
        """Hold the lock for the block when `wanted` (requests inside the worker's exclusive turn
        are not: the worker holds the GPU for them)."""
        if not wanted:
            yield
            return
        self.acquire()
        try:
            yield
        finally:
            self.release()

    @contextlib.contextmanager
    def compiling(self):
        """Around one Triton compilation (or a kernel's launcher build and load): CPU work, so
        other processes may use the GPU meanwhile. Not inside a CUDA-graph capture, where the
        synchronise before letting go would break the capture."""
        if not self.held or not self._can_yield():
            yield
            return
        mark = time.monotonic()
        self.release()
        try:
            yield
        finally:
            self.compile_s += time.monotonic() - mark
            self.acquire()
            # what follows a compile or a launcher build under the hold (the kernel's first run)
            # is told apart from the rest of the work in the longest-stretch report
            self._looked_doing = f"{self.doing} (after a compile)"

    def take_stats(self) -> dict:
        """Seconds waited (of which after stepping aside for a timing turn) and compiled unlocked
        since the last call, and the longest stretch held without a look at the turnstile."""
        stats = {"wait_s": round(self.wait_s, 4), "compile_s": round(self.compile_s, 4),
                 "yield_s": round(self.yield_s, 4)}
        if self.longest_s:
            stats["longest_hold"] = {"seconds": round(self.longest_s, 3), "doing": self.longest_doing}
        self.wait_s = self.compile_s = self.yield_s = self.longest_s = 0.0
        return stats


