"""RMS normalization over the last dimension with a learned per-column weight."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_rows
from kernelwright.tasks.inputs import randn

name = "rmsnorm"
difficulty = 2
tags = ("normalization", "reduction", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `rmsnorm(x, weight, eps=1e-6)` that computes
RMS normalization over the last dimension:
    out = x / sqrt(mean(x**2, dim=-1, keepdim=True) + eps) * weight
x has shape (..., N) (2-D or more; flatten the leading dimensions), weight has shape (N,), both of
the same dtype (float32, float16 or bfloat16). Accumulate in float32 and return a new tensor with
x's shape and dtype. N can be any size up to 16384 and need not be a power of two. Values can be
large (|x| up to a few thousand, so x**2 overflows float16: do not square in the input dtype);
rows can be constant or all zeros (then the output row is 0).
"""
entry_point = "rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor"
triton_reference = "triton_refs/rmsnorm.py"


def make_inputs(case, gen):
    *lead, n = case.shape
    x = randn(gen, case.shape, "float32", scale=case.get("scale", 1.0))
    x = hostile_rows(x, case.get("hostile"), gen).to(case.torch_dtype)  # constant and zero rows
    weight = randn(gen, (n,), case.dtype, scale=0.5, shift=1.0)
    if "eps" in case.params:
        return x, weight, case.eps
    return x, weight


def reference(x, weight, eps=1e-6):
    rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return x * rms * weight


visible_cases = [Case("float32", shape=(4, 256)), Case("float16", shape=(16, 1000))]
hidden_cases = [
    Case("float32", shape=(2, 3, 77), hostile="odd-sizes"),
    Case("float32", shape=(5, 4096), eps=1e-3),
    Case("float16", shape=(1, 12288)),
    Case("bfloat16", shape=(37, 2048)),
    Case("float16", shape=(4, 4099), scale=300.0, hostile="large-magnitude"),
    Case("float32", shape=(3, 5003), scale=1e4, hostile="large-magnitude"),
    Case("float32", shape=(7, 1000), hostile="constant-rows"),
    Case("float16", shape=(6, 2047), scale=100.0, hostile="constant-rows"),
]
perf_cases = [
    Case("float16", shape=(16384, 4096)),
    Case("bfloat16", shape=(4096, 8192)),
    Case("float32", shape=(8192, 4096)),
]


def cost(case):
    *lead, n = case.shape
    rows = 1
    for d in lead:
        rows *= d
    item = 4 if case.dtype == "float32" else 2
    return {"flops": 4 * rows * n, "bytes": (2 * rows * n + n) * item}
