"""Cross-entropy loss per row from logits and integer class targets (forward), LLM-vocabulary sized."""

import torch

from kernelwright.tasks import Case
from kernelwright.tasks.hostile import hostile_rows
from kernelwright.tasks.inputs import rand, randint, randn

name = "cross_entropy"
difficulty = 3
tags = ("reduction", "softmax", "loss", "memory-bound")
instruction = """
Write Triton kernel(s) and a Python wrapper `cross_entropy(logits, targets)` that returns the
per-row cross-entropy loss, like
torch.nn.functional.cross_entropy(logits.float(), targets, reduction="none", ignore_index=-100):
    loss[i] = logsumexp(logits[i, :]) - logits[i, targets[i]]     if targets[i] != -100
    loss[i] = 0                                                   if targets[i] == -100
logits is a contiguous (M, V) tensor of dtype float32, float16 or bfloat16 with values of
magnitude up to about 5000 (a row may lie entirely around +1000 or -1000, or be constant), and
entries may be -inf (masked vocabulary entries; never at a row's target, never a whole row); targets is a contiguous (M,) int64 tensor with values in [0, V) or
equal to -100 (ignored row). Return a new float32 tensor of shape (M,) (float32 whatever the
logits dtype), computed in float32 with a numerically stable logsumexp (subtract the row max, or
an online max/rescaled sum). V is anything from 1 to 131072 (vocabulary sizes such as 32000,
50257, 128256: not powers of two); M from 1 to tens of thousands. Do not modify the inputs and do
not materialize a (M, V) float32 copy of the logits.
"""
entry_point = "cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor"
triton_reference = "triton_refs/cross_entropy.py"


def make_inputs(case, gen):
    m, v = case.shape
    logits = randn(gen, (m, v), "float32", scale=case.get("scale", 2.0), shift=case.get("shift", 0.0))
    targets = randint(gen, (m,), 0, v)
    # `hostile` adds constant rows or -inf entries (the target's logit stays finite)
    logits = hostile_rows(logits, case.get("hostile"), gen, keep=targets).to(case.torch_dtype)
    ignored = rand(gen, (m,)) < case.get("ignore", 0.0)
    targets = torch.where(ignored, torch.full_like(targets, -100), targets)
    return logits, targets


def reference(logits, targets):
    acc = logits if logits.dtype == torch.float64 else logits.float()
    return torch.nn.functional.cross_entropy(acc, targets, reduction="none", ignore_index=-100)


visible_cases = [Case("float32", shape=(8, 1000)), Case("float16", shape=(16, 32000), ignore=0.25)]
hidden_cases = [
    Case("float32", shape=(1, 1)),
    Case("float32", shape=(3, 128_256), scale=6.0),
    Case("float32", shape=(300, 7), ignore=0.5, hostile="odd-sizes"),
    Case("float16", shape=(5, 50_257)),
    Case("bfloat16", shape=(64, 32000), ignore=0.1),
    # numerically hostile (docs/tasks.md): a logsumexp without max subtraction overflows or logs 0
    Case("float32", shape=(4, 32_003), shift=1000.0, hostile="large-magnitude"),
    Case("float16", shape=(5, 1999), scale=1000.0, hostile="large-magnitude"),
    Case("float32", shape=(6, 4099), shift=-1000.0, ignore=0.2, hostile="all-negative"),
    Case("float32", shape=(8, 3001), hostile="constant-rows"),
    Case("float32", shape=(7, 1500), scale=10.0, ignore=0.2, hostile="neg-inf-mask"),
]
perf_cases = [
    Case("bfloat16", shape=(4096, 128_256)),
    Case("float32", shape=(8192, 32000)),
    Case("float16", shape=(16384, 50_257)),
]


def cost(case):
    m, v = case.shape
    return {"flops": 4 * m * v, "bytes": m * v * case.torch_dtype.itemsize + m * 8 + m * 4}
