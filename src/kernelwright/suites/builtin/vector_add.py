"""Elementwise addition of two tensors of the same shape: the "hello world" of kernels."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "vector_add"
difficulty = 1
tags = ("elementwise", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `vector_add(x, y)` that returns x + y.
x and y are CUDA tensors of the same shape (any number of dimensions, any size, including sizes
that are not a multiple of the block size) and the same dtype (float32, float16 or bfloat16).
Return a new tensor of the same shape and dtype; do not modify x or y.
"""
entry_point = "vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/vector_add.py"
deterministic = True


def make_inputs(case, gen):
    return randn(gen, case.shape, case.dtype), randn(gen, case.shape, case.dtype)


def reference(x, y):
    return x + y


visible_cases = [Case("float32", shape=(1000,)), Case("float16", shape=(32, 130))]
hidden_cases = [
    Case("float32", shape=(3, 5, 7)),
    Case("float32", shape=(1,)),
    Case("float16", shape=(98_765,)),
    Case("bfloat16", shape=(257, 129)),
]
perf_cases = [
    Case("float32", shape=(1 << 24,)),
    Case("float16", shape=(1 << 26,)),
    Case("bfloat16", shape=(8192, 8192)),
]


def cost(case):
    n = 1
    for d in case.shape:
        n *= d
    item = 4 if case.dtype == "float32" else 2
    return {"flops": n, "bytes": 3 * n * item}
