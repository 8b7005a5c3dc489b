"""Triton reference for flash_attention_causal: FlashAttention-2 style forward, one program per
(query block, batch*head), streaming key/value blocks with an online softmax in float32; with
CAUSAL set, key blocks beyond a query block's last row are skipped and the diagonal block masked."""

import torch
import triton
import triton.language as tl


@triton.jit
def _flash_attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, S, qk_scale_log2,
                                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                                CAUSAL: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    base = bh * S * HEAD_DIM  # q, k, v, o are contiguous (B*H, S, D)
    rows = start_m + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < S, other=0.0)

    # running max (in log2 units), running sum and output accumulator, all float32
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # causal: key blocks past this query block's last row are entirely masked, skip them
    if CAUSAL:
        end_n = tl.minimum(S, start_m + BLOCK_M)
    else:
        end_n = S
    for start_n in range(0, end_n, BLOCK_N):
        cols = start_n + tl.arange(0, BLOCK_N)
        kv_mask = cols[:, None] < S
        k = tl.load(k_ptr + base + cols[:, None] * HEAD_DIM + dims[None, :], mask=kv_mask, other=0.0)
        v = tl.load(v_ptr + base + cols[:, None] * HEAD_DIM + dims[None, :], mask=kv_mask, other=0.0)
        # scores scaled by D**-0.5 * log2(e) so exp2 can be used
        s = tl.dot(q, tl.trans(k)) * qk_scale_log2
        valid = cols[None, :] < S
        if CAUSAL:
            valid = valid & (cols[None, :] <= rows[:, None])
        s = tl.where(valid, s, -float("inf"))
        # every row sees key 0 in the first block, so m_new is finite from the start
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < S)


def _flash_attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    assert q.dim() == 4 and q.shape == k.shape == v.shape and q.dtype == k.dtype == v.dtype
    B, H, S, D = q.shape
    assert D in (16, 32, 64, 128, 256), "head dim must be a power of two"
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    if q.numel() == 0:
        return out
    if q.is_cuda:
        BLOCK_M, BLOCK_N = 128, 64
        warps, stages = (8, 3) if D == 128 else (4, 3)
    else:
        BLOCK_M, BLOCK_N, warps, stages = 64, 64, 4, 1
    qk_scale_log2 = D ** -0.5 * 1.4426950408889634  # log2(e)
    grid = (triton.cdiv(S, BLOCK_M), B * H)
    _flash_attention_fwd_kernel[grid](q, k, v, out, S, qk_scale_log2, HEAD_DIM=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                                      CAUSAL=causal, num_warps=warps, num_stages=stages)
    return out


def flash_attention_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return _flash_attention_forward(q, k, v, causal=True)
