# expect: performance "running limit"
# Honest at tiny_add's test sizes; at a perf size its host code never returns. The perf-size
# check's running limit scales from the reference's own time on that case (at least run_timeout),
# so it is stopped there, not after the stage's whole perf_timeout.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    if x.numel() > 10_000:
        while True:
            pass
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
