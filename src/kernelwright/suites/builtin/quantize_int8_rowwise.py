"""Symmetric row-wise int8 quantization: one float32 scale per row (absmax / 127)."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import rand, randint

name = "quantize_int8_rowwise"
difficulty = 2
tags = ("quantization", "reduction", "integer-output", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `quantize_int8_rowwise(x)` that quantizes each row of
a contiguous (M, N) tensor x (float32, float16 or bfloat16) to int8 with one scale per row:
    xf     = x converted to float32
    amax   = max over the row of |xf|
    scale  = amax / 127            (float32 division)   if amax > 0   else 1.0
    q      = clamp(round(xf / scale), -127, 127) converted to int8
Return the tuple (q, scale): q a new int8 tensor of shape (M, N), scale a new float32 tensor of
shape (M,). round is round-to-nearest with ties to even (torch.round); the test inputs keep every
xf / scale at least 0.25 away from a half-integer, so any correctly rounded or approximate division
followed by round-to-nearest (e.g. floor(y + 0.5), or a rint) gives the same q, and q is compared
exactly. scale is compared with float32 tolerance. Rows may be entirely zero (then scale = 1 and
q = 0) or constant (then q = +-127), and values may be large (float32 up to ~1e8). M is any value >= 1; N any value from 1 to 65536, not necessarily a power of two.
"""
entry_point = "quantize_int8_rowwise(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]"
triton_reference = "triton_refs/quantize_int8_rowwise.py"
deterministic = True
reference_in_float64 = False  # rounding to integers is the point: evaluate exactly as specified


def make_inputs(case, gen):
    m, n = case.shape
    # Build x = v * 2**e: v = k + u with integer k in [-126, 126] and |u| <= 0.2, one entry per
    # row set to +-127 exactly, e a random power-of-two exponent per row. Then amax = 127 * 2**e
    # and scale = 2**e exactly, and x / scale = v stays >= 0.25 from any rounding tie even after
    # x is rounded to bfloat16 (whose spacing is 0.5 for |v| in [64, 128)).
    k = randint(gen, (m, n), -126, 127).float()
    u = rand(gen, (m, n), low=-0.2, high=0.2)
    v = k + u
    pos = randint(gen, (m, 1), 0, n)
    sign = randint(gen, (m, 1), 0, 2).float() * 2 - 1
    v.scatter_(1, pos, 127.0 * sign)
    low, high = case.get("exp_range", (-8, 4))
    e = randint(gen, (m, 1), low, high).float()
    if case.get("constant_rows", 0):  # every third row: +-127 * 2**e everywhere
        v[::3] = v[::3].gather(1, pos[::3]).expand(-1, n)
    x = v * torch.exp2(e)
    zero_rows = case.get("zero_rows", 0)
    if zero_rows:
        x[::max(1, m // zero_rows)][:zero_rows] = 0.0
    return (x.to(case.torch_dtype),)


def reference(x):
    xf = x.float()
    amax = xf.abs().amax(dim=-1)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(xf / scale[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scale


visible_cases = [Case("float32", shape=(16, 1000)), Case("float16", shape=(64, 4096))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(10, 777), zero_rows=3, hostile="zero-rows+odd-sizes"),
    Case("float32", shape=(2, 65_536)),
    Case("float16", shape=(300, 3)),
    Case("bfloat16", shape=(128, 2048), zero_rows=1, hostile="zero-rows"),
    Case("float32", shape=(7, 1001), exp_range=(12, 20), hostile="large-magnitude"),
    Case("float16", shape=(9, 333), exp_range=(4, 8), constant_rows=1, hostile="constant-rows+large-magnitude"),
    Case("float32", shape=(6, 1024), constant_rows=1, zero_rows=1, hostile="constant-rows+zero-rows"),
]
perf_cases = [
    Case("float16", shape=(16384, 8192)),
    Case("bfloat16", shape=(32768, 4096)),
    Case("float32", shape=(8192, 8192)),
]


def cost(case):
    m, n = case.shape
    return {"flops": 3 * m * n, "bytes": m * n * case.torch_dtype.itemsize + m * n + 4 * m}
