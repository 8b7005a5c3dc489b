"""Maximum of each row of a 2-D tensor (a reduction over the last dimension)."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "row_max"
difficulty = 1
tags = ("reduction", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `row_max(x)` that returns the maximum of each row of a
2-D contiguous tensor x of shape (M, N), like x.amax(dim=-1): a new tensor of shape (M,) and x's
dtype (float32, float16 or bfloat16). The result is exact (no rounding is involved). M can be 1
and N anything from 1 to 2**20, not necessarily a power of two. Rows can be entirely negative, so
masked-out lanes and initial values must be -inf, not 0. Inputs contain no NaN.
"""
entry_point = "row_max(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/row_max.py"
deterministic = True
tolerances = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}
# not required by its tags, declared (and so checked) anyway: masked lanes that load 0 fail these
numerics = ("all-negative", "long-rows", "odd-sizes")


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype, scale=case.get("scale", 1.0), shift=case.get("shift", 0.0)),)


def reference(x):
    return x.amax(dim=-1)


visible_cases = [Case("float32", shape=(8, 1000)), Case("float16", shape=(33, 4096))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(3, 777), shift=-50.0, hostile="all-negative"),
    Case("float32", shape=(1, 300_000), scale=100.0, hostile="long-rows"),
    Case("float16", shape=(100, 3), shift=-5.0, hostile="all-negative+odd-sizes"),
    Case("bfloat16", shape=(64, 2048)),
]
perf_cases = [
    Case("float32", shape=(8192, 8192)),
    Case("float16", shape=(32768, 4096)),
    Case("bfloat16", shape=(16, 1 << 22)),
]


def cost(case):
    m, n = case.shape
    return {"flops": m * n, "bytes": (m * n + m) * case.torch_dtype.itemsize}
