"""The timing primitives of a judge child: warm-up, timed calls between CUDA events (or the host
clock on the CPU), the L2 flush, escape gaps, the host-sync check. Each takes the clocks it times
with as an argument: a `Clocks` taken before any foreign code ran in the process, since a
candidate can replace anything in its own process (`clock_functions` says what it replaced)."""

from __future__ import annotations

import time
from typing import Any, Callable

# A call that takes this long (synchronised) is timed with fewer calls: its own length dwarfs the
# noise, and a 250 ms shape otherwise held the GPU exclusively for 15 s.
SLOW_CALL_MS = 5.0
HOST_SYNC_SPIN_MS = 2.0  # GPU work queued ahead of a call to see whether the call waits for it

_CLOCKS = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time")
# This module's own primitives, checked for replacement like the clocks (see clock_functions).
_PRIMITIVES = ("patched_names", "warm_up", "waits_for_device", "host_pad_ms", "timed_calls", "flush_ms", "escape_gaps")


class Clocks:
    """Private references to the host clock and, on a GPU, CUDA events, synchronize and the spin
    kernel (`torch.cuda._sleep`), taken when the harness starts, before foreign code runs."""

    def __init__(self, torch, is_gpu: bool) -> None:
        self.is_gpu = is_gpu
        self.perf_counter = time.perf_counter
        if is_gpu:
            self.event_cls = torch.cuda.Event
            self.record = torch.cuda.Event.record
            self.elapsed = torch.cuda.Event.elapsed_time
            self.sync = torch.cuda.synchronize
            self.sleep = getattr(torch.cuda, "_sleep", None)  # a GPU spin of N clock cycles
        else:
            self.sleep = None
            self.sync = lambda: None
        self.cycles_per_ms: float | None = None  # the spin's speed, measured at its first use


def clock_functions(torch) -> dict[str, Any]:
    """The clocks and timers a candidate could replace in its process to look fast, by name, as
    they are now: `time`'s clocks, torch's CUDA events and synchronize, Triton's `do_bench`, and
    this module's own primitives."""
    found: dict[str, Any] = {f"time.{name}": getattr(time, name, None) for name in _CLOCKS}
    try:
        import triton.testing

        found["triton.testing.do_bench"] = getattr(triton.testing, "do_bench", None)
    except Exception:  # noqa: BLE001
        pass
    found["torch.cuda.synchronize"] = torch.cuda.synchronize
    for name in ("record", "elapsed_time", "synchronize", "query"):
        found[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name, None)
    module = globals()
    for name in _PRIMITIVES:
        found[f"timing_ops.{name}"] = module.get(name)
    return found


def patched_names(clocks: Clocks, before: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed between two `clock_functions`-style snapshots, and which of the private
    references in `clocks` are no longer what `before` had under their names."""
    found = [name for name, original in before.items() if now.get(name) is not original]
    own = {"perf_counter": "time.perf_counter"}
    if clocks.is_gpu:
        own.update(record="torch.cuda.Event.record", elapsed="torch.cuda.Event.elapsed_time",
                   sync="torch.cuda.synchronize")
    found += [f"Clocks.{attr}" for attr, name in own.items() if vars(clocks).get(attr) is not before.get(name)]
    return found


def warm_up(clocks: Clocks, sets: list[tuple], warm_ms: float, start: float) -> tuple[int, list[float], bool]:
    """Call round the input sets until `warm_ms` have passed since `start` (at least 3 calls, at
    most 1000): (calls, host milliseconds of each, whether a steady call is slow)."""
    calls = 0
    host_ms = []
    # Synchronise after every call: the warm-up lasts `warm_ms` of device time. (Without it
    # the host queued up to 1000 calls within `warm_ms` of *host* time, and a 243 ms kernel
    # spent 55 s warming up.)
    slow = False
    while True:
        fn, args = sets[calls % len(sets)]
        t = clocks.perf_counter()
        fn(*args)
        host_ms.append((clocks.perf_counter() - t) * 1e3)
        clocks.sync()
        calls += 1
        # the first call may still compile or allocate; a slow steady call warms up alone
        slow = calls >= 2 and (clocks.perf_counter() - t) * 1e3 >= SLOW_CALL_MS
        if calls >= 1000 or ((calls >= 3 or slow) and (clocks.perf_counter() - start) * 1e3 >= warm_ms):
            break
    return calls, host_ms, slow


def waits_for_device(clocks: Clocks, fn: Callable, args: tuple, host_ms: float) -> bool:
    """Whether one call waits for the GPU inside (`.item()`, a size read back, a synchronize):
    queue a spin of HOST_SYNC_SPIN_MS ahead of it and see whether the call's host time grows
    by about as much. Such a call's device time includes the host's latency after each wait,
    so it depends on CPU load as well as on the kernels (the pad before the start event cannot
    cover it)."""
    if not clocks.is_gpu or clocks.sleep is None or not clocks.cycles_per_ms:
        return False
    waited = []
    for _ in range(2):  # both must wait: a busy host alone can stall one call by a millisecond
        clocks.sync()
        clocks.sleep(int(HOST_SYNC_SPIN_MS * clocks.cycles_per_ms))
        t = clocks.perf_counter()
        fn(*args)
        waited.append((clocks.perf_counter() - t) * 1e3 - host_ms)
        clocks.sync()
    return min(waited) >= 0.5 * HOST_SYNC_SPIN_MS


def host_pad_ms(clocks: Clocks, host_ms: float) -> float:
    """GPU time to queue ahead of each timed call so the kernel is already enqueued when the
    start event fires: otherwise host-side launch time (slow under CPU load, e.g. other
    workers compiling) would be measured as kernel time. Twice the host's time per call."""
    if clocks.sleep is None:
        return 0.0
    if clocks.cycles_per_ms is None:
        start, end = clocks.event_cls(enable_timing=True), clocks.event_cls(enable_timing=True)
        clocks.sleep(1000)  # first use: load the spin kernel
        clocks.sync()
        clocks.record(start)
        clocks.sleep(2_000_000)
        clocks.record(end)
        clocks.sync()
        clocks.cycles_per_ms = 2_000_000 / max(clocks.elapsed(start, end), 1e-3)
    return min(2.0 * host_ms + 0.02, 5.0)


def timed_calls(clocks: Clocks, sets: list[tuple], flush: Any, n: int, pad_ms: float = 0.0) -> list[float]:
    """Per-call device time in ms of `n` calls round `sets`. The L2 is flushed (`flush` zeroed)
    before every call (the flush also keeps the GPU busy while the host enqueues the call, so
    launch latency is not counted)."""
    if clocks.is_gpu:
        events = [(clocks.event_cls(enable_timing=True), clocks.event_cls(enable_timing=True)) for _ in range(n)]
        cycles = int(pad_ms * clocks.cycles_per_ms) if pad_ms > 0 and clocks.cycles_per_ms else 0
        for i in range(n):
            fn, args = sets[i % len(sets)]
            flush.zero_()
            if cycles:
                clocks.sleep(cycles)
            clocks.record(events[i][0])
            fn(*args)
            clocks.record(events[i][1])
        clocks.sync()
        return [clocks.elapsed(s, e) for s, e in events]
    times = []
    for i in range(n):
        fn, args = sets[i % len(sets)]
        flush.zero_()
        start = clocks.perf_counter()
        fn(*args)
        times.append((clocks.perf_counter() - start) * 1e3)
    return times


def flush_ms(clocks: Clocks, flush: Any, n: int) -> float:
    """Time of one L2 flush: every timed call pays it, so block sizes must count it."""
    if not clocks.is_gpu:
        start = clocks.perf_counter()
        for _ in range(n):
            flush.zero_()
        return (clocks.perf_counter() - start) * 1e3 / n
    start, end = clocks.event_cls(enable_timing=True), clocks.event_cls(enable_timing=True)
    clocks.record(start)
    for _ in range(n):
        flush.zero_()
    clocks.record(end)
    clocks.sync()
    return clocks.elapsed(start, end) / n


def escape_gaps(clocks: Clocks, sets: list[tuple], flush: Any, n: int) -> list[float]:
    """Time from the end of the call on the current stream to the moment the whole device is
    idle. Work hidden on side streams (outside the timed events) makes this gap large. GPU only."""
    gaps = []
    for i in range(n):
        fn, args = sets[i % len(sets)]
        clocks.sync()
        flush.zero_()
        start, end, idle = (clocks.event_cls(enable_timing=True) for _ in range(3))
        clocks.record(start)
        fn(*args)
        clocks.record(end)
        clocks.sync()
        clocks.record(idle)
        clocks.sync()
        gaps.append(clocks.elapsed(end, idle))
    return gaps
