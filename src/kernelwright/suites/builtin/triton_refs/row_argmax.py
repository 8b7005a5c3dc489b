"""Triton reference for row_argmax: each program keeps a per-lane running (max, first index) over
its column chunk; chunks of the same row are combined by a second kernel, breaking ties towards
the smaller index so the result matches torch.argmax."""

import torch
import triton
import triton.language as tl


@triton.jit
def _partial_argmax_kernel(x_ptr, val_ptr, idx_ptr, M, N, cols_per_prog, n_splits, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    split = tl.program_id(1)
    start = split * cols_per_prog
    best = tl.full([BLOCK], -float("inf"), tl.float32)
    best_idx = tl.full([BLOCK], 2147483647, tl.int32)
    for off in range(0, cols_per_prog, BLOCK):
        cols = start + off + tl.arange(0, BLOCK)
        mask = (cols < N) & (off + tl.arange(0, BLOCK) < cols_per_prog)
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
        # strictly greater: a lane keeps the earlier (smaller) index on ties
        better = (x > best) & mask
        best = tl.where(better, x, best)
        best_idx = tl.where(better, cols, best_idx)
    row_best = tl.max(best, axis=0)
    # smallest index among the lanes holding the maximum
    idx = tl.min(tl.where(best == row_best, best_idx, 2147483647), axis=0)
    tl.store(val_ptr + row * n_splits + split, row_best)
    tl.store(idx_ptr + row * n_splits + split, idx)


@triton.jit
def _finish_kernel(val_ptr, idx_ptr, out_ptr, n_splits, SPLITS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, SPLITS)
    mask = offs < n_splits
    v = tl.load(val_ptr + row * n_splits + offs, mask=mask, other=-float("inf"))
    i = tl.load(idx_ptr + row * n_splits + offs, mask=mask, other=2147483647)
    best = tl.max(v, axis=0)
    tl.store(out_ptr + row, tl.min(tl.where(v == best, i, 2147483647), axis=0).to(tl.int64))


def row_argmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2 and x.shape[1] > 0
    xc = x.contiguous()
    M, N = xc.shape
    out = torch.empty((M,), device=x.device, dtype=torch.int64)
    if M == 0:
        return out
    BLOCK = 1024 if x.is_cuda else 4096
    n_splits = max(1, min(triton.cdiv(N, BLOCK), triton.cdiv(1024, M), 256))
    cols_per_prog = triton.cdiv(triton.cdiv(N, n_splits), BLOCK) * BLOCK
    n_splits = triton.cdiv(N, cols_per_prog)
    vals = torch.empty((M, n_splits), device=x.device, dtype=torch.float32)
    idxs = torch.empty((M, n_splits), device=x.device, dtype=torch.int32)
    _partial_argmax_kernel[(M, n_splits)](xc, vals, idxs, M, N, cols_per_prog, n_splits, BLOCK=BLOCK, num_warps=4)
    _finish_kernel[(M,)](vals, idxs, out, n_splits, SPLITS=triton.next_power_of_2(n_splits), num_warps=1)
    return out
