"""The basic profile, trusted side: a theoretical occupancy per launch from the GPU's table
(`hardware.DeviceSpec`), and one SIDE of `Verdict.profile` built from a child's `Profile` reply,
the judge's own median time and the bytes the call must move at least. The shape of what is
built is the data contract of docs/judge.md ("profile"). Standard library only.

What comes from the (untrusted) child: the kernel metadata (registers, spills, shared memory,
num_warps, num_stages), the grid and the per-launch and per-call event times. What is the
judge's own: `time_ms` (the perf stage's median) and, from the reference's tensors,
`bytes_min`; the fractions of peak are computed from those two only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .hardware import DeviceSpec

# NVIDIA allocates registers per warp in units of 256 (CUDA occupancy calculator, sm_50 and on);
# AMD allocates VGPRs per lane in granules of 8 (CDNA2/CDNA3).
NVIDIA_REGISTER_UNIT = 256
AMD_VGPR_GRANULE = 8
# NVIDIA reserves 1 KiB of shared memory per resident block (sm_80 and on: CUDA C guide)
NVIDIA_RESERVED_SMEM = 1024
SMEM_UNIT = 128  # shared memory is allocated in 128-byte units


@dataclass(frozen=True)
class Occupancy:
    fraction: float | None   # resident warps / max warps per SM, 0..1
    limit: str | None        # "registers" | "shared_memory" | "warps" | "blocks"
    blocks: int | None       # resident blocks per SM


UNKNOWN = Occupancy(None, None, None)


def occupancy(spec: DeviceSpec | None, num_warps: int, registers: int | None, shared_bytes: int | None) -> Occupancy:
    """The theoretical occupancy of one launch: resident blocks per SM are the least of what
    registers, shared memory, warps and the block limit allow; the limit named is the one that
    binds (ties go to the hardware ceilings, warps then blocks, which no kernel change lifts).
    Unknown (None) where the table or the metadata lacks a figure."""
    if spec is None or not num_warps or not spec.max_warps_per_sm or not spec.max_blocks_per_sm:
        return UNKNOWN
    max_warps = spec.max_warps_per_sm
    limits: dict[str, float] = {"warps": max_warps // num_warps, "blocks": spec.max_blocks_per_sm}
    regs = spec.registers_per_sm
    if registers and regs:
        limits["registers"] = regs // (_regs_per_warp(spec, registers) * num_warps)
    if shared_bytes is not None and spec.smem_per_sm_kb:
        per_block = _smem_per_block(spec, shared_bytes)
        limits["shared_memory"] = (spec.smem_per_sm_kb * 1024) // per_block if per_block else math.inf
    blocks = int(min(limits.values()))
    limit = next(name for name in ("warps", "blocks", "registers", "shared_memory")
                 if name in limits and limits[name] == blocks)
    return Occupancy(round(min(1.0, blocks * num_warps / max_warps), 4), limit, blocks)


def _regs_per_warp(spec: DeviceSpec, registers: int) -> int:
    if spec.vendor == "amd":
        return -(-registers // AMD_VGPR_GRANULE) * AMD_VGPR_GRANULE * spec.warp_size
    return -(-registers * spec.warp_size // NVIDIA_REGISTER_UNIT) * NVIDIA_REGISTER_UNIT


def _smem_per_block(spec: DeviceSpec, shared_bytes: int) -> int:
    if spec.vendor == "amd":
        return -(-shared_bytes // SMEM_UNIT) * SMEM_UNIT
    return -(-(shared_bytes + NVIDIA_RESERVED_SMEM) // SMEM_UNIT) * SMEM_UNIT


def launch_entry(record: Any, spec: DeviceSpec | None, call_ms: float | None) -> dict:
    """One LAUNCH of the contract from a child's `messages.LaunchRecord`."""
    grid = list(record.grid)
    occ = occupancy(spec, record.num_warps, record.registers, record.shared_bytes)
    share = (round(record.time_ms / call_ms, 4) if record.time_ms is not None and call_ms else None)
    return {"kernel": record.kernel, "grid": grid, "programs": grid[0] * grid[1] * grid[2],
            "num_warps": record.num_warps, "num_stages": record.num_stages, "registers": record.registers,
            "spills": record.spills, "shared_bytes": record.shared_bytes, "occupancy": occ.fraction,
            "occupancy_limit": occ.limit, "time_ms": _r(record.time_ms), "time_share": share}


def build_side(reply: Any, time_ms: float | None, bytes_min: int | None, spec: DeviceSpec | None,
               flops: float | None, peak_tflops: float | None) -> dict:
    """One SIDE of the contract. `reply`: the child's `messages.Profile` (None when it failed:
    the judge's own numbers are still given); `time_ms`: the judge's median on the case."""
    bandwidth = spec.bandwidth_tbs if spec is not None else None
    side: dict[str, Any] = {
        "time_ms": _r(time_ms), "bytes_min": bytes_min,
        "bandwidth_frac": _frac(bytes_min, time_ms, bandwidth), "flops": flops,
        "flop_frac": _frac(flops, time_ms, peak_tflops) if flops else None,
        "call_ms": None, "kernel_ms": None, "launches": [], "diagnosis": []}
    if reply is not None:
        call_ms = reply.call_ms
        launches = [launch_entry(r, spec, call_ms) for r in reply.launches]
        times = [r.time_ms for r in reply.launches if r.time_ms is not None]
        side.update(call_ms=_r(call_ms), launches=launches,
                    kernel_ms=_r(sum(times)) if times and len(times) == len(launches) else None)
        if reply.more_launches:
            side["more_launches"] = reply.more_launches
    return side


def _frac(amount: float | None, time_ms: float | None, peak_per_s_e12: float | None) -> float | None:
    """amount / time as a fraction of a peak given in 10^12 per second (TB/s, TFLOP/s)."""
    if not amount or not time_ms or not peak_per_s_e12 or time_ms <= 0:
        return None
    return round(amount / (time_ms * 1e-3) / (peak_per_s_e12 * 1e12), 4)


def _r(value: float | None, digits: int = 5) -> float | None:
    return None if value is None else round(float(value), digits)
