"""Batched matrix product C[i] = A[i] @ B[i] over a leading batch dimension."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "bmm"
difficulty = 3
tags = ("matmul", "batched", "compute-bound", "tensor-core")
instruction = """
Write a Triton kernel and a Python wrapper `bmm(a, b)` that returns the batched matrix product
torch.bmm(a, b): a has shape (B, M, K) and b shape (B, K, N), both contiguous and of the same dtype
(float16, bfloat16 or float32); return a new contiguous (B, M, N) tensor of that dtype with
out[i] = a[i] @ b[i], accumulated in float32. B, M, N and K are any values >= 1 (not multiples of
the block sizes); B can be large with small matrices (e.g. attention-head-sized 128 x 128) or small
with large matrices, so parallelize over the batch as well as over output tiles (one launch).
TF32 policy: for float32 inputs TF32 tensor-core math is allowed (Triton's default for tl.dot);
the float32 tolerance (5e-3) is set for it.
"""
entry_point = "bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/bmm.py"
# inputs scaled by K**-0.25 each, so outputs are O(1) for any K
tolerances = {"float32": (5e-3, 5e-3), "float16": (2e-3, 4e-3), "bfloat16": (1.2e-2, 2e-2)}


def make_inputs(case, gen):
    scale = case.K ** -0.25
    return (randn(gen, (case.B, case.M, case.K), case.dtype, scale=scale),
            randn(gen, (case.B, case.K, case.N), case.dtype, scale=scale))


def reference(a, b):
    return torch.bmm(a, b)


visible_cases = [Case("float16", B=4, M=64, N=64, K=64), Case("float32", B=3, M=40, N=72, K=50)]
hidden_cases = [
    Case("float16", B=1, M=1, N=33, K=17),
    Case("float16", B=7, M=65, N=130, K=96),
    Case("float32", B=16, M=16, N=16, K=16),
    Case("float16", B=2, M=200, N=3, K=300),
    Case("bfloat16", B=8, M=128, N=128, K=256),
]
perf_cases = [
    Case("float16", B=512, M=128, N=128, K=1024),
    Case("bfloat16", B=8, M=4096, N=4096, K=1024),
    Case("float32", B=64, M=512, N=512, K=512),
]


def cost(case):
    item = case.torch_dtype.itemsize
    flops = 2 * case.B * case.M * case.N * case.K
    return {"flops": flops, "bytes": case.B * (case.M * case.K + case.K * case.N + case.M * case.N) * item,
            "math": "tf32" if case.dtype == "float32" else case.dtype}
