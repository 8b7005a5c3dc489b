"""Inclusive prefix sum (cumulative sum) along the last dimension of a 2-D tensor."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import rand, randn

name = "cumsum"
difficulty = 2
tags = ("scan", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `cumsum(x)` that returns the inclusive prefix sum of
each row of a 2-D contiguous tensor x of shape (M, N), like torch.cumsum(x, dim=-1):
    out[i, j] = x[i, 0] + x[i, 1] + ... + x[i, j]
x is float32, float16 or bfloat16; accumulate in float32 (carry the running total across blocks
in float32, never in the input dtype) and return a new (M, N) tensor of x's dtype. M can be 1 and
N anything from 1 to 131072, not necessarily a power of two, so a row generally spans several
blocks. Any summation order is accepted within the tolerances below (random-walk partial sums
pass near zero, hence the absolute parts).
"""
entry_point = "cumsum(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/cumsum.py"
tolerances = {"float32": (1e-3, 1e-4), "float16": (2e-3, 2e-3)}


def make_inputs(case, gen):
    if case.get("positive", False):  # partial sums grow to N/2: checks relative accuracy
        return (rand(gen, case.shape, case.dtype),)
    return (randn(gen, case.shape, case.dtype),)


def reference(x):
    return torch.cumsum(x, dim=-1)


visible_cases = [Case("float32", shape=(8, 1000)), Case("float16", shape=(16, 4096))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(3, 131_072), positive=True, hostile="long-rows"),
    Case("float32", shape=(100, 3), hostile="odd-sizes"),
    Case("float16", shape=(5, 20_001)),
    Case("bfloat16", shape=(64, 2048)),
    # numerically hostile (docs/tasks.md): partial sums up to ~32768 in float16 (a float16 running
    # total is off by whole units there)
    Case("float16", shape=(2, 65_537), positive=True, hostile="long-rows"),
]
perf_cases = [
    Case("float32", shape=(8192, 4096)),
    Case("float16", shape=(16384, 4096)),
    Case("bfloat16", shape=(1024, 65536)),
]


def cost(case):
    m, n = case.shape
    return {"flops": m * n, "bytes": 2 * m * n * case.torch_dtype.itemsize}
