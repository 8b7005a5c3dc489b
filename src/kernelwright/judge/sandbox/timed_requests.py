"""The requests of a timing turn, the same on both sides of a judge child: make a perf case's
rotating input sets and warm up on them (`perf_prepare`), time blocks of calls (`time_block`),
read escape gaps (`gaps`), let go of the sets (`perf_release`). The timing itself is done by the
primitives of `timing_ops`, with the clocks the harness took before any foreign code ran."""

from __future__ import annotations

import random
from typing import Any, Callable

from . import timing_ops

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

    def op_perf_prepare(self, msg: dict) -> None:
        """Make the rotating input sets, warm up on them, and estimate the time of one call."""
        clocks = self.clocks
        try:
            t0 = self._make_perf_sets(msg)
            inputs_s = clocks.perf_counter() - t0
            warm_ms = float(msg.get("warmup_ms", 25.0))
            start = clocks.perf_counter()
            before = self.counter.own
            calls, host_ms, slow = timing_ops.warm_up(clocks, self.perf_sets, warm_ms, start)
            steady = sorted(host_ms[1:] or host_ms)
            host_median = steady[len(steady) // 2]
            pad_ms = timing_ops.host_pad_ms(clocks, host_median)
            # (not asked of slow calls: a host wait is lost in their length, and two more calls cost)
            host_sync = not slow and timing_ops.waits_for_device(clocks, *self.perf_sets[0], host_median)
            t1 = clocks.perf_counter()
            times = self._timed_calls(2 if slow else 5, pad_ms)
            flush_ms = timing_ops.flush_ms(clocks, self.flush_buffer, 3)
            gaps = (timing_ops.escape_gaps(clocks, self.perf_sets, self.flush_buffer, 2 if slow else 5)
                    if self.is_gpu else [0.0])
            self.send({"op": "perf_prepare", "ok": True, "est_ms": float(sorted(times)[len(times) // 2]),
                       "phase_s": {"inputs": round(inputs_s, 4), "warmup": round(t1 - start, 4),
                                   "first_call": round(host_ms[0] / 1e3, 4),
                                   "probe": round(clocks.perf_counter() - t1, 4)},
                       "flush_ms": flush_ms, "pad_ms": pad_ms, "host_ms": float(sorted(host_ms)[len(host_ms) // 2]),
                       # host latency only ever adds to a gap: the minimum is the cleanest reading
                       "gap_ms": float(min(gaps)),
                       "warmup_launches": self.counter.own - before, "warmup_calls": calls,
                       "sets": len(self.perf_sets), "slow": slow, "host_sync": host_sync,
                       "tuned": self.counter.tuned_configs(), "patched": self.patched_timers()})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("perf_prepare", exc))

    def _make_perf_sets(self, msg: dict) -> float:
        """The input sets of a perf case, one per seed while they fit PERF_SET_BUDGET_BYTES, and
        the flush buffer; returns when making the inputs began (host clock)."""
        self.perf_sets = []  # no gc.collect() here: it costs ~0.1 s per perf case
        self._release_cached_memory()
        impl = self._perf_impl()
        t0 = self.clocks.perf_counter()
        for seed in msg["seeds"]:
            self.perf_sets.append(self._bound(impl, "perf_cases", msg["case"], seed))
            per_set = self._nbytes(self.perf_sets[0][1])
            if per_set * (len(self.perf_sets) + 1) > PERF_SET_BUDGET_BYTES:
                break
        if self.flush_buffer is None:
            self.flush_buffer = self._empty(int(msg["flush_bytes"]), dtype=self.torch.uint8, device=self.device)
        return t0

    def _timing_functions(self) -> dict[str, Any]:
        """The clocks and timers a candidate could replace (timing_ops.clock_functions), and this
        harness's own timing methods, as they are now."""
        found = timing_ops.clock_functions(self.torch)
        for name in TIMING_METHODS:
            found[f"Harness.{name}"] = getattr(type(self), name, None)
        return found

    def patched_timers(self) -> list[str]:
        """The timing functions that are no longer what they were before the candidate was imported
        (a candidate that patches `time.perf_counter`, `torch.cuda.Event.elapsed_time`, `do_bench`
        or the harness's own timer references to look fast), by name. This runs inside the
        candidate's process, so a candidate can defeat it; the worker's own clock around each
        block is the check it cannot reach (`performance.CaseTimer`)."""
        return timing_ops.patched_names(self.clocks, self._timers, self._timing_functions())[:20]

    def _timed_calls(self, n: int, pad_ms: float = 0.0, only_set: int | None = None) -> list[float]:
        """Per-call device time in ms (timing_ops.timed_calls). Calls cycle through the input sets,
        or all use set `only_set`."""
        sets = self.perf_sets if only_set is None else [self.perf_sets[only_set]]
        return timing_ops.timed_calls(self.clocks, sets, self.flush_buffer, n, pad_ms)

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

    def op_gaps(self, msg: dict) -> None:
        """More escape-gap readings of the prepared perf case (the worker asks when one looks late)."""
        try:
            gaps = (timing_ops.escape_gaps(self.clocks, self.perf_sets, self.flush_buffer, int(msg["n"]))
                    if self.is_gpu else [0.0])
            self.send({"op": "gaps", "ok": True, "gap_ms": float(min(gaps))})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("gaps", exc))

    def op_time_block(self, msg: dict) -> None:
        clocks = self.clocks
        try:
            t0 = clocks.perf_counter()
            only_set = msg.get("only_set")  # a block number: its input set, counted round the sets
            only_set = None if only_set is None else int(only_set) % len(self.perf_sets)
            if msg.get("replace_seed") is not None:
                self._replace_inputs(int(msg["replace_seed"]), only_set)
            t1 = clocks.perf_counter()
            before = self.counter.own
            times = self._timed_calls(int(msg["n"]), float(msg.get("pad_ms", 0.0)), only_set)
            self.send({"op": "time_block", "ok": True, "times_ms": times,
                       "launches": self.counter.own - before, "patched": self.patched_timers(),
                       "phase_s": {"replace": round(t1 - t0, 4), "timed": round(clocks.perf_counter() - t1, 4)}})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("time_block", exc))

    def op_perf_release(self, msg: dict) -> None:
        self.perf_sets = []
        self._pad = None
        self._release_cached_memory()
        self.send({"op": "perf_release", "ok": True})

