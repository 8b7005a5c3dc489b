"""Triton reference for softmax: one program per row; rows that fit one block are done in a single
read, longer rows with an online (running max, rescaled sum) pass followed by a write pass."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_single(x_ptr, out_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * stride_o + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_online(x_ptr, out_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have only seen -inf keep a zero sum (avoid inf - inf = nan)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        out = tl.exp(x - row_max) / row_sum
        tl.store(out_ptr + row * stride_o + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2
    x = x.contiguous()
    m, n = x.shape
    out = torch.empty_like(x)
    if m == 0 or n == 0:
        return out
    block = triton.next_power_of_2(n)
    if block <= 8192:
        warps = 4 if block <= 1024 else 8 if block <= 4096 else 16
        _softmax_single[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK=block, num_warps=warps)
    else:
        _softmax_online[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK=4096, num_warps=16)
    return out
