"""Triton reference for transpose_2d: each program loads a (BLOCK_M, BLOCK_N) tile with
row-contiguous reads and stores its transpose with row-contiguous writes into the output."""

import torch
import triton
import triton.language as tl


@triton.jit
def _transpose_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tile = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=mask)
    # out is (N, M): element (i, j) of the tile goes to out[j, i]
    mask_t = (rn[:, None] < N) & (rm[None, :] < M)
    tl.store(out_ptr + rn[:, None] * M + rm[None, :], tl.trans(tile), mask=mask_t)


def transpose_2d(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2
    xc = x.contiguous()
    M, N = xc.shape
    out = torch.empty((N, M), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return out
    BLOCK = 64
    _transpose_kernel[(triton.cdiv(M, BLOCK), triton.cdiv(N, BLOCK))](xc, out, M, N, BLOCK_M=BLOCK, BLOCK_N=BLOCK,
                                                                       num_warps=4)
    return out
