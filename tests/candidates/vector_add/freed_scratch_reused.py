# expect: correctness "not written by the candidate's own Triton kernels"
# Its kernel writes a buffer of the output's size that is freed before torch computes the result,
# so torch's caching allocator may hand the result those very addresses: memory is matched by the
# storage the launch was given (held weakly), not by address alone.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    scratch = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, scratch, x.numel(), BLOCK=1024)
    del scratch
    return torch.add(x, y)
