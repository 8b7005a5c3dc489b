import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * N
    m = tl.full((BLOCK,), float("-inf"), tl.float32)
    s = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, N, BLOCK):  # online max and sum, per lane
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < N, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        s = s * tl.exp(m - new_m) + tl.exp(x - new_m)
        s = tl.where(new_m == float("-inf"), 0.0, s)
        m = new_m
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    for start in range(0, N, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(base + offs, mask=offs < N, other=float("-inf")).to(tl.float32)
        tl.store(out_ptr + row * N + offs, tl.exp(x - row_max) / total, mask=offs < N)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n = x.shape[-1]
        out = torch.empty_like(x)
        rows = x.numel() // n
        softmax_kernel[(rows,)](x, out, n, BLOCK=1024 if x.is_cuda else 4096)
        return out
