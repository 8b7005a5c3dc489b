# expect: correctness "not written by the candidate's own Triton kernels"
# Launches its own kernel, on a scratch buffer, so the launch counter sees it, and returns torch's
# sum: the output's memory was never given to a launch of its own kernels (output_not_from_kernel).
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    scratch = torch.empty(16, dtype=x.dtype, device=x.device)
    add_kernel[(1,)](x, y, scratch, 16, BLOCK=16)
    return x + y
