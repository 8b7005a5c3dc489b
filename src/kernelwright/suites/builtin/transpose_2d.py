"""Out-of-place transpose of a 2-D matrix into a new contiguous tensor."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "transpose_2d"
difficulty = 2
tags = ("data-movement", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `transpose_2d(x)` that returns x.T as a new contiguous
tensor: x is a contiguous (M, N) tensor of dtype float32, float16 or bfloat16; return out of shape
(N, M) and the same dtype with out[j, i] = x[i, j], bit-exact (x.t().contiguous()). M and N are any
values >= 1, not multiples of the tile size. Both reads and writes should be coalesced (tile the
matrix; Triton handles the in-tile shuffle). Do not modify x.
"""
entry_point = "transpose_2d(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/transpose_2d.py"
deterministic = True
tolerances = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype),)


def reference(x):
    return x.t().contiguous()


visible_cases = [Case("float32", shape=(64, 128)), Case("float16", shape=(100, 37))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(1, 1000)),
    Case("float32", shape=(777, 3)),
    Case("float16", shape=(257, 129)),
    Case("bfloat16", shape=(128, 512)),
]
perf_cases = [
    Case("float32", shape=(8192, 8192)),
    Case("float16", shape=(16384, 8192)),
    Case("bfloat16", shape=(4096, 32768)),
]


def cost(case):
    m, n = case.shape
    return {"flops": 0, "bytes": 2 * m * n * case.torch_dtype.itemsize}
