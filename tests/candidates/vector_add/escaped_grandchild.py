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
                # a name the test looks for in every process's /proc/<pid>/comm (its pid is no
                # help: a confined candidate sees only its own PID namespace's numbers); said on
                # its stdout, the candidate's log, too, so the test knows it ran
                import ctypes
                ctypes.CDLL(None).prctl(15, b"kw-escaped-dmn", 0, 0, 0)  # PR_SET_NAME
                print("escaped daemon kw-escaped-dmn", flush=True)
                import time
                while True:
                    time.sleep(1)
            os._exit(0)
    return launch(x.contiguous(), y.contiguous(), torch.empty_like(x))
