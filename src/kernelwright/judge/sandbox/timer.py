"""The timing primitives of a judge child: warm-up, timed calls between CUDA events (or the host
clock on the CPU), the L2 flush, escape gaps, the host-sync check. Each takes the clocks it times
with as an argument: a `Clocks` taken before any foreign code ran in the process, since a
candidate can replace anything in its own process (`clock_functions` says what it replaced).

`TimedRequests` (mixed into the harness) answers the timing turn's requests with them: perf input
sets, warm-up, timed blocks, escape gaps.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable

from ..common.requests import (
    GapsRequest,
    PerfPrepareRequest,
    PerfReleaseRequest,
    TimeBlockRequest,
)

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
        found[f"timer.{name}"] = module.get(name)
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


# Rotating perf input sets only while they fit in this much memory per side: beyond a few MiB they
# gain nothing from rotation (the L2 is flushed before every call anyway), and three sets of a
# 16 GiB shape, cloned once per block, ran out of memory. One set still serves every timed call
# twice per block, so a result cached by address is caught by the launch count.
PERF_SET_BUDGET_BYTES = 2 << 30

# The harness's own timing code, checked for replacement like the clocks (see patched_timers).
TIMING_METHODS = ("_timed_calls", "op_time_block", "op_perf_prepare", "op_gaps", "patched_timers")


class TimedRequests:
    """Mixed into `harness.Harness`, whose state (clocks, perf_sets, flush_buffer, counter) and
    plumbing (send, _error, _bound) these use."""

    perf_sets: list[tuple]

    def _perf_impl(self) -> Callable | None:
        """What the perf requests time."""
        return self.entry

    def op_perf_prepare(self, request: PerfPrepareRequest) -> None:
        """Make the rotating input sets, warm up on them, and estimate the time of one call."""
        clocks = self.clocks
        try:
            t0 = self._make_perf_sets(request)
            inputs_s = clocks.perf_counter() - t0
            warm_ms = float(request.warmup_ms)
            start = clocks.perf_counter()
            before = self.counter.own
            calls, host_ms, slow = warm_up(clocks, self.perf_sets, warm_ms, start)
            steady = sorted(host_ms[1:] or host_ms)
            host_median = steady[len(steady) // 2]
            pad_ms = host_pad_ms(clocks, host_median)
            # (not asked of slow calls: a host wait is lost in their length, and two more calls cost)
            host_sync = not slow and waits_for_device(clocks, *self.perf_sets[0], host_median)
            t1 = clocks.perf_counter()
            times = self._timed_calls(2 if slow else 5, pad_ms)
            flush_time = flush_ms(clocks, self.flush_buffer, 3)
            gaps = (escape_gaps(clocks, self.perf_sets, self.flush_buffer, 2 if slow else 5)
                    if self.is_gpu else [0.0])
            self.send({"op": "perf_prepare", "ok": True, "est_ms": float(sorted(times)[len(times) // 2]),
                       "phase_s": {"inputs": round(inputs_s, 4), "warmup": round(t1 - start, 4),
                                   "first_call": round(host_ms[0] / 1e3, 4),
                                   "probe": round(clocks.perf_counter() - t1, 4)},
                       "flush_ms": flush_time, "pad_ms": pad_ms, "host_ms": float(sorted(host_ms)[len(host_ms) // 2]),
                       # host latency only ever adds to a gap: the minimum is the cleanest reading
                       "gap_ms": float(min(gaps)),
                       "warmup_launches": self.counter.own - before, "warmup_calls": calls,
                       "sets": len(self.perf_sets), "slow": slow, "host_sync": host_sync,
                       "tuned": self.counter.tuned_configs(), "patched": self.patched_timers()})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("perf_prepare", exc))

    def _make_perf_sets(self, request: PerfPrepareRequest) -> float:
        """The input sets of a perf case, one per seed while they fit PERF_SET_BUDGET_BYTES, and
        the flush buffer; returns when making the inputs began (host clock)."""
        self.perf_sets = []  # no gc.collect() here: it costs ~0.1 s per perf case
        self._release_cached_memory()
        impl = self._perf_impl()
        t0 = self.clocks.perf_counter()
        for seed in request.seeds:
            self.perf_sets.append(self._bound(impl, "perf_cases", request.case, seed))
            per_set = self._nbytes(self.perf_sets[0][1])
            if per_set * (len(self.perf_sets) + 1) > PERF_SET_BUDGET_BYTES:
                break
        if self.flush_buffer is None:
            self.flush_buffer = self._empty(int(request.flush_bytes), dtype=self.torch.uint8, device=self.device)
        return t0

    def _timing_functions(self) -> dict[str, Any]:
        """The clocks and timers a candidate could replace (clock_functions), and this
        harness's own timing methods, as they are now."""
        found = clock_functions(self.torch)
        for name in TIMING_METHODS:
            found[f"Harness.{name}"] = getattr(type(self), name, None)
        return found

    def patched_timers(self) -> list[str]:
        """The timing functions that are no longer what they were before the candidate was imported
        (a candidate that patches `time.perf_counter`, `torch.cuda.Event.elapsed_time`, `do_bench`
        or the harness's own timer references to look fast), by name. This runs inside the
        candidate's process, so a candidate can defeat it; the worker's own clock around each
        block is the check it cannot reach (`performance.CaseTimer`)."""
        return patched_names(self.clocks, self._timers, self._timing_functions())[:20]

    def _timed_calls(self, n: int, pad_ms: float = 0.0, only_set: int | None = None) -> list[float]:
        """Per-call device time in ms (timed_calls). Calls cycle through the input sets,
        or all use set `only_set`."""
        sets = self.perf_sets if only_set is None else [self.perf_sets[only_set]]
        return timed_calls(self.clocks, sets, self.flush_buffer, n, pad_ms)

    def _replace_inputs(self, seed: int, only_set: int | None = None) -> None:
        """Copy every input set (or the one set a block uses) to fresh memory behind a random pad, so the
        addresses (and their alignment to memory channels) change from block to block: placement
        effects then show up as variance between blocks instead of a hidden bias of one process."""
        torch = self.torch
        rng = random.Random(seed)
        self._pad = None
        # Outputs are re-allocated every call from the same cached block: return the cache to the
        # driver so this block's outputs land on new pages too, behind a pad held all block.
        self._release_cached_memory()
        self._pad = self._empty(rng.randrange(1, 8192) * 4096, dtype=torch.uint8, device=self.device)
        self.perf_sets = [(fn, tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
                          if only_set is None or i == only_set else (fn, args)  # the others wait
                          for i, (fn, args) in enumerate(self.perf_sets)]

    def op_gaps(self, request: GapsRequest) -> None:
        """More escape-gap readings of the prepared perf case (the worker asks when one looks late)."""
        try:
            gaps = (escape_gaps(self.clocks, self.perf_sets, self.flush_buffer, int(request.n))
                    if self.is_gpu else [0.0])
            self.send({"op": "gaps", "ok": True, "gap_ms": float(min(gaps))})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("gaps", exc))

    def op_time_block(self, request: TimeBlockRequest) -> None:
        clocks = self.clocks
        try:
            t0 = clocks.perf_counter()
            # a block number: its input set, counted round the sets
            only_set = None if request.only_set is None else int(request.only_set) % len(self.perf_sets)
            if request.replace_seed is not None:
                self._replace_inputs(int(request.replace_seed), only_set)
            t1 = clocks.perf_counter()
            before = self.counter.own
            times = self._timed_calls(int(request.n), float(request.pad_ms), only_set)
            self.send({"op": "time_block", "ok": True, "times_ms": times,
                       "launches": self.counter.own - before, "patched": self.patched_timers(),
                       "phase_s": {"replace": round(t1 - t0, 4), "timed": round(clocks.perf_counter() - t1, 4)}})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("time_block", exc))

    def op_perf_release(self, request: PerfReleaseRequest) -> None:
        self.perf_sets = []
        self._pad = None
        self._release_cached_memory()
        self.send({"op": "perf_release", "ok": True})
