"""Counting Triton kernel launches inside a judge child (both sides install the same counter)."""

from __future__ import annotations

import os
import weakref
from typing import Any

from . import autotuning


class LaunchCounter:
    """Counts Triton kernel launches by wrapping the class-level `run` that every launch goes
    through (`kernel[grid](...)`, autotuners, heuristics; compiled and interpreted alike).
    Launches of kernels defined in the candidate's own file are counted separately, so that a
    file that computes with torch (or with torch.compile's generated kernels) is caught."""

    def __init__(self, own_file: str | None) -> None:
        self.own_file = own_file
        self.own = 0
        self.other = 0
        self.kernels: dict[str, int] = {}
        # code object -> defined in the candidate's file? Resolved once: a path lookup on every
        # launch costs tens of microseconds of syscalls, which would be billed to the candidate.
        self._is_own: dict[Any, bool] = {}
        self.autotuners: weakref.WeakSet = weakref.WeakSet()
        # while a check runs: the memory its own launches are given (provenance.KernelMemory)
        self.memory = None
        # while a profiled call runs: its own launches go through it (profiling.LaunchProfiler)
        self.profiler = None

    def watch_file(self, own_file: str | None) -> None:
        """Count launches of kernels defined in `own_file` (the file this side loads) as its own."""
        self.own_file = own_file
        self._is_own.clear()

    def forget_tuning(self) -> int:
        """The autotuners seen so far tune again at their next call (autotuning.forget_tuning)."""
        return autotuning.forget_tuning(self.autotuners)

    def tuned_configs(self) -> dict[str, str]:
        """Each autotuned kernel's current choice, by kernel name (autotuning.tuned_configs)."""
        return autotuning.tuned_configs(self.autotuners)

    def _record(self, jit_fn, args: tuple = (), kwargs: dict | None = None) -> bool:
        """Count one launch; returns whether it is of a kernel of the watched file."""
        fn = getattr(jit_fn, "fn", None)
        code = getattr(fn, "__code__", None)
        own = self._is_own.get(code)
        if own is None:
            own = bool(code is not None and self.own_file and os.path.realpath(code.co_filename) == self.own_file)
            self._is_own[code] = own
        if own:
            self.own += 1
            name = fn.__name__
            self.kernels[name] = self.kernels.get(name, 0) + 1
            if self.memory is not None:
                self.memory.note_launch(args, kwargs or {})
        else:
            self.other += 1
        return own

