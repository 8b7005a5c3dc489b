"""The basic profile's child side without a GPU: the grid recomputed as Triton computes it, the
compiled kernel's metadata read, own launches told apart (issue 30)."""

import inspect
import os
from types import SimpleNamespace

from kernelwright.judge.sandbox.launches import LaunchCounter
from kernelwright.judge.sandbox.profiling import LaunchProfiler, kernel_metadata, launch_grid


def add_kernel(x_ptr, out_ptr, n, BLOCK=128, STRIDE=1):
    pass


class FakeJit:
    """What the profiler reads of a JITFunction: `fn` and `signature`."""

    def __init__(self, fn=add_kernel):
        self.fn = fn
        self.signature = inspect.signature(fn)


def test_a_callable_grid_gets_the_bound_arguments():
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (-(-meta["n"] // meta["BLOCK"]), 2)

    dims = launch_grid(FakeJit(), ("x", "out", 1000), {"grid": grid, "warmup": False, "BLOCK": 256, "num_warps": 8})
    assert dims == [4, 2, 1]
    assert seen["STRIDE"] == 1 and seen["num_warps"] == 8 and "grid" not in seen


def test_a_fixed_grid_and_an_unreadable_one():
    assert launch_grid(FakeJit(), (), {"grid": (7,)}) == [7, 1, 1]
    assert launch_grid(FakeJit(), (), {"grid": 5}) == [5, 1, 1]
    assert launch_grid(FakeJit(), (), {"grid": lambda meta: 1 / 0}) == [0, 0, 0]


def test_the_compiled_kernels_metadata():
    kernel = SimpleNamespace(metadata=SimpleNamespace(num_warps=4, num_stages=3, shared=1024), n_regs=40, n_spills=0)
    assert kernel_metadata(kernel) == {"num_warps": 4, "num_stages": 3, "shared_bytes": 1024, "registers": 40,
                                       "spills": 0}
    assert kernel_metadata(None) == {"num_warps": 0, "num_stages": None, "shared_bytes": None, "registers": None,
                                     "spills": None}


def test_the_profiler_runs_and_records_each_launch():
    clocks = SimpleNamespace(is_gpu=False)
    profiler = LaunchProfiler(clocks)
    kernel = SimpleNamespace(metadata=SimpleNamespace(num_warps=2, num_stages=1, shared=0), n_regs=16, n_spills=4)
    calls = []

    def run(jit_fn, *args, **kwargs):
        calls.append(args)
        return kernel

    assert profiler.launch(FakeJit(), run, ("x", "out", 10), {"grid": (3,), "warmup": False}) is kernel
    assert calls == [("x", "out", 10)]
    (record,) = profiler.records()
    assert record == {"kernel": "add_kernel", "grid": [3, 1, 1], "time_ms": None, "num_warps": 2, "num_stages": 1,
                      "shared_bytes": 0, "registers": 16, "spills": 4}


def test_record_says_whether_a_launch_is_own():
    counter = LaunchCounter(os.path.realpath(__file__))
    assert counter._record(FakeJit()) is True
    assert counter._record(FakeJit(os.path.join)) is False
    assert (counter.own, counter.other, counter.profiler) == (1, 1, None)
