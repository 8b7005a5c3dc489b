# expect: call "CUDA out of memory"
# Raises an exception of its own named OutOfMemoryError, with torch's message: the class is the
# candidate's, not torch's, so the kind is runtime_error, not out_of_memory.
import torch
import triton
import triton.language as tl


class OutOfMemoryError(RuntimeError):
    pass


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    raise OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 79.10 GiB total capacity)")
