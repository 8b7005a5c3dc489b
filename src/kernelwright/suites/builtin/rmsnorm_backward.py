"""RMS normalization backward: input and weight gradients from the saved rstd."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_rows
from kernelwright.tasks.inputs import randn

name = "rmsnorm_backward"
difficulty = 3
tags = ("normalization", "backward", "reduction", "memory-bound")
instruction = """
Write Triton kernel(s) and a Python wrapper `rmsnorm_backward(dy, x, weight, rstd)` that computes
the gradients of out = x * rstd[:, None] * weight (RMS norm over the last dimension) given the
output gradient dy. Shapes and dtypes:
    x, dy     (M, N), contiguous, dtype float32, float16 or bfloat16 (the same for both)
    weight    (N,), same dtype as x
    rstd      (M,), float32: saved by the forward pass, rstd = 1/sqrt(mean(x**2, -1) + eps);
              use it as given, do not recompute it
Return a tuple (dx, dweight) of new tensors:
    xhat    = x * rstd[:, None]
    wdy     = dy * weight
    dx      = rstd[:, None] * (wdy - xhat * mean(xhat * wdy, -1, keepdim=True))   # (M, N), x's dtype
    dweight = sum over rows of dy * xhat                                         # (N,), weight's dtype
Compute in float32 and round once at the end. M is anything from 1 to 65536 and N from 1 to 8192
(neither necessarily a power of two). x can be large (|x| up to a few thousand) and rows of x can
be constant or all zeros (then xhat is 0 and rstd = 1/sqrt(eps)). Do not serialize the column sum over M rows in one program;
e.g. write per-program float32 partial sums and reduce them with a second kernel.
"""
entry_point = ("rmsnorm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, rstd: torch.Tensor)"
               " -> tuple[torch.Tensor, torch.Tensor]")
triton_reference = "triton_refs/rmsnorm_backward.py"
tolerances = {"float32": (1e-4, 1e-4), "float16": (2e-3, 4e-3), "bfloat16": (1.6e-2, 2e-2)}
_EPS = 1e-6


def make_inputs(case, gen):
    m, n = case.shape
    x = randn(gen, (m, n), "float32", scale=case.get("scale", 1.0), shift=case.get("shift", 0.0))
    x = hostile_rows(x, case.get("hostile"), gen).to(case.torch_dtype)  # constant and zero rows
    weight = randn(gen, (n,), case.dtype, scale=0.5, shift=1.0)
    dy = randn(gen, (m, n), case.dtype)
    rstd = torch.rsqrt(x.float().pow(2).mean(dim=-1) + _EPS)  # as a forward pass would have saved it
    return dy, x, weight, rstd


def reference(dy, x, weight, rstd):
    xhat = x * rstd[:, None]
    wdy = dy * weight
    dx = rstd[:, None] * (wdy - xhat * (xhat * wdy).mean(dim=-1, keepdim=True))
    dweight = (dy * xhat).sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype)


visible_cases = [Case("float32", shape=(64, 256)), Case("float16", shape=(100, 1000))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(1, 4096)),
    Case("float32", shape=(300, 3), shift=2.0, hostile="odd-sizes"),
    Case("float32", shape=(257, 300), scale=3.0),
    Case("float16", shape=(65, 8192)),
    Case("bfloat16", shape=(256, 2048)),
    Case("float32", shape=(17, 2049), scale=1000.0, hostile="large-magnitude"),
    Case("float16", shape=(9, 1000), scale=300.0, hostile="large-magnitude"),
    Case("float32", shape=(30, 1001), hostile="constant-rows"),
]
perf_cases = [
    Case("float16", shape=(16384, 4096)),
    Case("bfloat16", shape=(32768, 8192)),
    Case("float32", shape=(8192, 4096)),
]


def cost(case):
    m, n = case.shape
    item = case.torch_dtype.itemsize
    return {"flops": 10 * m * n, "bytes": 3 * m * n * item + 2 * n * item + m * 4}
