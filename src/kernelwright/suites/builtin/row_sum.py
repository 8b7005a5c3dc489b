"""Sum of each row of a 2-D tensor (a reduction over the last dimension)."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "row_sum"
difficulty = 1
tags = ("reduction", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `row_sum(x)` that returns the sum of each row of a 2-D
contiguous tensor x of shape (M, N), like x.sum(dim=-1): a new tensor of shape (M,) and x's dtype
(float32, float16 or bfloat16). Accumulate in float32 (never in float16/bfloat16) and round once
at the end. M can be 1 and N can be anything from 1 to 2**20, not necessarily a power of two, so
rows may not fit in one block; also do well when M is small and N large.
Sums of a random row are often close to zero, so the float32 tolerance has an absolute part
(atol=1e-4) sized for float32 accumulation error on rows this long.
"""
entry_point = "row_sum(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/row_sum.py"
tolerances = {"float32": (1e-4, 1e-5)}
numerics = ("long-rows", "odd-sizes")  # not required by its tags; declared, so checked


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype, shift=case.get("shift", 0.0)),)


def reference(x):
    return x.sum(dim=-1)


visible_cases = [Case("float32", shape=(8, 1000)), Case("float16", shape=(33, 4096))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(1, 300_000), shift=0.5, hostile="long-rows"),
    Case("float32", shape=(100, 3), hostile="odd-sizes"),
    Case("float16", shape=(5, 20_001)),
    Case("bfloat16", shape=(64, 2048)),
]
perf_cases = [
    Case("float32", shape=(8192, 8192)),
    Case("float16", shape=(32768, 4096)),
    Case("bfloat16", shape=(16, 1 << 22)),  # few long rows: one program per row is too little parallelism
]


def cost(case):
    m, n = case.shape
    return {"flops": m * n, "bytes": (m * n + m) * case.torch_dtype.itemsize}
