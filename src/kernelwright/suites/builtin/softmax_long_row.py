"""Softmax over very long rows (up to 256K columns) with few rows: the row must be split over
several programs (a split online-softmax), since one program per row leaves the GPU idle."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_rows
from kernelwright.tasks.inputs import randn

name = "softmax_long_row"
difficulty = 3
tags = ("reduction", "softmax", "online-softmax", "memory-bound")
instruction = """
Write Triton kernel(s) and a Python wrapper `softmax_long_row(x)` that computes the softmax of a
2-D contiguous tensor x of shape (M, N) over its last dimension, like torch.softmax(x, dim=-1).
Here rows are long (N up to 262144, any value from 1, not necessarily a power of two) and M is
small (from 1 to a few hundred), so a row does not fit in one program's registers and one program
per row would use only a few of the GPU's SMs: split each row over several programs, e.g. with
per-chunk (max, sum of exp) statistics combined with the online-softmax rescaling
sum_total = sum_c s_c * exp(m_c - m_total).
x is float32, float16 or bfloat16 with values of magnitude up to about 2e4 (a row may lie entirely
around +1000 or -20000); compute in float32, subtract the row maximum for stability, and return a
new tensor of x's shape and dtype. Rows can be constant, and entries can be -inf (masked
positions, output 0), even a whole chunk of a row; a row always has at least one finite entry.
Outputs are tiny (about 1/N), so the tolerances are mostly relative: float32 atol 1e-10 rtol 1e-4;
float16 atol 1e-7 (its subnormal spacing) rtol 3e-3; bfloat16 atol 1e-10 rtol 1.6e-2.
"""
entry_point = "softmax_long_row(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/softmax_long_row.py"
tolerances = {"float32": (1e-10, 1e-4), "float16": (1e-7, 3e-3), "bfloat16": (1e-10, 1.6e-2)}


def make_inputs(case, gen):
    # scale/shift set magnitude and sign; `hostile` adds constant rows or -inf entries
    x = randn(gen, case.shape, "float32", scale=case.get("scale", 3.0), shift=case.get("shift", 0.0))
    return (hostile_rows(x, case.get("hostile"), gen).to(case.torch_dtype),)


def reference(x):
    return torch.softmax(x, dim=-1)


visible_cases = [Case("float32", shape=(4, 10_000)), Case("float16", shape=(2, 65_536))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(1, 262_144), scale=10.0, hostile="long-rows"),
    Case("float32", shape=(3, 100_003), hostile="odd-sizes"),
    Case("float16", shape=(5, 4097)),
    Case("bfloat16", shape=(2, 131_072)),
    # numerically hostile (docs/tasks.md): without max subtraction exp overflows or gives 0/0
    Case("float32", shape=(2, 65_537), shift=1000.0, hostile="large-magnitude"),
    Case("float16", shape=(3, 20_011), scale=300.0, shift=-20_000.0, hostile="all-negative+large-magnitude"),
    Case("float32", shape=(4, 70_001), hostile="constant-rows"),
    Case("float32", shape=(3, 50_021), scale=10.0, hostile="neg-inf-mask"),
]
perf_cases = [
    Case("float32", shape=(64, 262_144)),
    Case("float16", shape=(128, 262_144)),
    Case("bfloat16", shape=(256, 262_144)),
]


def cost(case):
    m, n = case.shape
    return {"flops": 5 * m * n, "bytes": 2 * m * n * case.torch_dtype.itemsize}
