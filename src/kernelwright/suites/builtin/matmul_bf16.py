"""bfloat16 GEMM in the "NT" layout of a linear layer: C = A @ B^T with B stored as (N, K)."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "matmul_bf16"
difficulty = 3
tags = ("matmul", "compute-bound", "tensor-core", "bf16")
instruction = """
Write a Triton kernel and a Python wrapper `matmul_bf16(a, b)` that returns a @ b.T for bfloat16
a of shape (M, K) and bfloat16 b of shape (N, K) (b is stored like an nn.Linear weight: row n
holds the K inputs of output column n), both contiguous. Accumulate in float32 and return a new
contiguous bfloat16 (M, N) tensor. M, N and K need not be multiples of the block sizes (any value
>= 1). Do not materialize b.T with a copy: read b's tiles transposed through pointer arithmetic
(tl.dot of an (BM, BK) tile with a (BK, BN) view of b). Performance matters at LLM shapes
(thousands of rows and columns); the GPU is an H200, where bf16 tensor cores are the point.
"""
entry_point = "matmul_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/matmul_bf16.py"
# outputs are O(1) (inputs scaled by K**-0.25); bf16 output rounding alone is 2**-9 relative
tolerances = {"bfloat16": (1.2e-2, 2e-2)}


def make_inputs(case, gen):
    scale = case.K ** -0.25
    return (randn(gen, (case.M, case.K), case.dtype, scale=scale),
            randn(gen, (case.N, case.K), case.dtype, scale=scale))


def reference(a, b):
    return a @ b.T


visible_cases = [Case("bfloat16", M=64, N=64, K=64), Case("bfloat16", M=128, N=96, K=80)]
hidden_cases = [
    Case("bfloat16", M=1, N=130, K=33),
    Case("bfloat16", M=257, N=129, K=300),
    Case("bfloat16", M=100, N=1, K=1000),
    Case("bfloat16", M=128, N=192, K=1024),
]
perf_cases = [
    Case("bfloat16", M=8192, N=8192, K=8192),
    Case("bfloat16", M=4096, N=14336, K=4096),  # Llama-3-8B MLP up-projection at 4k tokens
    Case("bfloat16", M=16, N=8192, K=8192),     # decode-time GEMV-like shape: bandwidth-bound
]


def cost(case):
    return {"flops": 2 * case.M * case.N * case.K,
            "bytes": (case.M * case.K + case.N * case.K + case.M * case.N) * 2, "math": "bfloat16"}
