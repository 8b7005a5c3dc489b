# expect: correctness "held the GPU lock between its requests"
# Computes the right result, and at its first call starts a thread that takes the judge's GPU lock
# exclusively (the lock files are the same user's: it can open them) and keeps it. Between two
# requests nothing of a candidate's processes may hold the lock: every other worker's timing would
# wait behind it. The worker looks before its next request and fails it.
import fcntl
import threading
import time

import torch
import triton
import triton.language as tl

from kernelwright.judge.common.gpulock import lock_base


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


_holding = []


def _hold(taken: threading.Event) -> None:
    lock = open(lock_base() + ".lock", "a")
    fcntl.flock(lock, fcntl.LOCK_EX)
    _holding.append(lock)
    taken.set()
    while True:
        time.sleep(1)


def vector_add(x, y):
    if not _holding:
        taken = threading.Event()
        threading.Thread(target=_hold, args=(taken,), daemon=True).start()
        taken.wait(1)  # (on a GPU the harness's own shared hold is let go only after this call)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
