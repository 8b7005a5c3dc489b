"""Row-wise int8 dequantization: q * scale[row], back to a floating dtype."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import rand, randint

name = "dequantize_int8_rowwise"
difficulty = 1
tags = ("quantization", "elementwise", "broadcast", "integer-input", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `dequantize_int8_rowwise(q, scale)` that returns
    out[i, j] = float(q[i, j]) * scale[i]
q is a contiguous (M, N) int8 tensor (values in [-127, 127]); scale is a contiguous (M,) tensor
whose dtype (float32, float16 or bfloat16) is also the output dtype. Compute the product in float32
(it is exact there) and round once to scale's dtype; return a new (M, N) tensor. M and N are any
values >= 1 (not necessarily powers of two); a row's scale may be 0 (then its output row is 0).
Do not modify the inputs.
"""
entry_point = "dequantize_int8_rowwise(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/dequantize_int8_rowwise.py"
deterministic = True


def make_inputs(case, gen):
    m, n = case.shape
    q = randint(gen, (m, n), -127, 128, dtype="int8")
    scale = rand(gen, (m,), "float32", low=1e-3, high=0.05)
    zero_rows = case.get("zero_rows", 0)
    if zero_rows:
        scale[::max(1, m // zero_rows)][:zero_rows] = 0.0
    return q, scale.to(case.torch_dtype)


def reference(q, scale):
    # q is an integer tensor, so it is not upcast: the product is formed in scale's dtype
    return q.to(scale.dtype) * scale[:, None]


visible_cases = [Case("float32", shape=(16, 1000)), Case("float16", shape=(64, 4096))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(10, 777), hostile="odd-sizes"),
    Case("float16", shape=(300, 3)),
    Case("float32", shape=(2, 70_001)),
    Case("bfloat16", shape=(128, 2048)),
    Case("float16", shape=(9, 1001), zero_rows=3, hostile="zero-rows"),
]
perf_cases = [
    Case("float16", shape=(16384, 8192)),
    Case("bfloat16", shape=(32768, 4096)),
    Case("float32", shape=(8192, 8192)),
]


def cost(case):
    m, n = case.shape
    item = case.torch_dtype.itemsize
    return {"flops": m * n, "bytes": m * n + m * item + m * n * item}
