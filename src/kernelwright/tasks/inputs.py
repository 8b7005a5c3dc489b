"""Seeded input helpers for task files' `make_inputs(case, gen)`.

`gen` is a `torch.Generator` on the judged device: the same seed gives the same inputs in every
process on that device, which is how the reference and the candidate see identical data without
shipping it between processes.
"""

from __future__ import annotations

from typing import Sequence

import torch


def _dtype(dtype: str | torch.dtype) -> torch.dtype:
    return getattr(torch, dtype) if isinstance(dtype, str) else dtype


def randn(gen: torch.Generator, shape: Sequence[int], dtype="float32", scale: float = 1.0, shift: float = 0.0):
    """Normal(shift, scale) samples, drawn in float32 and cast (so every dtype sees the same values)."""
    x = torch.randn(tuple(shape), generator=gen, device=gen.device, dtype=torch.float32)
    if scale != 1.0:
        x.mul_(scale)
    if shift:
        x.add_(shift)
    return x.to(_dtype(dtype))


def rand(gen: torch.Generator, shape: Sequence[int], dtype="float32", low: float = 0.0, high: float = 1.0):
    x = torch.rand(tuple(shape), generator=gen, device=gen.device, dtype=torch.float32)
    return (x * (high - low) + low).to(_dtype(dtype))


def randint(gen: torch.Generator, shape: Sequence[int], low: int, high: int, dtype="int64"):
    return torch.randint(low, high, tuple(shape), generator=gen, device=gen.device, dtype=_dtype(dtype))
