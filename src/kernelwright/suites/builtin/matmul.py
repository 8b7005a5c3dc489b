"""Dense matrix product C = A @ B (M x K times K x N)."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "matmul"
difficulty = 3
tags = ("matmul", "compute-bound", "tensor-core")
instruction = """
Write a Triton kernel and a Python wrapper `matmul(a, b)` that returns the matrix product a @ b
for a of shape (M, K) and b of shape (K, N), both contiguous and of the same dtype (float16,
bfloat16 or float32). Accumulate in float32 and return a new (M, N) tensor of the inputs' dtype.
M, N and K need not be multiples of the block sizes.
TF32 policy: for float32 inputs, TF32 tensor-core math is allowed (Triton's default for tl.dot);
the float32 tolerance below is set for it.
"""
entry_point = "matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/matmul.py"
# Inputs are scaled by K**-0.25 each, so outputs are O(1) whatever K is and one tolerance fits.
tolerances = {
    "float32": (5e-3, 5e-3),  # TF32 allowed
    "float16": (2e-3, 4e-3),
    "bfloat16": (1.2e-2, 2e-2),
}


def make_inputs(case, gen):
    scale = case.K ** -0.25
    a = randn(gen, (case.M, case.K), case.dtype, scale=scale)
    b = randn(gen, (case.K, case.N), case.dtype, scale=scale)
    return a, b


def reference(a, b):
    return a @ b


visible_cases = [Case("float16", M=64, N=64, K=64), Case("float32", M=128, N=96, K=80)]
hidden_cases = [
    Case("float16", M=1, N=130, K=33),
    Case("float16", M=257, N=129, K=300),
    Case("float32", M=100, N=200, K=64),
    Case("bfloat16", M=256, N=256, K=512),
]
perf_cases = [
    Case("float16", M=4096, N=4096, K=4096),
    Case("bfloat16", M=8192, N=8192, K=2048),
    Case("float32", M=2048, N=2048, K=2048),
]


def cost(case):
    item = 4 if case.dtype == "float32" else 2
    flops = 2 * case.M * case.N * case.K
    return {"flops": flops, "bytes": (case.M * case.K + case.K * case.N + case.M * case.N) * item,
            "math": "tf32" if case.dtype == "float32" else case.dtype}
