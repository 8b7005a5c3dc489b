# expect: correctness "outside tolerance"
"""SiLU as x * exp(x) / (1 + exp(x)): right while exp(x) stays finite (|x| below ~88, as in the
task's cases before the hostile ones), NaN (inf / inf) for large positive x."""
import torch
import triton
import triton.language as tl


@triton.jit
def _silu_exp_ratio(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    e = tl.exp(x)
    tl.store(out_ptr + offs, (x * e / (1.0 + e)).to(out_ptr.dtype.element_ty), mask=mask)


def silu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    _silu_exp_ratio[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)
    return out
