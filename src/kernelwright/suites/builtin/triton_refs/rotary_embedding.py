"""Triton reference for rotary_embedding: one program per (batch, position) token rotates all H
heads at once, so the token's cos/sin row is loaded once and reused across heads."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, S, H, HALF,
                 BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)  # b * S + s
    pos = token % S
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_D)
    dmask = dims < HALF
    c = tl.load(cos_ptr + pos * HALF + dims, mask=dmask, other=0.0)
    s = tl.load(sin_ptr + pos * HALF + dims, mask=dmask, other=0.0)
    mask = (heads[:, None] < H) & dmask[None, :]
    off = token * H * 2 * HALF + heads[:, None] * (2 * HALF) + dims[None, :]
    x1 = tl.load(x_ptr + off, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + off + HALF, mask=mask, other=0.0).to(tl.float32)
    o1 = x1 * c[None, :] - x2 * s[None, :]
    o2 = x2 * c[None, :] + x1 * s[None, :]
    tl.store(out_ptr + off, o1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + off + HALF, o2.to(out_ptr.dtype.element_ty), mask=mask)


def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 4 and x.shape[-1] % 2 == 0
    B, S, H, D = x.shape
    half = D // 2
    assert cos.shape == (S, half) and sin.shape == (S, half)
    xc = x.contiguous()
    out = torch.empty_like(xc)
    if xc.numel() == 0:
        return out
    BLOCK_H = triton.next_power_of_2(H)
    BLOCK_D = triton.next_power_of_2(half)
    warps = 4 if BLOCK_H * BLOCK_D <= 2048 else 8
    _rope_kernel[(B * S,)](xc, cos.contiguous(), sin.contiguous(), out, S, H, half,
                           BLOCK_H=BLOCK_H, BLOCK_D=BLOCK_D, num_warps=warps)
    return out
