# expect: performance "after its calls returned"
# A thread started at the first call keeps launching its kernel (and burning CPU) after every call returns.
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

import threading

_started = []


def _busy(x):
    out = torch.empty_like(x)
    while True:
        if x.is_cuda:
            launch(x, x, out)
        else:  # Triton's interpreter is not thread-safe: on the CPU the thread only burns the CPU
            sum(range(10000))


def vector_add(x, y):
    if not _started:
        _started.append(threading.Thread(target=_busy, args=(x[:4096].clone(),), daemon=True))
        _started[0].start()
    return launch(x.contiguous(), y.contiguous(), torch.empty_like(x))
