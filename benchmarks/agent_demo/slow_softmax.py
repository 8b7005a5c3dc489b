"""A correct but slow softmax (the starting point of the optimize demo): one program per row,
three passes over the row in blocks of 128 elements (max, sum, write), one warp per program."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_three_pass(x_ptr, out_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32))
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    row_sum = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * stride_o + cols, (tl.exp(x - row_max) / row_sum).to(out_ptr.dtype.element_ty),
                 mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    m, n = x.shape
    out = torch.empty_like(x)
    if m and n:
        _softmax_three_pass[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK=128, num_warps=1)
    return out
