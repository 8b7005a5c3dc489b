"""Triton reference for gelu (tanh form): one masked 1-D pass, float32 math, written as
x * sigmoid(2u) so there is no tanh to call and no overflow to NaN for large |x|."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    two_u = 1.5957691216057308 * (x + 0.044715 * x * x * x)  # 2 * sqrt(2/pi) * (...)
    # exp(-2u) -> inf for very negative x gives x / inf = -0, the correct limit
    y = x / (1.0 + tl.exp(-two_u))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    out = torch.empty_like(xc)
    n = xc.numel()
    if n == 0:
        return out
    BLOCK = 4096
    _gelu_kernel[(triton.cdiv(n, BLOCK),)](xc, out, n, BLOCK=BLOCK, num_warps=8)
    return out
