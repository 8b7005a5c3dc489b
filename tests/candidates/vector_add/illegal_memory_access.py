# expect: call "illegal memory access"
# requires: gpu
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    far = offs.to(tl.int64) + (1 << 40)  # a terabyte past the end of the tensor
    tl.store(out_ptr + far, tl.load(x_ptr + far) + tl.load(y_ptr + far))


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
