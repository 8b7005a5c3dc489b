"""GELU activation, tanh approximation (the GPT-2 / `approximate="tanh"` form), elementwise."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "gelu"
difficulty = 1
tags = ("elementwise", "activation", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `gelu(x)` that applies the GELU activation in its
tanh approximation elementwise (torch.nn.functional.gelu(x, approximate="tanh")):
    gelu(x) = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))
This is NOT the exact erf form. x is a contiguous tensor of any shape (including sizes that are not
a multiple of the block size) and dtype float32, float16 or bfloat16. Compute in float32 and return
a new tensor of x's shape and dtype; do not modify x. Inputs reach |x| of a few thousand (float16
too), so make sure large negative inputs give (-)0 and large positive inputs give x, never NaN.
Hint: 0.5 * (1 + tanh(u)) == sigmoid(2u); tl.* and tl.math have no tanh (only libdevice does).
"""
entry_point = "gelu(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/gelu.py"
deterministic = True


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype, scale=case.get("scale", 2.0)),)


def reference(x):
    # written out (rather than F.gelu) so it is obviously the tanh form, in any dtype
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


visible_cases = [Case("float32", shape=(1000,)), Case("float16", shape=(64, 300))]
hidden_cases = [
    Case("float32", shape=(1,)),
    Case("float32", shape=(3, 5, 7), scale=5.0, hostile="odd-sizes"),
    Case("float16", shape=(98_765,), scale=4.0),
    Case("bfloat16", shape=(257, 129)),
    # numerically hostile (docs/tasks.md): exp(2u) of the tanh form overflows for |x| >~ 20
    Case("float32", shape=(4099,), scale=100.0, hostile="large-magnitude"),
    Case("float16", shape=(33, 301), scale=800.0, hostile="large-magnitude"),
]
perf_cases = [
    Case("float32", shape=(1 << 25,)),
    Case("float16", shape=(8192, 8192)),
    Case("bfloat16", shape=(16384, 4096)),
]


def cost(case):
    n = math.prod(case.shape)
    return {"flops": 12 * n, "bytes": 2 * n * case.torch_dtype.itemsize}
