import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(x_ptr, out_ptr, N, INNER, BLOCK_N: tl.constexpr, BLOCK_I: tl.constexpr):
    # x is (outer, N, inner), contiguous; out is (outer, inner); program (o, block of inner)
    o = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    cmask = cols < INNER
    acc = tl.zeros((BLOCK_I,), dtype=tl.float32)
    base = x_ptr + o * N * INNER
    for start in range(0, N, BLOCK_N):
        rows = start + tl.arange(0, BLOCK_N)
        ptrs = base + rows[:, None].to(tl.int64) * INNER + cols[None, :]
        tile = tl.load(ptrs, mask=(rows[:, None] < N) & cmask[None, :], other=0.0)
        acc += tl.sum(tile.to(tl.float32), axis=0)
    tl.store(out_ptr + o * INNER + cols, acc, mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer = 1
        for s in x.shape[:dim]:
            outer *= s
        inner = 1
        for s in x.shape[dim + 1:]:
            inner *= s
        n = x.shape[dim]
        shape = list(x.shape)
        shape[dim] = 1
        out = torch.empty(shape, dtype=x.dtype, device=x.device)
        BLOCK_I = 128 if x.is_cuda else 256
        BLOCK_N = 32 if x.is_cuda else 256
        sum_dim_kernel[(outer, triton.cdiv(inner, BLOCK_I))](x, out, n, inner, BLOCK_N=BLOCK_N, BLOCK_I=BLOCK_I)
        return out
