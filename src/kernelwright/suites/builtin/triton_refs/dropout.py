"""Triton reference for dropout: the hash is evaluated in registers on uint32 lanes (wrapping
multiplies are exactly the specified modulo-2**32 arithmetic), one masked 1-D pass."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _fmix32(h):
    h ^= h >> 16
    h = h * 0x85EBCA6B
    h ^= h >> 13
    h = h * 0xC2B2AE35
    h ^= h >> 16
    return h


@triton.jit
def _dropout_kernel(x_ptr, out_ptr, n, key, threshold, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    # tl.cast rather than .to: an int argument equal to 1 arrives as a constexpr
    r = _fmix32(offs.to(tl.uint32) ^ tl.cast(key, tl.uint32)) >> 8
    keep = r >= tl.cast(threshold, tl.uint32)
    y = tl.where(keep, x.to(tl.float32) * scale, 0.0)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def _fmix32_host(h: int) -> int:
    m = 0xFFFFFFFF
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & m
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & m
    return h ^ (h >> 16)


def dropout(x: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    assert 0.0 <= p < 1.0
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n = xc.numel()
    if n == 0:
        return out
    key = _fmix32_host(seed & 0xFFFFFFFF)
    threshold = math.floor(p * 2 ** 24)
    scale = 1.0 / (1.0 - p)
    BLOCK = 4096
    _dropout_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, key, threshold, scale, BLOCK=BLOCK, num_warps=8)
    return out
