"""Dropout with a counter-based hash RNG, so the kept/dropped pattern is exactly reproducible
from (seed, element index) and a PyTorch reference can check every element."""

import math

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "dropout"
difficulty = 2
tags = ("elementwise", "random", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `dropout(x, p, seed)` that applies dropout with a
prescribed counter-based random number generator, so that the result is exactly reproducible.
x is a contiguous tensor of any shape and size (fewer than 2**31 elements) and dtype float32,
float16 or bfloat16; 0 <= p < 1 is a Python float; seed is a Python int in [0, 2**31).

For the element at flat (row-major) index i, with all arithmetic on unsigned 32-bit integers
(multiplication wraps modulo 2**32, >> is a logical shift):
    def fmix32(h):                      # MurmurHash3's finalizer
        h ^= h >> 16;  h = h * 0x85EBCA6B
        h ^= h >> 13;  h = h * 0xC2B2AE35
        h ^= h >> 16;  return h
    key       = fmix32(seed)                      # one scalar per call
    r         = fmix32(i ^ key) >> 8              # 24-bit uniform integer in [0, 2**24)
    threshold = floor(p * 2**24)                  # an integer
    out[i]    = x[i] * (1 / (1 - p))   if r >= threshold   else 0
The scaling is done in float32 and rounded once to x's dtype. Return a new tensor of x's shape and
dtype; do not modify x. (In Triton, tl.uint32 arithmetic wraps as required; the wrapper may compute
key and threshold on the host.) Do not use tl.rand: its stream is different.
"""
entry_point = "dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor"
triton_reference = "triton_refs/dropout.py"
deterministic = True
# The keep mask depends only on integers; upcasting x to float64 only makes the scaled values exact.
reference_in_float64 = True

_MASK32 = 0xFFFFFFFF


def _mul32(h, c):
    """(h * c) mod 2**32 for int64 tensors h in [0, 2**32) without overflowing int64: split c."""
    lo, hi = c & 0xFFFF, c >> 16
    return (h * lo + ((h * hi) & 0xFFFF) * 65536) & _MASK32


def _fmix32(h):
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def make_inputs(case, gen):
    return randn(gen, case.shape, case.dtype), case.p, case.seed


def reference(x, p, seed):
    key = int(_fmix32(torch.tensor(seed & _MASK32, dtype=torch.int64)))
    idx = torch.arange(x.numel(), device=x.device, dtype=torch.int64).view(x.shape)
    r = _fmix32(idx ^ key) >> 8
    keep = r >= math.floor(p * 2 ** 24)
    scale = 1.0 / (1.0 - p)
    return torch.where(keep, x * scale, torch.zeros_like(x))


visible_cases = [Case("float32", shape=(4096,), p=0.5, seed=0), Case("float16", shape=(64, 300), p=0.1, seed=1234)]
hidden_cases = [
    Case("float32", shape=(1,), p=0.3, seed=7),
    Case("float32", shape=(3, 5, 7), p=0.0, seed=99),
    Case("float32", shape=(98_765,), p=0.9, seed=2**31 - 1),
    Case("float16", shape=(257, 129), p=0.25, seed=42),
    Case("bfloat16", shape=(1000, 33), p=0.5, seed=5),
]
perf_cases = [
    Case("float32", shape=(1 << 25,), p=0.1, seed=1),
    Case("bfloat16", shape=(16384, 8192), p=0.1, seed=2),
    Case("float16", shape=(8192, 8192), p=0.5, seed=3),
]


def cost(case):
    n = math.prod(case.shape)
    return {"flops": 12 * n, "bytes": 2 * n * case.torch_dtype.itemsize}
