"""Index of the maximum of each row of a 2-D tensor."""

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import rand, randint, randn

name = "row_argmax"
difficulty = 2
tags = ("reduction", "argmax", "integer-output", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `row_argmax(x)` that returns, for each row of a 2-D
contiguous tensor x of shape (M, N), the column index of its maximum, like x.argmax(dim=-1): a new
int64 tensor of shape (M,). x is float32, float16 or bfloat16 without NaN. If a row's maximum
occurs more than once, return the smallest such index (the test inputs have a unique maximum per
row, so this rule is never exercised). Indices are compared exactly. M can be 1 and N anything
from 1 to 2**20, not necessarily a power of two; rows can be entirely negative.
"""
entry_point = "row_argmax(x: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/row_argmax.py"
deterministic = True
reference_in_float64 = False  # an index output; no arithmetic to make exact
# not required by its tags, declared (and so checked) anyway: masked lanes that load 0 fail these
numerics = ("all-negative", "long-rows", "odd-sizes")


def make_inputs(case, gen):
    m, n = case.shape
    # values in [-3, 3] plus one planted maximum in (3.25, 4] per row: a unique maximum even
    # after rounding to bfloat16, at a uniformly random position
    x = randn(gen, (m, n)).clamp_(-3.0, 3.0)
    pos = randint(gen, (m, 1), 0, n)
    x.scatter_(1, pos, rand(gen, (m, 1), low=3.25, high=4.0))
    x += case.get("shift", 0.0)
    return (x.to(case.torch_dtype),)


def reference(x):
    return x.argmax(dim=-1)


visible_cases = [Case("float32", shape=(16, 1000)), Case("float16", shape=(33, 4096))]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(7, 777), shift=-100.0, hostile="all-negative+odd-sizes"),
    Case("float32", shape=(2, 300_000), hostile="long-rows"),
    Case("float16", shape=(100, 3)),
    Case("bfloat16", shape=(64, 2048)),
]
perf_cases = [
    Case("float32", shape=(8192, 8192)),
    Case("float16", shape=(16384, 8192)),
    Case("bfloat16", shape=(16, 1 << 22)),
]


def cost(case):
    m, n = case.shape
    return {"flops": m * n, "bytes": m * n * case.torch_dtype.itemsize + m * 8}
