"""Triton reference for embedding: programs over (token, column block); each loads its token's
index once and copies a BLOCK_D slice of the row, offsets in int64."""


import torch
import triton
import triton.language as tl


@triton.jit
def _embedding_kernel(idx_ptr, w_ptr, out_ptr, D, BLOCK_D: tl.constexpr):
    token = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = cols < D
    row = tl.load(idx_ptr + token)  # int64
    vals = tl.load(w_ptr + row * D + cols, mask=mask)
    tl.store(out_ptr + token * D + cols, vals, mask=mask)


def embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    assert indices.dtype == torch.int64 and weight.dim() == 2
    V, D = weight.shape
    idx = indices.contiguous()
    w = weight.contiguous()
    n = idx.numel()
    out = torch.empty((*indices.shape, D), device=weight.device, dtype=weight.dtype)
    if n == 0 or D == 0:
        return out
    BLOCK_D = min(1024, triton.next_power_of_2(D))
    _embedding_kernel[(n, triton.cdiv(D, BLOCK_D))](idx, w, out, D, BLOCK_D=BLOCK_D, num_warps=4)
    return out
