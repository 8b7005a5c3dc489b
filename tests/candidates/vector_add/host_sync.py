# expect: passed
# Correct, but waits for the GPU inside every call (a value read back, as masked_select-style code
# does to size its output): on a GPU the verdict flags its speedup as host-synchronising.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = int(torch.tensor(x.numel(), device=x.device).item())  # a read-back: the host waits here
    add_kernel[(triton.cdiv(n, 1024),)](x.contiguous(), y.contiguous(), out, n, BLOCK=1024)
    return out
