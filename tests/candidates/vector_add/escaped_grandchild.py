# expect: passed
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


import os

def vector_add(x, y):
    if not os.environ.get("KW_TEST_FORKED"):
        os.environ["KW_TEST_FORKED"] = "1"
        if os.fork() == 0:  # a daemon that tries to outlive the judge
            os.setsid()
            if os.fork() == 0:
                # on its stdout, the candidate's log (a confined candidate can write no file outside
                # its scratch, which goes with it): the test reads it from the verdict's log tail
                print(f"escaped daemon pid {os.getpid()}", flush=True)
                import time
                while True:
                    time.sleep(1)
            os._exit(0)
    return launch(x.contiguous(), y.contiguous(), torch.empty_like(x))
