"""Triton reference for topk, in two stages. Stage 1 (grid: rows x chunks of CHUNK columns)
loads its chunk into registers and extracts the chunk's top k by k rounds of
max / first-index-of-max / mask-out, writing k candidates (value, column). Stage 2 (grid: rows)
runs the same selection over the row's candidates, producing the sorted top k."""

import torch
import triton
import triton.language as tl


@triton.jit
def _chunk_topk_kernel(x_ptr, cand_val_ptr, cand_idx_ptr, N, n_chunks, k,
                       CHUNK: tl.constexpr, K_P2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
    slots = tl.arange(0, K_P2)
    out_val = tl.full([K_P2], -float("inf"), tl.float32)
    out_idx = tl.full([K_P2], -1, tl.int32)
    for j in range(0, k):
        best = tl.max(x, axis=0)
        # the smallest column holding the max; padding lanes are -inf and never chosen over data
        pos = tl.min(tl.where((x == best) & (cols < N), cols, 2147483647), axis=0)
        out_val = tl.where(slots == j, best, out_val)
        out_idx = tl.where(slots == j, pos, out_idx)
        x = tl.where(cols == pos, -float("inf"), x)
    base = (row * n_chunks + chunk) * K_P2
    tl.store(cand_val_ptr + base + slots, out_val)
    tl.store(cand_idx_ptr + base + slots, out_idx)


@triton.jit
def _merge_topk_kernel(cand_val_ptr, cand_idx_ptr, val_ptr, idx_ptr, n_cand, k, C_P2: tl.constexpr,
                       K_P2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, C_P2)
    valid = offs < n_cand
    v = tl.load(cand_val_ptr + row * n_cand + offs, mask=valid, other=-float("inf"))
    c = tl.load(cand_idx_ptr + row * n_cand + offs, mask=valid, other=-1)
    # unused candidate slots (k < K_P2, or chunks shorter than k) hold (-inf, -1): never picked
    # while k real columns remain, which k <= N guarantees
    for j in range(0, k):
        best = tl.max(v, axis=0)
        pos = tl.min(tl.where((v == best) & (c >= 0), c, 2147483647), axis=0)
        tl.store(val_ptr + row * k + j, best.to(val_ptr.dtype.element_ty))
        tl.store(idx_ptr + row * k + j, pos.to(tl.int64))
        v = tl.where(c == pos, -float("inf"), v)


def topk(x: torch.Tensor, k: int):
    assert x.dim() == 2 and 1 <= k <= x.shape[1] and k <= 64
    xc = x.contiguous()
    M, N = xc.shape
    values = torch.empty((M, k), device=x.device, dtype=x.dtype)
    indices = torch.empty((M, k), device=x.device, dtype=torch.int64)
    if M == 0:
        return values, indices
    CHUNK = min(4096, triton.next_power_of_2(N))
    n_chunks = triton.cdiv(N, CHUNK)
    K_P2 = triton.next_power_of_2(k)
    cand_val = torch.empty((M, n_chunks * K_P2), device=x.device, dtype=torch.float32)
    cand_idx = torch.empty((M, n_chunks * K_P2), device=x.device, dtype=torch.int32)
    _chunk_topk_kernel[(M, n_chunks)](xc, cand_val, cand_idx, N, n_chunks, k, CHUNK=CHUNK, K_P2=K_P2,
                                      num_warps=8)
    n_cand = n_chunks * K_P2
    _merge_topk_kernel[(M,)](cand_val, cand_idx, values, indices, n_cand, k, C_P2=triton.next_power_of_2(n_cand),
                             K_P2=K_P2, num_warps=4)
    return values, indices
