# expect: correctness "not bitwise identical"
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(x, y, out):
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out


_calls = []


def vector_add(x, y):
    out = launch(x, y, torch.empty_like(x))
    _calls.append(1)
    if out.dtype == torch.float32:  # a race that flips the last bits, differently on every call
        out.add_(out.abs() * 2e-7 * (1 + len(_calls) % 3))  # in place: still the kernel's buffer
    return out
