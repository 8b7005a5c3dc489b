"""The basic profile, child side: one recorded call of a perf case, each launch of a kernel defined
in this side's own file bracketed by CUDA events, with the compiled kernel's metadata (Triton's
`CompiledKernel`: num_warps, num_stages, shared memory, registers and spills once loaded) and the
grid it ran on. No external tool.

Everything here runs in the (untrusted) process that loaded the code: the worker validates the
reply strictly (`messages.Profile`) and never lets it touch a verdict (`worker.profiling`).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from ..common.requests import ProfileRequest

MAX_LAUNCHES = 32  # launches recorded per call (the contract's bound); more are only counted


class LaunchProfiler:
    """Set as `LaunchCounter.profiler` for one call: `launch` runs each own launch between two
    CUDA events (the clocks' private references) and keeps what is needed to describe it later;
    `records` reads the events and the metadata after the device has finished."""

    def __init__(self, clocks: Any) -> None:
        self.clocks = clocks
        self._launches: list[tuple] = []
        self.more = 0

    def launch(self, jit_fn: Any, run: Callable, args: tuple, kwargs: dict) -> Any:
        if len(self._launches) >= MAX_LAUNCHES:
            self.more += 1
            return run(jit_fn, *args, **kwargs)
        clocks = self.clocks
        start = end = None
        if clocks.is_gpu:
            start, end = clocks.event_cls(enable_timing=True), clocks.event_cls(enable_timing=True)
            clocks.record(start)
        kernel = run(jit_fn, *args, **kwargs)
        if end is not None:
            clocks.record(end)
        # after the launch: the grid's host work is never inside the events
        self._launches.append((jit_fn, kernel, launch_grid(jit_fn, args, kwargs), start, end))
        return kernel

    def records(self) -> list[dict]:
        """One LAUNCH description per recorded launch (the call has been synchronised)."""
        out = []
        for jit_fn, kernel, grid, start, end in self._launches:
            ms = float(self.clocks.elapsed(start, end)) if start is not None else None
            out.append({"kernel": kernel_name(jit_fn), "grid": grid, "time_ms": ms, **kernel_metadata(kernel)})
        return out


def kernel_name(jit_fn: Any) -> str:
    fn = getattr(jit_fn, "fn", None)
    return str(getattr(fn, "__name__", None) or getattr(jit_fn, "__name__", "kernel"))[:200]


def launch_grid(jit_fn: Any, args: tuple, kwargs: dict) -> list[int]:
    """The launch's grid as [x, y, z], recomputed from its `grid` argument the way Triton does: a
    callable grid gets the bound arguments (the JIT function's signature, defaults and constexprs
    included, plus the launch options such as num_warps). [0, 0, 0] when it cannot be read."""
    grid = kwargs.get("grid")
    try:
        if callable(grid):
            grid = grid(_bound_args(jit_fn, args, kwargs))
        dims = [int(d) for d in (grid if isinstance(grid, (tuple, list)) else (grid,))][:3]
    except Exception:  # noqa: BLE001 - a grid that cannot be recomputed: reported as unknown
        return [0, 0, 0]
    return dims + [1] * (3 - len(dims))


def _bound_args(jit_fn: Any, args: tuple, kwargs: dict) -> dict:
    signature = getattr(jit_fn, "signature", None)
    if not isinstance(signature, inspect.Signature):
        signature = inspect.signature(jit_fn.fn)
    params = signature.parameters
    given = {k: v for k, v in kwargs.items() if k in params}
    bound = signature.bind_partial(*args, **given)
    bound.apply_defaults()
    meta = {k: v for k, v in kwargs.items() if k not in params and k not in ("grid", "warmup")}
    return {**meta, **bound.arguments}


def kernel_metadata(kernel: Any) -> dict:
    """num_warps, num_stages, shared memory (bytes), registers and spills of a `CompiledKernel`
    (registers and spills are known once its binary is loaded, i.e. after its first run). None
    where this Triton (or the interpreter) has no such figure."""
    meta = getattr(kernel, "metadata", None)

    def figure(owner: Any, name: str) -> int | None:
        value = getattr(owner, name, None)
        return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    return {"num_warps": figure(meta, "num_warps") or 0, "num_stages": figure(meta, "num_stages"),
            "shared_bytes": figure(meta, "shared"), "registers": figure(kernel, "n_regs"),
            "spills": figure(kernel, "n_spills")}


class ProfileRequests:
    """Mixed into `harness.Harness` (its clocks, counter, bound inputs, send and errors)."""

    def op_profile(self, request: ProfileRequest) -> None:
        """One warm call of the perf case, then one recorded call with events around the whole
        call and around each own launch; replies with the launches, the call's device time and
        the bytes of its tensors (inputs and outputs)."""
        clocks, counter = self.clocks, self.counter
        try:
            fn, args = self._bound_seeded(self._perf_impl(), "perf_cases", request.case, request.seed)
            fn(*args)  # warm: caches, lazily loaded binaries, allocator
            clocks.sync()
            profiler = LaunchProfiler(clocks)
            start = end = None
            if clocks.is_gpu:
                start, end = clocks.event_cls(enable_timing=True), clocks.event_cls(enable_timing=True)
                clocks.record(start)
            counter.profiler = profiler
            try:
                out = fn(*args)
            finally:
                counter.profiler = None
            if end is not None:
                clocks.record(end)
            clocks.sync()
            call_ms = float(clocks.elapsed(start, end)) if start is not None else None
            reply = {"op": "profile", "ok": True, "launches": profiler.records(), "more_launches": profiler.more,
                     "call_ms": call_ms, "io_bytes": int(self._nbytes(args) + self._nbytes(out))}
            del fn, args, out
            self._release_cached_memory()
            self.send(reply)
        except BaseException as exc:  # noqa: BLE001
            counter.profiler = None
            self.send(self._error("profile", exc))
