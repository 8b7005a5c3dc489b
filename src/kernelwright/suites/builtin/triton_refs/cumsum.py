"""Triton reference for cumsum: one program per row walks the row block by block, scanning each
block with tl.cumsum and adding the float32 total carried from the blocks before it."""

import torch
import triton
import triton.language as tl


@triton.jit
def _cumsum_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    carry = tl.zeros([1], tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
        scan = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + row * N + cols, scan.to(out_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2
    xc = x.contiguous()
    out = torch.empty_like(xc)
    M, N = xc.shape
    if M == 0 or N == 0:
        return out
    BLOCK = min(2048, triton.next_power_of_2(N))
    _cumsum_kernel[(M,)](xc, out, N, BLOCK=BLOCK, num_warps=8)
    return out
