"""SiLU (swish) activation x * sigmoid(x), elementwise."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "silu"
difficulty = 1
tags = ("elementwise", "activation", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `silu(x)` that applies SiLU elementwise
(torch.nn.functional.silu):
    silu(x) = x * sigmoid(x) = x / (1 + exp(-x))
x is a contiguous tensor of any shape (including sizes that are not a multiple of the block size)
and dtype float32, float16 or bfloat16. Compute in float32 and return a new tensor of x's shape and
dtype; do not modify x. Inputs reach |x| of a few thousand (float16 too): large negative inputs must give (-)0 and large
positive ones x, never NaN.
"""
entry_point = "silu(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/silu.py"
deterministic = True


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype, scale=case.get("scale", 3.0)),)


def reference(x):
    return x * torch.sigmoid(x)


visible_cases = [Case("float32", shape=(1000,)), Case("float16", shape=(64, 300))]
hidden_cases = [
    Case("float32", shape=(1,)),
    Case("float32", shape=(3, 5, 7), scale=8.0, hostile="odd-sizes"),
    Case("float16", shape=(98_765,)),
    Case("bfloat16", shape=(257, 129)),
    # numerically hostile (docs/tasks.md): exp(x) / (1 + exp(x)) is inf/inf for x >~ 89
    Case("float32", shape=(3, 1031), scale=200.0, hostile="large-magnitude"),
    Case("float16", shape=(2049,), scale=1000.0, hostile="large-magnitude"),
]
perf_cases = [
    Case("float32", shape=(1 << 25,)),
    Case("float16", shape=(8192, 8192)),
    Case("bfloat16", shape=(16384, 4096)),
]


def cost(case):
    n = math.prod(case.shape)
    return {"flops": 4 * n, "bytes": 2 * n * case.torch_dtype.itemsize}
