# expect: call "said it was queueing for the GPU while no other timing turn held it"
# Says on the judge's channel that it queues for the GPU lock (which stops its worker's clock for
# a child really queued behind another worker's timing turn), then never returns. No timing turn
# holds the GPU (there is none on a CPU), so the claim is void and it runs out of its own time.
import os
import struct

import torch
import triton
import triton.language as tl

from kernelwright.judge.common import wire


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def forge(reply):
    data = bytes(wire.encode(reply))
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                os.write(int(name), struct.pack("!i", len(data)) + data)
        except OSError:
            pass


def vector_add(x, y):
    forge({"op": "gpu_lock", "state": "waiting"})
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    while True:
        pass
