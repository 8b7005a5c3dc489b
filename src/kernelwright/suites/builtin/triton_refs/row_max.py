"""Triton reference for row_max: like row_sum, the columns of a row are split over several
programs when there are few rows; partial maxima are combined by a second small kernel.
Max is exact and order-independent, so the result is bitwise deterministic."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_max_kernel(x_ptr, part_ptr, M, N, cols_per_prog, n_splits, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    start = split * cols_per_prog
    acc = tl.full([BLOCK], -float("inf"), tl.float32)
    for off in range(0, cols_per_prog, BLOCK):
        cols = start + off + tl.arange(0, BLOCK)
        mask = (cols < N) & (off + tl.arange(0, BLOCK) < cols_per_prog)
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
        acc = tl.maximum(acc, x)
    tl.store(part_ptr + row * n_splits + split, tl.max(acc, axis=0))


@triton.jit
def _finish_kernel(part_ptr, out_ptr, n_splits, SPLITS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, SPLITS)
    p = tl.load(part_ptr + row * n_splits + offs, mask=offs < n_splits, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(p, axis=0).to(out_ptr.dtype.element_ty))


def row_max(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2 and x.shape[1] > 0
    xc = x.contiguous()
    M, N = xc.shape
    out = torch.empty((M,), device=x.device, dtype=x.dtype)
    if M == 0:
        return out
    BLOCK = 1024 if x.is_cuda else 4096
    n_splits = max(1, min(triton.cdiv(N, BLOCK), triton.cdiv(1024, M), 256))
    cols_per_prog = triton.cdiv(triton.cdiv(N, n_splits), BLOCK) * BLOCK
    n_splits = triton.cdiv(N, cols_per_prog)
    part = torch.empty((M, n_splits), device=x.device, dtype=torch.float32)
    _partial_max_kernel[(M, n_splits)](xc, part, M, N, cols_per_prog, n_splits, BLOCK=BLOCK, num_warps=4)
    _finish_kernel[(M,)](part, out, n_splits, SPLITS=triton.next_power_of_2(n_splits), num_warps=1)
    return out
