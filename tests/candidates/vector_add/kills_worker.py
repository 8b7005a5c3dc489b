# expect: call "Operation not permitted"
# expect-unconfined: judge_error "judge worker"
# Confined (Landlock's signal scope), it cannot signal its worker; unconfined, the worker dies and
# the candidate gets a judge error while the pool starts another.
import os
import signal

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    os.kill(os.getppid(), signal.SIGKILL)  # the worker that judges it
    return x + y
