# expect: correctness "outside tolerance"
"""A softmax without max subtraction: exp(x) / sum(exp(x)) in float32, two passes over blocks.

Right for rows of moderate magnitude (the built-in task's cases before the hostile ones: |x| up
to ~45, exp(45) ~ 3.5e19, fine in float32); wrong once exp overflows (x > 88.7: inf / inf = NaN)
or every exp underflows (a row around -1000: 0 / 0 = NaN)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_naive(x_ptr, out_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        total += tl.exp(x)
    inv = 1.0 / tl.sum(total, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * stride_o + cols, (tl.exp(x) * inv).to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    m, n = x.shape
    out = torch.empty_like(x)
    block = min(4096, triton.next_power_of_2(n))
    _softmax_naive[(m,)](x, out, n, x.stride(0), out.stride(0), BLOCK=block)
    return out
