"""Layer normalization over the last dimension with learned weight and bias (forward)."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_rows
from kernelwright.tasks.inputs import randn

name = "layernorm"
difficulty = 2
tags = ("normalization", "reduction", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `layernorm(x, weight, bias, eps=1e-5)` that computes
layer normalization over the last dimension, like
torch.nn.functional.layer_norm(x, (N,), weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    var  = ((x - mean) ** 2).mean(-1, keepdim=True)        # biased variance
    out  = (x - mean) / sqrt(var + eps) * weight + bias
x has shape (..., N) (2-D or more; flatten the leading dimensions) and is contiguous; weight and
bias have shape (N,); all three share one dtype (float32, float16 or bfloat16). Accumulate in
float32 and return a new tensor of x's shape and dtype. N is anything from 1 to 16384 (not
necessarily a power of two). Rows can have a mean a hundred times larger than their standard
deviation and lie far from zero (e.g. values around 1000 with standard deviation 10, or 8 in
float16), so compute the variance stably (subtract the mean first, or Welford); E[x^2] - E[x]^2
in float32 is not accurate enough there. Rows can be constant (variance 0: the output row is
bias).
"""
entry_point = ("layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5)"
               " -> torch.Tensor")
triton_reference = "triton_refs/layernorm.py"
# float32 atol: with a row mean of 100, x - mean alone carries ~1e-5 of rounding error in float32
tolerances = {"float32": (5e-5, 1e-4)}


def make_inputs(case, gen):
    n = case.shape[-1]
    x = randn(gen, case.shape, "float32", scale=case.get("scale", 1.0), shift=case.get("shift", 0.0))
    x = hostile_rows(x, case.get("hostile"), gen).to(case.torch_dtype)  # constant rows
    weight = randn(gen, (n,), case.dtype, scale=0.5, shift=1.0)
    bias = randn(gen, (n,), case.dtype, scale=0.5)
    if "eps" in case.params:
        return x, weight, bias, case.eps
    return x, weight, bias


def reference(x, weight, bias, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


visible_cases = [Case("float32", shape=(4, 256)), Case("float16", shape=(16, 1000))]
hidden_cases = [
    Case("float32", shape=(2, 3, 77), hostile="odd-sizes"),
    Case("float32", shape=(5, 4096), shift=100.0, hostile="large-magnitude"),
    Case("float32", shape=(3, 2), eps=1e-3),
    Case("float32", shape=(2, 16384), scale=3.0, shift=-2.0),
    Case("float16", shape=(1, 12288)),
    Case("bfloat16", shape=(37, 2048)),
    Case("float32", shape=(7, 3001), shift=1000.0, scale=10.0, hostile="large-magnitude"),
    Case("float16", shape=(6, 1001), shift=1000.0, scale=8.0, hostile="large-magnitude"),
    # constant rows of a dyadic value over a power-of-two N: the float32 mean is exact
    Case("float32", shape=(7, 1024), hostile="constant-rows"),
    Case("float16", shape=(5, 999), hostile="constant-rows"),
]
perf_cases = [
    Case("float16", shape=(16384, 4096)),
    Case("bfloat16", shape=(8192, 8192)),
    Case("float32", shape=(8192, 4096)),
]


def cost(case):
    *lead, n = case.shape
    rows = math.prod(lead)
    return {"flops": 8 * rows * n, "bytes": (2 * rows * n + 2 * n) * case.torch_dtype.itemsize}
