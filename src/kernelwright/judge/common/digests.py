"""When two tensors are the same: digests computed where they live (the harness reports a call's
inputs after the call as digests, never the inputs themselves, and the worker compares the two
sides' digests), and bitwise equality (both sides: the worker's cached-result and repeat checks,
the reference child's probes of poisoned memory)."""

from __future__ import annotations

from typing import Any

import torch

from . import wire

# Inputs are checked for mutation by digest, not by shipping copies of them to the worker (an
# 8 GiB KernelBench input made a reply over the 4 GiB frame limit). Words per slice of the digest:
# its temporaries are a few slices, whatever the input's size.
DIGEST_CHUNK_WORDS = 1 << 22
_DIGEST_MUL = 0x9E3779B97F4A7C15 - (1 << 64)  # as a signed int64
_digest_weights: dict[str, Any] = {}


def _weights(torch, device: Any) -> Any:
    """Odd pseudo-random int64 weights, one per word of a slice (made once per device: 32 MiB)."""
    key = str(device)
    if key not in _digest_weights:
        w = torch.arange(DIGEST_CHUNK_WORDS, dtype=torch.int64, device=device)
        w.mul_(_DIGEST_MUL).bitwise_xor_(w >> 29).mul_(_DIGEST_MUL).bitwise_or_(1)
        _digest_weights[key] = w
    return _digest_weights[key]


def tensor_digest(torch, t: Any) -> str:
    """A digest of a tensor's dtype, shape and value bytes (in logical order), computed where the
    tensor lives: per slice of its 64-bit words, the sum of word * weight mod 2**64 (odd weights:
    a bijection, so any single changed word changes the sum; changes that cancel are a 2**-64
    accident), the slices' sums chained. Integer sums wrap and are exact, so the same bytes give
    the same digest whatever the reduction order. Two passes over the data, and temporaries of one
    slice whatever the tensor's size. Not a defence against a forger: the candidate shares its
    process with the harness and could forge copies of its inputs as easily."""
    t = t.detach()
    head = f"{wire.dtype_name(t.dtype)}{list(t.shape)}"
    if t.numel() == 0:
        return head + ":empty"
    flat = t.reshape(-1)  # a view when contiguous; a copy of this one tensor otherwise
    data = flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)
    n = data.numel()
    words = n // 8
    total = 0
    if words:
        try:
            w64 = data[:words * 8].view(torch.int64)
        except RuntimeError:  # an odd storage offset: an aligned copy
            w64 = data[:words * 8].clone().view(torch.int64)
        weights = _weights(torch, w64.device)
        for start in range(0, words, DIGEST_CHUNK_WORDS):
            part = w64[start:start + DIGEST_CHUNK_WORDS]
            total = (total * 1000003 + int((part * weights[:part.numel()]).sum())) % (1 << 64)
    tail = data[words * 8:]
    if tail.numel():
        total = (total * 1000003 + int.from_bytes(bytes(tail.cpu().tolist()), "little") + 1) % (1 << 64)
    return f"{head}:{n}:{total:016x}"


def tensor_digests(torch, tensors: list) -> list[str]:
    return [tensor_digest(torch, t) for t in tensors]


def identical(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Bitwise equality (NaNs with the same bits are equal)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.numel() and not bitwise_equal(x, y):
            return False
    return True


def bitwise_equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Same bytes, compared through the widest integer view that fits (torch.equal over int64 is
    seven times faster than over bytes on CPU: 29 ms against 200 ms for 128 MiB)."""
    x, y = x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)
    if x.numel() != y.numel():
        return False
    for dtype, size in ((torch.int64, 8), (torch.int32, 4), (torch.int16, 2)):
        if x.numel() % size == 0 and x.data_ptr() % size == 0 and y.data_ptr() % size == 0:
            return torch.equal(x.view(dtype), y.view(dtype))
    return torch.equal(x, y)
