# expect: passed ""
# Honest, but its first call spends 8 s inside Triton's compiler (a compilation listener that is
# slow to answer, then a compile that fails and is caught): compiling, not running, so a running
# limit shorter than 8 s does not cut it off. Stands in for a legitimately slow compile, which
# the CPU interpreter never does.
import time

import torch
import triton
import triton.language as tl

COMPILE_S = 8.0
_compiled = [False]


class _SlowListener:
    def __bool__(self) -> bool:
        time.sleep(COMPILE_S)
        return False


def _slow_compile() -> None:
    triton.knobs.compilation.listener = _SlowListener()
    try:
        triton.compiler.compile(None)
    except Exception:  # noqa: BLE001 - no real source: only the time spent compiling matters
        pass
    finally:
        triton.knobs.compilation.listener = None


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    if not _compiled[0]:
        _compiled[0] = True
        _slow_compile()
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    return out
