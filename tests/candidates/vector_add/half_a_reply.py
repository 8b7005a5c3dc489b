# expect: call "the reply stopped after 10 of 1000 bytes"
# The candidate shares its process with the judge's channel: it writes the start of a reply
# frame there and goes silent. The judge must time it out, not wait for the rest forever.
import os
import struct
import time

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                os.write(int(name), struct.pack("!i", 1000) + b"0123456789")
        except OSError:
            pass
    time.sleep(600)
    return x + y
