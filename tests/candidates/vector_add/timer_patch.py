# expect: performance "replaced timing functions"
# requires: gpu
import torch
import triton
import triton.language as tl

# Tries to make every measurement look 100x faster; the judge took its own timer references first,
# and fails a candidate whose process replaced them (timer_patched).
_elapsed = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _elapsed(self, end) / 100.0
import time as _time  # noqa: E402

_perf = _time.perf_counter
_time.perf_counter = lambda: _perf() / 100.0


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, out, x.numel(), BLOCK=4096, num_warps=8)
    return out
