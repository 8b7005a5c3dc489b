# expect: performance "escaping the timer|after its calls returned"
# requires: gpu
import torch
import triton
import triton.language as tl

# Computes the right result on the current stream, then queues long work (matrix products, tens of
# milliseconds) on a side stream and returns: that work would run into whatever is timed next.


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


_side, _buf = [], []


def vector_add(x, y):
    if not _side:
        _side.append(torch.cuda.Stream())
        _buf.append(torch.randn(4096, 4096, device=x.device))
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, out, x.numel(), BLOCK=4096, num_warps=8)
    with torch.cuda.stream(_side[0]):
        for _ in range(10):
            _buf[0] @ _buf[0]
    return out
