# expect: call "s running, its running limit (run_timeout"
# A kernel that never terminates: the loop's bound is read from memory and never changes (on a
# GPU the launch returns and the host waits at the synchronise; interpreted, the loop runs on).
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i = tl.load(x_ptr) * 0.0
    while i < 1.0:  # never terminates: the data makes i zero forever; the store keeps the loop alive
        tl.store(out_ptr + offs, i + offs, mask=mask)
        i = i * 2.0
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
