"""A linear layer with fused bias and GELU epilogue: gelu_tanh(x @ W^T + bias)."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "linear_gelu"
difficulty = 3
tags = ("matmul", "fused", "epilogue", "activation", "compute-bound", "tensor-core")
instruction = """
Write a Triton kernel and a Python wrapper `linear_gelu(x, weight, bias)` that computes a linear
layer followed by GELU in ONE kernel (bias add and activation fused into the matmul epilogue, no
intermediate (M, N) tensor in memory):
    z   = x @ weight.T + bias                     # accumulated in float32, not rounded
    out = 0.5 * z * (1 + tanh(sqrt(2/pi) * (z + 0.044715 * z**3)))   # GELU, tanh approximation
x is (M, K), weight is (N, K) (the nn.Linear layout: read it transposed through pointer arithmetic,
do not copy it), bias is (N,); all contiguous and of one dtype: float16, bfloat16 or float32.
Return a new (M, N) tensor of that dtype. M, N, K are any values >= 1. The bias can be large
(|z| up to a few hundred): GELU of a large negative z is (-)0 and of a large positive z is z,
never NaN.
TF32 policy: for float32 inputs TF32 tensor-core math is allowed (Triton's default for tl.dot);
the float32 tolerance (5e-3) is set for it. tl.* and tl.math have no tanh (only libdevice); use
0.5 * (1 + tanh(u)) == sigmoid(2u).
"""
entry_point = "linear_gelu(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/linear_gelu.py"
tolerances = {"float32": (5e-3, 5e-3), "float16": (2e-3, 4e-3), "bfloat16": (1.2e-2, 2e-2)}


def make_inputs(case, gen):
    scale = case.K ** -0.25  # z is O(1) for any K, so GELU's curved region is exercised
    x = randn(gen, (case.M, case.K), case.dtype, scale=scale)
    weight = randn(gen, (case.N, case.K), case.dtype, scale=scale)
    bias = randn(gen, (case.N,), case.dtype, scale=case.get("bias_scale", 0.5))
    return x, weight, bias


def reference(x, weight, bias):
    z = x @ weight.T + bias
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * z * (1.0 + torch.tanh(c * (z + 0.044715 * z * z * z)))


visible_cases = [Case("float16", M=64, N=64, K=64), Case("float32", M=100, N=96, K=80)]
hidden_cases = [
    Case("float16", M=1, N=130, K=33),
    Case("float16", M=257, N=129, K=300, hostile="odd-sizes"),
    Case("float32", M=33, N=1, K=1000),
    Case("bfloat16", M=256, N=512, K=256),
    # numerically hostile (docs/tasks.md): a tanh or sigmoid built from exp overflows for |z| >~ 20
    Case("float16", M=33, N=129, K=64, bias_scale=100.0, hostile="large-magnitude"),
    Case("float32", M=17, N=255, K=96, bias_scale=100.0, hostile="large-magnitude"),
]
perf_cases = [
    Case("float16", M=8192, N=16384, K=4096),
    Case("bfloat16", M=4096, N=11008, K=4096),
    Case("float32", M=4096, N=4096, K=1024),
]


def cost(case):
    item = case.torch_dtype.itemsize
    return {"flops": 2 * case.M * case.N * case.K + 12 * case.M * case.N,
            "bytes": (case.M * case.K + case.N * case.K + case.N + case.M * case.N) * item,
            "math": "tf32" if case.dtype == "float32" else case.dtype}
