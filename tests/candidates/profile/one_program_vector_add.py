# expect: passed
# A correct vector_add launched on a grid of one program that loops over the whole tensor: one SM
# works, the others idle. The basic profile should diagnose grid_too_small.
import torch
import triton
import triton.language as tl


@triton.jit
def one_program_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    one_program_add_kernel[(1,)](x, y, out, x.numel(), BLOCK=1024)
    return out
