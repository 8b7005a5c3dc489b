"""Rotary position embedding (RoPE), GPT-NeoX "rotate half" convention, applied to q or k."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "rotary_embedding"
difficulty = 2
tags = ("elementwise", "broadcast", "attention", "memory-bound")
instruction = """
Write a Triton kernel and a Python wrapper `rotary_embedding(x, cos, sin)` that applies rotary
position embeddings in the GPT-NeoX / Llama "rotate half" convention:
    x:   (B, S, H, D) contiguous, dtype float32, float16 or bfloat16; D is even (up to 256)
    cos, sin: (S, D/2) contiguous float32 (angle table: cos[s, i] = cos(s * theta_i))
    x1 = x[..., : D/2],  x2 = x[..., D/2 :]        (the two halves of each head vector)
    out[..., : D/2] = x1 * cos - x2 * sin
    out[..., D/2 :] = x2 * cos + x1 * sin
with cos/sin broadcast over batch B and heads H (indexed by sequence position s). Compute in
float32 and return a new tensor of x's shape and dtype; do not modify x (no in-place rotation).
B, S, H are any values >= 1; D/2 need not be a power of two.
"""
entry_point = "rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/rotary_embedding.py"


def make_inputs(case, gen):
    b, s, h, d = case.shape
    x = randn(gen, (b, s, h, d), case.dtype)
    # the usual table: theta_i = base**(-2i/D), angles for positions 0..S-1 (plus an offset, as
    # in decoding with a KV cache), in float32
    inv_freq = case.get("base", 10000.0) ** (-torch.arange(0, d // 2, dtype=torch.float32, device=gen.device) * 2 / d)
    pos = torch.arange(s, dtype=torch.float32, device=gen.device) + case.get("offset", 0)
    angles = pos[:, None] * inv_freq[None, :]
    return x, torch.cos(angles), torch.sin(angles)


def reference(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]  # (1, S, 1, D/2): broadcast over B and H
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


visible_cases = [Case("float32", shape=(2, 16, 4, 64)), Case("float16", shape=(1, 100, 8, 128))]
hidden_cases = [
    Case("float32", shape=(1, 1, 1, 2)),
    Case("float32", shape=(3, 7, 5, 80), offset=1000),
    Case("float16", shape=(2, 33, 3, 96), base=500000.0),
    Case("bfloat16", shape=(2, 64, 8, 128)),
]
perf_cases = [
    Case("bfloat16", shape=(8, 4096, 32, 128)),
    Case("float16", shape=(16, 2048, 32, 128)),
    Case("float32", shape=(4, 4096, 32, 64)),
]


def cost(case):
    b, s, h, d = case.shape
    n = b * s * h * d
    return {"flops": 3 * n, "bytes": 2 * n * case.torch_dtype.itemsize + 2 * s * (d // 2) * 4}
