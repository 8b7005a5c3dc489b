"""The k largest values of each row and their column indices, sorted in descending order."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import rand, randn

name = "topk"
difficulty = 4
tags = ("selection", "reduction", "integer-output", "sampling")
instruction = """
Write Triton kernel(s) and a Python wrapper `topk(x, k)` that returns the k largest values of
each row of a contiguous (M, N) tensor x and their column indices, like
torch.topk(x, k, dim=-1, largest=True, sorted=True):
    values   (M, k), x's dtype, each row sorted in descending order
    indices  (M, k), int64, indices[i, j] is the column of values[i, j] in row i
x is float32, float16 or bfloat16 without NaN; 1 <= k <= 64 and k <= N; N is anything from 1 to
131072 (vocabulary sizes such as 32000 or 128256 included: not powers of two); M from 1 to tens of
thousands. Values are compared with the dtype's tolerance and indices exactly. The test inputs
have k+1 distinct largest values in every row (no ties among the top k, nor between the k-th and
the (k+1)-th), so the answer is unique. Rows can be long with M small: split a row over several
programs (e.g. per-chunk top-k candidates, then a top-k of the candidates).
"""
entry_point = "topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]"
triton_reference = "triton_refs/topk.py"
deterministic = True
reference_in_float64 = False  # index outputs; selection involves no arithmetic to make exact
# not required by its tags, declared (and so checked) anyway: masked lanes that load 0 fail these
numerics = ("all-negative", "long-rows", "odd-sizes")


def make_inputs(case, gen):
    m, n = case.shape
    k = case.k
    # background values in [-3, 3]; k+1 planted values 3.25 + 0.25*j + jitter (jitter < 0.1) at
    # random distinct columns: distinct after rounding to bfloat16, in random order in the row
    x = randn(gen, (m, n)).clamp_(-3.0, 3.0)
    planted = min(k + 1, n)
    cols = torch.argsort(rand(gen, (m, n)), dim=-1)[:, :planted]
    steps = torch.argsort(rand(gen, (m, planted)), dim=-1).float()
    x.scatter_(1, cols, 3.25 + 0.25 * steps + 0.1 * rand(gen, (m, planted)))
    x += case.get("shift", 0.0)  # float32 cases only: a shift of -100 keeps the planted values distinct
    return x.to(case.torch_dtype), k


def reference(x, k):
    values, indices = torch.topk(x, k, dim=-1, largest=True, sorted=True)
    return values, indices


visible_cases = [Case("float32", shape=(8, 1000), k=5), Case("float16", shape=(8, 32000), k=8)]
hidden_cases = [
    Case("float32", shape=(1, 1), k=1),
    Case("float32", shape=(3, 7), k=7, hostile="odd-sizes"),
    Case("float32", shape=(1, 128_256), k=32, hostile="long-rows"),
    Case("float16", shape=(100, 300), k=1),
    Case("float16", shape=(4, 4097), k=64),
    Case("bfloat16", shape=(4, 50_257), k=16),
    Case("float32", shape=(5, 1001), k=8, shift=-100.0, hostile="all-negative"),
]
perf_cases = [
    Case("float32", shape=(1024, 128_256), k=50),
    Case("bfloat16", shape=(4096, 32000), k=8),
    Case("float16", shape=(65_536, 1024), k=16),
]


def cost(case):
    m, n = case.shape
    return {"flops": m * n, "bytes": m * n * case.torch_dtype.itemsize + m * case.k * (case.torch_dtype.itemsize + 8)}
