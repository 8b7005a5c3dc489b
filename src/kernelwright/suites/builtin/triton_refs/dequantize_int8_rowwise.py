"""Triton reference for dequantize_int8_rowwise: 2-D tiles of (rows, columns); the tile's row
scales are loaded once and broadcast over its columns."""

import torch
import triton
import triton.language as tl


@triton.jit
def _dequantize_kernel(q_ptr, scale_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    q = tl.load(q_ptr + offs, mask=mask, other=0).to(tl.float32)
    s = tl.load(scale_ptr + rows, mask=rows < M, other=0.0).to(tl.float32)
    tl.store(out_ptr + offs, (q * s[:, None]).to(out_ptr.dtype.element_ty), mask=mask)


def dequantize_int8_rowwise(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    assert q.dim() == 2 and q.dtype == torch.int8 and scale.shape == (q.shape[0],)
    qc = q.contiguous()
    M, N = qc.shape
    out = torch.empty((M, N), device=q.device, dtype=scale.dtype)
    if M == 0 or N == 0:
        return out
    BLOCK_M, BLOCK_N = 8, 1024
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _dequantize_kernel[grid](qc, scale.contiguous(), out, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=8)
    return out
