# expect: passed
# A correct vector_add that spills registers: one warp holds a block of 16384 elements (512 per
# thread), and x stays live across a reduction over the block (its sum minus itself is 0 for the
# finite inputs of the task), so far more than 255 values per thread are live at once. The basic
# profile should diagnose register_spills.
import torch
import triton
import triton.language as tl

BLOCK = 16384


@triton.jit
def spilling_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sum(x, axis=0)
    y = tl.load(y_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    out = x + y + (s - s)
    tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)


def vector_add(x, y):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    spilling_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=1)
    return out
