"""Triton reference for softmax_long_row: two passes over chunks of CHUNK columns. Pass 1 (grid
rows x chunks) writes each chunk's max and sum of exp; pass 2 (same grid) combines the row's chunk
statistics with online-softmax rescaling and writes its chunk of the output. x is read twice,
which is the price of not holding a 256K row on chip."""

import torch
import triton
import triton.language as tl


@triton.jit
def _chunk_stats_kernel(x_ptr, max_ptr, sum_ptr, N, n_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for off in range(0, CHUNK, BLOCK):
        cols = chunk * CHUNK + off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have only seen -inf (padding) keep a zero sum instead of exp(nan)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    cm = tl.max(m, axis=0)
    cs = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - cm)), axis=0)
    tl.store(max_ptr + row * n_chunks + chunk, cm)
    tl.store(sum_ptr + row * n_chunks + chunk, cs)


@triton.jit
def _normalize_kernel(x_ptr, out_ptr, max_ptr, sum_ptr, N, n_chunks,
                      CHUNK: tl.constexpr, BLOCK: tl.constexpr, CHUNKS_P2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    c = tl.arange(0, CHUNKS_P2)
    cm = tl.load(max_ptr + row * n_chunks + c, mask=c < n_chunks, other=-float("inf"))
    cs = tl.load(sum_ptr + row * n_chunks + c, mask=c < n_chunks, other=0.0)
    row_max = tl.max(cm, axis=0)
    inv_sum = 1.0 / tl.sum(tl.where(c < n_chunks, cs * tl.exp(cm - row_max), 0.0), axis=0)
    for off in range(0, CHUNK, BLOCK):
        cols = chunk * CHUNK + off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(out_ptr + row * N + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_long_row(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2
    xc = x.contiguous()
    out = torch.empty_like(xc)
    M, N = xc.shape
    if M == 0 or N == 0:
        return out
    BLOCK = min(4096, triton.next_power_of_2(N))
    CHUNK = BLOCK * 4 if N > BLOCK * 4 else BLOCK
    n_chunks = triton.cdiv(N, CHUNK)
    stats_max = torch.empty((M, n_chunks), device=x.device, dtype=torch.float32)
    stats_sum = torch.empty((M, n_chunks), device=x.device, dtype=torch.float32)
    grid = (M, n_chunks)
    _chunk_stats_kernel[grid](xc, stats_max, stats_sum, N, n_chunks, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=8)
    _normalize_kernel[grid](xc, out, stats_max, stats_sum, N, n_chunks, CHUNK=CHUNK, BLOCK=BLOCK,
                            CHUNKS_P2=triton.next_power_of_2(n_chunks), num_warps=8)
    return out
