# expect: call "s running, its running limit (run_timeout"
# A host-code infinite loop in the first call: judged a timeout after the short running limit
# (run_timeout), not after call_timeout, which only caps a call's running time.
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    while True:
        pass
