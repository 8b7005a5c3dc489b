# expect: passed
# The kernel writes a padded buffer; the output is a view of it (same storage): its own kernel's work.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    n = x.numel()
    padded = torch.empty(n + 64, dtype=x.dtype, device=x.device)
    add_kernel[(triton.cdiv(n, 1024),)](x, y, padded[32:], n, BLOCK=1024)
    return padded[32:32 + n].view(x.shape)
