"""Triton reference for cross_entropy: one program per row streams the vocabulary in blocks with
a per-lane online logsumexp (running max and rescaled sum), then subtracts the target logit,
loaded with one masked scalar load. The logits are read exactly once."""

import torch
import triton
import triton.language as tl


@triton.jit
def _cross_entropy_kernel(logits_ptr, targets_ptr, loss_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * V
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # lanes that have only seen padding keep a zero sum (avoid exp(-inf - -inf) = nan)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == -float("inf"), 0.0, s * tl.exp(m - row_max)), axis=0)
    lse = row_max + tl.log(total)
    target = tl.load(targets_ptr + row)
    valid = target != -100
    t_logit = tl.load(base + tl.where(valid, target, 0)).to(tl.float32)
    tl.store(loss_ptr + row, tl.where(valid, lse - t_logit, 0.0))


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    assert logits.dim() == 2 and targets.shape == (logits.shape[0],) and targets.dtype == torch.int64
    logits = logits.contiguous()
    M, V = logits.shape
    loss = torch.empty((M,), device=logits.device, dtype=torch.float32)
    if M == 0:
        return loss
    BLOCK = min(4096, triton.next_power_of_2(V))
    _cross_entropy_kernel[(M,)](logits, targets.contiguous(), loss, V, BLOCK=BLOCK, num_warps=8)
    return loss
