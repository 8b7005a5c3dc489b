"""Row-wise softmax of a 2-D tensor over its last dimension."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_cast, hostile_rows
from kernelwright.tasks.inputs import randn

name = "softmax"
difficulty = 2
tags = ("reduction", "softmax", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `softmax(x)` that computes the softmax of a 2-D tensor
x of shape (M, N) over its last dimension, like torch.softmax(x, dim=-1).
x is float32, float16 or bfloat16; compute in float32 and return a new tensor of x's shape and
dtype. N can be any size from 1 to 65536 and need not be a power of two. Rows can hold values of
magnitude up to about 1e4 (a row may lie entirely around +1000 or -1000), so subtract the row
maximum for numerical stability; rows can be constant, and entries can be -inf (masked positions:
their output is 0; a row always has at least one finite entry). x may be non-contiguous (e.g. a
column slice of a wider tensor, with x.stride(1) == 1 but x.stride(0) > N): honour its strides or
make it contiguous first.
"""
entry_point = "softmax(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/softmax.py"


def make_inputs(case, gen):
    # scale/shift set magnitude and sign; `hostile` adds constant rows, -inf entries or a strided view
    x = randn(gen, case.shape, "float32", scale=case.get("scale", 3.0), shift=case.get("shift", 0.0))
    return (hostile_cast(hostile_rows(x, case.get("hostile"), gen), case.dtype),)


def reference(x):
    return torch.softmax(x, dim=-1)


visible_cases = [Case("float32", shape=(8, 128)), Case("float16", shape=(16, 1000))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(33, 3000), scale=10.0),
    Case("float16", shape=(7, 4097), hostile="odd-sizes"),
    Case("float32", shape=(2, 20000)),
    Case("bfloat16", shape=(64, 512)),
    # numerically hostile (docs/tasks.md): a softmax without max subtraction overflows (+1000) or
    # underflows to 0/0 (-1000); fp16 rows of magnitude ~1e4
    Case("float32", shape=(16, 4099), shift=1000.0, hostile="large-magnitude"),
    Case("float16", shape=(7, 1031), scale=3000.0, hostile="large-magnitude"),
    Case("float32", shape=(9, 2053), shift=-1000.0, hostile="all-negative"),
    Case("float32", shape=(10, 777), hostile="constant-rows"),
    Case("float16", shape=(6, 5003), hostile="neg-inf-mask"),
    Case("float32", shape=(3, 10007), scale=10.0, hostile="neg-inf-mask"),
    Case("float32", shape=(2, 65536), shift=-1000.0, hostile="long-rows"),
    Case("float32", shape=(5, 300), hostile="non-contiguous"),
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
