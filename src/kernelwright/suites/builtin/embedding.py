"""Embedding lookup: gather rows of a table by integer indices."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randint, randn

name = "embedding"
difficulty = 1
tags = ("gather", "memory-bound", "integer-input")
instruction = """
Write a Triton kernel and a Python wrapper `embedding(indices, weight)` that gathers rows of an
embedding table, like torch.nn.functional.embedding(indices, weight):
    out[..., :] = weight[indices[...], :]
indices is a contiguous int64 tensor of any shape (e.g. (batch, seq)) with values in [0, V);
weight is a contiguous (V, D) table of dtype float32, float16 or bfloat16. Return a new tensor of
shape indices.shape + (D,) and weight's dtype. The copy must be bit-exact. Indices repeat and are
in random order; D is any value >= 1 (not necessarily a power of two); V can exceed 2**17 and
V * D can exceed 2**31, so compute row offsets in 64-bit.
"""
entry_point = "embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/embedding.py"
deterministic = True
reference_in_float64 = False  # integer indices; the gathered values are copied exactly
tolerances = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def make_inputs(case, gen):
    v, d = case.table
    indices = randint(gen, case.shape, 0, v)
    weight = randn(gen, (v, d), case.dtype)
    return indices, weight


def reference(indices, weight):
    return torch.nn.functional.embedding(indices, weight)


visible_cases = [Case("float32", shape=(4, 64), table=(1000, 128)),
                 Case("float16", shape=(2, 100), table=(32000, 96))]
hidden_cases = [
    Case("float32", shape=(1,), table=(1, 1)),
    Case("float32", shape=(3, 5, 7), table=(10, 33)),
    Case("float16", shape=(512,), table=(50_257, 4)),
    Case("bfloat16", shape=(8, 64), table=(128_256, 64)),
]
perf_cases = [
    Case("bfloat16", shape=(8, 4096), table=(128_256, 4096)),
    Case("float16", shape=(16, 2048), table=(32_000, 8192)),
    Case("float32", shape=(65_536,), table=(50_257, 1024)),
]


def cost(case):
    n = math.prod(case.shape)
    d = case.table[1]
    # each output row is read from the table once and written once; indices read once
    return {"flops": 0, "bytes": 2 * n * d * case.torch_dtype.itemsize + n * 8}
