"""Layer normalization backward: input, weight and bias gradients from the saved mean and rstd."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_rows
from kernelwright.tasks.inputs import randn

name = "layernorm_backward"
difficulty = 4
tags = ("normalization", "backward", "reduction", "memory-bound")
instruction = """
Write Triton kernel(s) and a Python wrapper `layernorm_backward(dy, x, weight, mean, rstd)` that
computes the gradients of out = (x - mean) * rstd * weight + bias (layer norm over the last
dimension) given the output gradient dy. Shapes and dtypes:
    x, dy        (M, N), contiguous, dtype float32, float16 or bfloat16 (the same for both)
    weight       (N,), same dtype as x
    mean, rstd   (M,), float32: the statistics saved by the forward pass (rstd = 1/sqrt(var+eps));
                 use them as given, do not recompute them from x
Return a tuple (dx, dweight, dbias) of new tensors:
    xhat    = (x - mean[:, None]) * rstd[:, None]
    wdy     = dy * weight
    dx      = rstd[:, None] * (wdy - xhat * mean(xhat * wdy, -1) - mean(wdy, -1))   # (M, N), x's dtype
    dweight = sum over rows of dy * xhat                                          # (N,), weight's dtype
    dbias   = sum over rows of dy                                                 # (N,), weight's dtype
(means over the last dimension, with keepdim). Compute everything in float32 and round once at
the end. M is anything from 1 to 65536 and N from 1 to 8192 (neither necessarily a power of two).
x can lie far from zero (values around 1000 with spread 1) and rows of x can be constant (then
xhat is ~0 and rstd ~1/sqrt(eps)).
The column sums over M rows are the hard part: a per-row kernel must not serialize on them; e.g.
write per-program float32 partial sums and reduce them in a second kernel (atomics are allowed
but make the result order-dependent; it still has to meet the tolerances).
"""
entry_point = ("layernorm_backward(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,"
               " rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]")
triton_reference = "triton_refs/layernorm_backward.py"
# dweight/dbias are sums of M terms of either sign: absolute parts cover sums that cancel to ~0
tolerances = {"float32": (1e-4, 1e-4), "float16": (2e-3, 4e-3), "bfloat16": (1.6e-2, 2e-2)}
_EPS = 1e-5


def make_inputs(case, gen):
    m, n = case.shape
    x = randn(gen, (m, n), "float32", scale=case.get("scale", 1.0), shift=case.get("shift", 0.0))
    x = hostile_rows(x, case.get("hostile"), gen).to(case.torch_dtype)  # constant rows
    weight = randn(gen, (n,), case.dtype, scale=0.5, shift=1.0)
    dy = randn(gen, (m, n), case.dtype)
    # what a forward pass would have saved (float32 statistics of the rounded x)
    xf = x.float()
    mean = xf.mean(dim=-1)
    rstd = torch.rsqrt((xf - mean[:, None]).pow(2).mean(dim=-1) + _EPS)
    return dy, x, weight, mean, rstd


def reference(dy, x, weight, mean, rstd):
    xhat = (x - mean[:, None]) * rstd[:, None]
    wdy = dy * weight
    c1 = (xhat * wdy).mean(dim=-1, keepdim=True)
    c2 = wdy.mean(dim=-1, keepdim=True)
    dx = rstd[:, None] * (wdy - xhat * c1 - c2)
    dweight = (dy * xhat).sum(dim=0)
    dbias = dy.sum(dim=0)
    return dx.to(x.dtype), dweight.to(weight.dtype), dbias.to(weight.dtype)


visible_cases = [Case("float32", shape=(64, 256)), Case("float16", shape=(100, 1000))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(1, 4096)),
    Case("float32", shape=(300, 3), shift=2.0, hostile="odd-sizes"),
    Case("float32", shape=(257, 300), scale=3.0),
    Case("float16", shape=(65, 8192)),
    Case("bfloat16", shape=(256, 2048)),
    Case("float32", shape=(33, 1025), shift=1000.0, hostile="large-magnitude"),
    Case("float32", shape=(30, 1024), hostile="constant-rows"),
    Case("float16", shape=(21, 777), hostile="constant-rows"),
]
perf_cases = [
    Case("float16", shape=(16384, 4096)),
    Case("bfloat16", shape=(32768, 8192)),
    Case("float32", shape=(8192, 4096)),
]


def cost(case):
    m, n = case.shape
    item = case.torch_dtype.itemsize
    # read dy, x, weight, mean, rstd; write dx, dweight, dbias
    return {"flops": 14 * m * n, "bytes": 3 * m * n * item + 3 * n * item + 2 * m * 4}
