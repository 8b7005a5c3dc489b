# expect: call "unreadable reply"
# A well-formed "ok" reply (torch's result, a claimed launch) for a request that was never sent:
# numbered out of turn, it is a protocol_error, not the answer to the call.
import os
import struct
import sys

import torch
import triton
import triton.language as tl

from kernelwright.judge.common import wire
from kernelwright.judge.common.digests import tensor_digests


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out


def harness_seq():
    """The number of the request being answered, read from the harness up the stack."""
    frame = sys._getframe()
    while frame is not None:
        harness = frame.f_locals.get("self")
        if harness is not None and hasattr(harness, "_seq") and hasattr(harness, "conn"):
            return harness._seq
        frame = frame.f_back
    return None


def forge(reply):
    """Write a whole reply frame on the judge's channel (the process's socket)."""
    data = bytes(wire.encode(reply))
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                os.write(int(name), struct.pack("!i", len(data)) + data)
        except OSError:
            pass


def vector_add(x, y):
    forge({"op": "run", "ok": True, "seq": 999, "outputs": [x + y], "launches": 1, "seconds": 0.0,
           "input_digests": tensor_digests(torch, [x, y]), "kernels": {"add_kernel": 1}})
    return x + y
