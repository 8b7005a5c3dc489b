"""Bias add fused with the exact (erf) GELU, as after a linear layer: gelu(x + bias)."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "bias_gelu"
difficulty = 2
tags = ("elementwise", "activation", "fused", "broadcast", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `bias_gelu(x, bias)` that returns gelu(x + bias) with
the EXACT erf form of GELU (torch.nn.functional.gelu(..., approximate="none")):
    gelu(z) = 0.5 * z * (1 + erf(z / sqrt(2)))
x has shape (M, N) and is contiguous; bias has shape (N,) and is broadcast over the rows. Both have
the same dtype (float32, float16 or bfloat16). Compute z = x + bias and the activation in float32
without rounding z to the input dtype, and return a new (M, N) tensor of x's dtype; do not modify
the inputs. M and N are arbitrary (N need not be a power of two or a multiple of the block size).
(tl.math.erf exists; erf must be accurate to float32 precision, so do not use the tanh form.)
x can reach |x| of a few hundred: gelu of a large negative z is (-)0 and of a large positive z is z.
"""
entry_point = "bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/bias_gelu.py"
deterministic = True


def make_inputs(case, gen):
    m, n = case.shape
    return randn(gen, (m, n), case.dtype, scale=case.get("scale", 2.0)), randn(gen, (n,), case.dtype)


def reference(x, bias):
    z = x + bias
    return 0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0)))


visible_cases = [Case("float32", shape=(16, 256)), Case("float16", shape=(33, 300))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(7, 4097), hostile="odd-sizes"),
    Case("float16", shape=(300, 3)),
    Case("bfloat16", shape=(128, 1024)),
    Case("float32", shape=(9, 1001), scale=100.0, hostile="large-magnitude"),
    Case("float16", shape=(17, 255), scale=150.0, hostile="large-magnitude"),
]
perf_cases = [
    Case("float16", shape=(8192, 16384)),
    Case("bfloat16", shape=(16384, 8192)),
    Case("float32", shape=(8192, 4096)),
]


def cost(case):
    m, n = case.shape
    return {"flops": 10 * m * n, "bytes": (2 * m * n + n) * case.torch_dtype.itemsize}
