"""Triton reference for bias_gelu: 2-D tiles so the bias tile is loaded once per column block
and reused for all the rows of the tile; float32 math with erf."""

import torch
import triton
import triton.language as tl


@triton.jit
def _bias_gelu_kernel(x_ptr, b_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    z = x + b[None, :]
    y = 0.5 * z * (1.0 + tl.math.erf(z * 0.7071067811865476))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2 and bias.shape == (x.shape[1],) and x.dtype == bias.dtype
    xc = x.contiguous()
    out = torch.empty_like(xc)
    M, N = xc.shape
    if M == 0 or N == 0:
        return out
    BLOCK_M, BLOCK_N = 16, 256
    grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))
    _bias_gelu_kernel[grid](xc, bias.contiguous(), out, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=8)
    return out
