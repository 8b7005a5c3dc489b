# expect: correctness "outside tolerance"
"""Cross-entropy with logsumexp computed as log(sum(exp(x))), no max subtraction.

Right for logits of moderate magnitude (the built-in task's cases before the hostile ones: up to
~30, exp(30) * 128256 ~ 1.4e18, fine in float32); wrong once exp overflows (rows around +1000:
log(inf)) or every exp underflows (rows around -1000: log(0) = -inf)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _cross_entropy_naive(logits_ptr, targets_ptr, loss_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * V
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
        total += tl.exp(x)
    target = tl.load(targets_ptr + row)
    safe = tl.where(target == -100, 0, target)
    picked = tl.load(base + safe).to(tl.float32)
    loss = tl.log(tl.sum(total, axis=0)) - picked
    tl.store(loss_ptr + row, tl.where(target == -100, 0.0, loss))


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    m, v = logits.shape
    loss = torch.empty(m, device=logits.device, dtype=torch.float32)
    _cross_entropy_naive[(m,)](logits, targets, loss, v, BLOCK=min(4096, triton.next_power_of_2(v)))
    return loss
