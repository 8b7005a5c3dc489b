"""Reverse a tensor along its last dimension (torch.flip(x, dims=(-1,)))."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "flip"
difficulty = 1
tags = ("data-movement", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `flip(x)` that reverses x along its last dimension,
like torch.flip(x, dims=(-1,)): for x of shape (..., N), out[..., j] = x[..., N - 1 - j].
x is contiguous, of any number of dimensions >= 1 and dtype float32, float16 or bfloat16; N and
the leading sizes are any values >= 1 (not powers of two). Return a new tensor of x's shape and
dtype, bit-exact; do not modify x.
"""
entry_point = "flip(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/flip.py"
deterministic = True
tolerances = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype),)


def reference(x):
    return torch.flip(x, dims=(-1,))


visible_cases = [Case("float32", shape=(8, 1000)), Case("float16", shape=(3, 5, 300))]
hidden_cases = [
    Case("float32", shape=(1,)),
    Case("float32", shape=(100_003,)),
    Case("float32", shape=(777, 3)),
    Case("float16", shape=(2, 3, 4, 5)),
    Case("bfloat16", shape=(64, 4096)),
]
perf_cases = [
    Case("float32", shape=(8192, 8192)),
    Case("float16", shape=(4096, 32768)),
    Case("bfloat16", shape=(16, 1 << 22)),
]


def cost(case):
    return {"flops": 0, "bytes": 2 * math.prod(case.shape) * case.torch_dtype.itemsize}
