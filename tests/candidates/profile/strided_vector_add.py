# expect: passed
# A correct vector_add whose lanes read far apart: lane i of program p handles element
# i * n_programs + p, so neighbouring lanes are n_programs elements apart (256 KB for float32 at
# 2^24 elements). Every access is uncoalesced: the basic profile should call it far below the roofline.
import torch
import triton
import triton.language as tl

BLOCK = 256


@triton.jit
def strided_add_kernel(x_ptr, y_ptr, out_ptr, n, n_programs, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK).to(tl.int64) * n_programs + tl.program_id(0)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    programs = triton.cdiv(n, BLOCK)  # programs x BLOCK lanes cover [0, n) once each
    strided_add_kernel[(programs,)](x, y, out, n, programs, BLOCK=BLOCK)
    return out
