"""Row-wise softmax of a 2-D tensor over its last dimension."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "softmax"
difficulty = 2
tags = ("reduction", "softmax", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `softmax(x)` that computes the softmax of a 2-D tensor
x of shape (M, N) over its last dimension, like torch.softmax(x, dim=-1).
x is float32, float16 or bfloat16; compute in float32 and return a new tensor of x's shape and
dtype. N can be any size from 1 to 65536 and need not be a power of two; rows hold values of
magnitude up to about 30, so subtract the row maximum for numerical stability.
"""
entry_point = "softmax(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/softmax.py"


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype, scale=case.get("scale", 3.0)),)


def reference(x):
    return torch.softmax(x, dim=-1)


visible_cases = [Case("float32", shape=(8, 128)), Case("float16", shape=(16, 1000))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(33, 3000), scale=10.0),
    Case("float16", shape=(7, 4097)),
    Case("float32", shape=(2, 20000)),
    Case("bfloat16", shape=(64, 512)),
]
perf_cases = [
    Case("float16", shape=(8192, 8192)),
    Case("float32", shape=(4096, 4096)),
    Case("bfloat16", shape=(1024, 32768)),
]


def cost(case):
    m, n = case.shape
    item = 4 if case.dtype == "float32" else 2
    return {"flops": 5 * m * n, "bytes": 2 * m * n * item}
