"""Poisoned memory: where a call leaves outputs unwritten or reads memory it never initialised,
the result depends on the poison and shows up, instead of passing on memory that happens to be
zero. The candidate's outputs are allocated poisoned during checks; a foreign reference is probed
by running it again on poisoned memory and finding the positions that changed."""

from __future__ import annotations

from typing import Any

from ..common import wire
from ..common.digests import identical

POISON_BYTE = 0xFF  # NaN in every float format, -1 in signed ints: an unwritten output never passes
FREE_MEMORY_POISON_BYTES = 64 << 20
# Poisoned guard zones around each input during a probe: reads past either end of an input (a
# 0-dim scale tensor indexed per block, say) land on poison instead of a neighbouring live tensor.
GUARD_BYTES = 1 << 20

# Elements per slice when a probe's runs disagree somewhere and the positions must be found.
MASK_CHUNK_GPU = 1 << 24
MASK_CHUNK_CPU = 1 << 18

# Tensors a probed call creates itself (a GEAK test function builds its inputs inside the call)
# get smaller zones than its arguments: there can be many of them.
ALLOC_GUARD_BYTES = 256 << 10


def in_guard_zone(torch, t: Any, byte: int, zone_bytes: int) -> Any:
    """A copy of `t` (same shape, strides, values) placed between two `zone_bytes` zones filled
    with `byte`; `t` itself when it cannot be copied this way (not strided, empty, overlapping
    strides, no memory left)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.numel() == 0:
        return t
    try:
        span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        nbytes = span * t.element_size()
        zone = torch.full((2 * zone_bytes + nbytes,), byte, dtype=torch.uint8, device=t.device)
        copy = zone[zone_bytes:zone_bytes + nbytes].view(t.dtype).as_strided(t.shape, t.stride())
        copy.copy_(t.detach())
        return copy.requires_grad_(t.requires_grad)
    except (RuntimeError, MemoryError):  # internal overlap (expanded views) or out of memory
        return t


def guarded_allocations(torch, device_type: str, byte: int, zone_bytes: int = ALLOC_GUARD_BYTES):
    """A torch function mode under which every tensor created on `device_type` by a factory
    (torch.randn, torch.empty, ..._like, new_...) or moved there (`.to`, `.cuda`) lies between
    zones filled with `byte`. Probes run a foreign reference under it, so a read past the end
    of a tensor the call made itself depends on the poison and shows up as undefined."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors

    constructors = _device_constructors()
    made_like = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                 "randint_like", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor",
                 "new_empty_strided"}
    moved = {"to", "cuda"}

    class GuardedAllocations(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", "")
            if not isinstance(result, torch.Tensor) or result.device.type != device_type:
                return result
            if name in moved:
                source = args[0] if args else None
                if not isinstance(source, torch.Tensor) or source.device.type == device_type:
                    return result  # already there: no new memory
            elif func not in constructors and name not in made_like:
                return result
            return in_guard_zone(torch, result, byte, zone_bytes)

    return GuardedAllocations()


def guarded(torch, args: tuple, byte: int) -> tuple:
    """`args` with every tensor copied between two GUARD_BYTES zones filled with `byte`, same
    shape and strides. A value the call computes from memory outside its inputs then differs
    between the two probes, and that position counts as undefined. (Without the guards such
    reads hit whatever tensor lies next door: the same in both probes, different in another
    process, so a reference compared with itself failed at random.) A tensor that cannot be
    copied this way (overlapping strides, no memory left) is passed as it is."""

    def place(t: Any) -> Any:
        return in_guard_zone(torch, t, byte, GUARD_BYTES)

    def walk(value: Any) -> Any:
        if isinstance(value, (tuple, list)):
            items = [walk(v) for v in value]
            return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return place(value)

    return tuple(walk(a) for a in args)


class PoisonSwitch:
    """Whether the allocators poison what they return right now, and with which byte."""

    def __init__(self) -> None:
        self.on = False
        self.byte = POISON_BYTE


def install_poisoning_allocators(torch, switch: PoisonSwitch) -> None:
    """torch.empty & co. return memory filled with 0xFF while correctness is checked, so an
    output the kernel never writes reads back as NaN / -1 instead of plausible stale data."""
    targets = [(torch, "empty"), (torch, "empty_like"), (torch, "empty_strided"),
               (torch.Tensor, "new_empty"), (torch.Tensor, "new_empty_strided")]
    for owner, name in targets:
        original = getattr(owner, name, None)
        if original is None:
            continue

        def poisoned(*args, _original=original, **kwargs):
            result = _original(*args, **kwargs)
            if switch.on and isinstance(result, torch.Tensor) and result.numel():
                result.untyped_storage().fill_(switch.byte)
            return result

        setattr(owner, name, poisoned)


def poison_free_memory(torch, empty: Any, sizes: list[int], byte: int) -> None:
    """Fill the caching allocator's free blocks (exact output sizes first) with `byte`, so memory
    obtained without torch.empty (or freed by an earlier call) is poisoned as well. `empty` is the
    harness's own torch.empty, taken before foreign code ran. GPU only."""
    blocks = [empty(int(n), dtype=torch.uint8, device="cuda") for n in sizes if n > 0]
    blocks.append(empty(FREE_MEMORY_POISON_BYTES, dtype=torch.uint8, device="cuda"))
    for b in blocks:
        b.fill_(byte)
    del blocks


def changed_positions(torch, task: Any, device: str, ref: Any, others: list) -> Any:
    """A CPU bool mask of the positions where `ref` and the poisoned runs `others` disagree
    beyond the task's tolerance, or None where they all agree. Bitwise-equal runs (a call
    that writes everything it returns) are settled without arithmetic; otherwise the slices
    are compared on the GPU when there is one: GEAK results come back as CPU tensors, and
    three float64 passes over a 8192x8192 output took 10 s of CPU."""

    if all(identical([ref], [o.to(ref.device)]) for o in others):
        return None
    is_gpu = device == "cuda"
    where = device if is_gpu else "cpu"
    chunk = MASK_CHUNK_GPU if is_gpu else MASK_CHUNK_CPU
    floating = ref.is_floating_point() or ref.is_complex()
    tol = task.tolerance_for(wire.dtype_name(ref.dtype)) if floating else None
    flat = [t.reshape(-1) for t in (ref, *others)]
    mask = torch.zeros(ref.numel(), dtype=torch.bool)
    for start in range(0, ref.numel(), chunk):
        part = [f[start:start + chunk].to(where) for f in flat]
        if floating:
            part = [p.to(torch.complex128 if p.is_complex() else torch.float64) for p in part]
        changed = torch.zeros(part[0].shape, dtype=torch.bool, device=part[0].device)
        for a, b in ((part[0], part[1]), (part[0], part[2]), (part[1], part[2])):
            if floating:
                same = torch.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
            else:
                same = a == b
            changed |= ~same
        mask[start:start + chunk] = changed.cpu()
    return mask.reshape(ref.shape) if bool(mask.any()) else None
