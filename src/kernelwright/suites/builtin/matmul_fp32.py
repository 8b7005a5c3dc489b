"""Single-precision matrix product C = A @ B with full IEEE float32 accuracy (no TF32)."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "matmul_fp32"
difficulty = 3
tags = ("matmul", "compute-bound", "fp32")
instruction = """
Write a Triton kernel and a Python wrapper `matmul_fp32(a, b)` that returns the matrix product
a @ b for float32 a of shape (M, K) and float32 b of shape (K, N), both contiguous, as a new
float32 (M, N) tensor. M, N and K need not be multiples of the block sizes (any value >= 1).
TF32 policy: TF32 is NOT allowed. Products must be formed in full float32 (in Triton:
tl.dot(a, b, acc, input_precision="ieee"), or FMAs), accumulated in float32. The tolerance
(atol=1e-4, rtol=1e-4 on outputs of magnitude ~1) is about 10x looser than float32 rounding
needs but 10x tighter than TF32's 10-bit mantissa, so TF32 results fail.
"""
entry_point = "matmul_fp32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/matmul_fp32.py"
# inputs are scaled by K**-0.25 each so outputs are O(1) for any K and one tolerance fits
tolerances = {"float32": (1e-4, 1e-4)}


def make_inputs(case, gen):
    scale = case.K ** -0.25
    return randn(gen, (case.M, case.K), case.dtype, scale=scale), randn(gen, (case.K, case.N), case.dtype, scale=scale)


def reference(a, b):
    return a @ b


visible_cases = [Case("float32", M=64, N=64, K=64), Case("float32", M=128, N=96, K=80)]
hidden_cases = [
    Case("float32", M=1, N=130, K=33),
    Case("float32", M=257, N=129, K=300),
    Case("float32", M=100, N=1, K=1000),
    Case("float32", M=64, N=128, K=1024),
]
perf_cases = [
    Case("float32", M=4096, N=4096, K=4096),
    Case("float32", M=8192, N=2048, K=1024),
]


def cost(case):
    return {"flops": 2 * case.M * case.N * case.K,
            "bytes": (case.M * case.K + case.K * case.N + case.M * case.N) * 4, "math": "float32"}
