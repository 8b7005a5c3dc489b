"""The diagnosis of a measured ("full") profile: what a hardware profiler's counters say about one
side's kernels, as DIAG dicts ({"rule", "kernel", "value", "text"}) a person and an LLM read.
Computed on the trusted side from the FULL dict (`judge.worker.fullprofile`), never by an LLM;
a diagnosis never changes a verdict. Each rule's threshold is in its docstring (and in
docs/profile.md). Standard library only (judge/common)."""

from __future__ import annotations

from typing import Any

SECTOR_BYTES = 32
# Triton loads contiguous data as 16-byte vectors per lane: a warp's request then covers 512
# bytes, 16 sectors. Above that, lanes touch more sectors than even 16-byte lanes need when
# contiguous; 32 (one sector per lane) is the most one request can touch.
MAX_COALESCED_SECTORS_PER_REQUEST = 16.0
L2_TRAFFIC_FACTOR = 4.0          # L2 bytes over the call's inputs + outputs
RE_READ_FACTOR = 1.5             # DRAM bytes over the call's inputs + outputs
LOW_ACHIEVED_OCCUPANCY = 0.25    # the basic level's low_occupancy threshold, measured instead
DRAM_BOUND_PCT = 70.0
TOP_STALL_FRACTION = 0.25
MAIN_KERNEL_SHARE = 0.2          # per-kernel rules skip kernels with less of the side's kernel time

# What each warp-stall reason (Nsight Compute's names) usually means, and what helps.
STALL_HINTS = {
    "long_scoreboard": "waiting on global or local memory: more bytes in flight (larger blocks, more stages) "
                       "or fewer bytes moved",
    "short_scoreboard": "waiting on shared memory or special math (MUFU): fewer shared-memory round trips",
    "mio_throttle": "the memory input/output queue is full (shared memory, special math): fewer, wider accesses",
    "lg_throttle": "the local/global memory queue is full: wider (vectorised) loads, fewer instructions",
    "math_pipe_throttle": "a math pipe is saturated: the kernel is compute-bound on that pipe",
    "barrier": "waiting at a barrier (tl.debug_barrier, reductions): less synchronisation per tile",
    "membar": "waiting at a memory barrier: fewer fences or atomics",
    "wait": "fixed-latency dependencies: more independent work per warp",
    "not_selected": "eligible but not picked: the schedulers are busy (a good sign)",
    "no_instruction": "instruction cache misses or branch targets: smaller code",
    "branch_resolving": "branch resolution: less divergent control flow",
    "dispatch_stall": "dispatch stalls: the pipeline was not ready",
    "drain": "draining memory stores at exit",
    "imc_miss": "constant cache misses",
    "tex_throttle": "the texture pipe is full",
    "sleeping": "warps sleeping (nanosleep)",
    "misc": "miscellaneous reasons",
}


def _diag(rule: str, kernel: str | None, value: float | None, text: str) -> dict:
    return {"rule": rule, "kernel": kernel, "value": round(value, 4) if value is not None else None, "text": text}


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _main_kernels(kernels: list[dict]) -> list[dict]:
    """Kernels with at least MAIN_KERNEL_SHARE of the side's kernel time (all where unknown)."""
    total = sum(k.get("duration_ms") or 0.0 for k in kernels)
    if total <= 0:
        return kernels
    return [k for k in kernels if (k.get("duration_ms") or 0.0) / total >= MAIN_KERNEL_SHARE]


def uncoalesced(kernel: dict, bytes_min: int | None) -> dict | None:
    """Lanes of a warp touch scattered sectors: L1 sectors per global-load request above 16
    (MAX_COALESCED_SECTORS_PER_REQUEST: contiguous 16-byte lanes need 16), or, where the L1 figure
    is unknown (AMD), L2 traffic (sectors x 32 B) above 4 x the call's inputs + outputs in a kernel
    that is not compute-busy (SM throughput below 50%: a matrix product re-reads its tiles from L2
    by design)."""
    name, spr = kernel.get("kernel"), kernel.get("l1_sectors_per_request")
    if spr is not None and spr > MAX_COALESCED_SECTORS_PER_REQUEST:
        return _diag("uncoalesced", name, spr,
                     f"uncoalesced global loads in {name}: {spr:.1f} L1 sectors per request (16 when a warp's "
                     "lanes read contiguous 16-byte vectors): neighbouring lanes should read neighbouring "
                     "addresses (make the fastest-varying index the contiguous one)")
    l2 = kernel.get("l2_sectors")
    sm = kernel.get("sm_throughput_pct")
    if spr is None and l2 and bytes_min and l2 * SECTOR_BYTES > L2_TRAFFIC_FACTOR * bytes_min and (sm is None or sm < 50):
        factor = l2 * SECTOR_BYTES / bytes_min
        return _diag("uncoalesced", name, factor,
                     f"{name} moves {factor:.1f}x its inputs and outputs through L2 ({_mb(l2 * SECTOR_BYTES)} "
                     f"for {_mb(bytes_min)}): scattered accesses fetch whole sectors for a few bytes each")
    return None


def re_read(full: dict, bytes_min: int | None) -> dict | None:
    """Data read from DRAM more than once: the side's DRAM bytes above 1.5 x its inputs + outputs
    (RE_READ_FACTOR; measured traffic of a single pass is within ~10% of that)."""
    dram = full.get("dram_bytes")
    if not dram or not bytes_min or dram <= RE_READ_FACTOR * bytes_min:
        return None
    factor = dram / bytes_min
    return _diag("re_read", None, factor,
                 f"DRAM traffic is {factor:.1f}x the inputs and outputs ({_mb(dram)} for {_mb(bytes_min)}): data is "
                 "read (or written) more than once; fuse the passes or keep the reused tile on chip")


def low_achieved_occupancy(kernel: dict) -> dict | None:
    """Achieved occupancy (warps resident per active cycle over the SM's maximum) below 0.25
    (LOW_ACHIEVED_OCCUPANCY, the basic level's theoretical threshold)."""
    occ = kernel.get("achieved_occupancy")
    if occ is None or occ >= LOW_ACHIEVED_OCCUPANCY:
        return None
    name = kernel.get("kernel")
    return _diag("low_achieved_occupancy", name, occ,
                 f"{name} keeps {occ:.0%} of the SM's warp slots busy: too few warps to hide memory latency "
                 "(more programs, fewer registers or less shared memory per program)")


def dram_bound_measured(kernel: dict) -> dict | None:
    """DRAM throughput at or above 70% of its peak (DRAM_BOUND_PCT) as the profiler measured it."""
    pct = kernel.get("dram_throughput_pct")
    if pct is None or pct < DRAM_BOUND_PCT:
        return None
    name = kernel.get("kernel")
    return _diag("dram_bound_measured", name, pct / 100.0,
                 f"{name} runs DRAM at {pct:.0f}% of its peak: memory-bound, as measured; only moving fewer "
                 "bytes makes it faster")


def top_stall(kernel: dict) -> dict | None:
    """The top warp-stall reason when it accounts for at least 25% of the stalls (TOP_STALL_FRACTION)."""
    stalls = kernel.get("stalls") or []
    if not stalls or stalls[0][1] < TOP_STALL_FRACTION:
        return None
    reason, share = stalls[0]
    name = kernel.get("kernel")
    hint = STALL_HINTS.get(reason, "see the Nsight Compute guide for this reason")
    return _diag("top_stall", name, share, f"{name}'s warps stall mostly on {reason} ({share:.0%} of stalls): {hint}")


def grid_too_small(kernel: dict, sm_count: int | None) -> dict | None:
    """Fewer programs than the device has SMs (launch__grid_size as the profiler saw the launch)."""
    programs = kernel.get("programs")
    if not programs or not sm_count or programs >= sm_count:
        return None
    name = kernel.get("kernel")
    return _diag("grid_too_small", name, float(programs),
                 f"{name} launched {programs} program{'s' if programs != 1 else ''} for {sm_count} SMs (measured): "
                 "most of the GPU sits idle; split the work over more programs")


def register_spills(kernel: dict) -> dict | None:
    """Local memory traffic was measured (> 0 bytes): registers spilled to memory (or a local array)."""
    local = kernel.get("local_bytes")
    if not local:
        return None
    name = kernel.get("kernel")
    return _diag("register_spills", name, float(local),
                 f"{name} moved {_mb(local)} through local memory (measured): registers spill; smaller blocks, "
                 "fewer live values, or more warps per program")


def full_diagnosis(full: dict, bytes_min: int | None = None, spec: Any = None,
                   sm_count: int | None = None) -> list[dict]:
    """Every full-level DIAG for one side's FULL dict. `bytes_min`: the call's inputs + outputs
    (trusted: the reference's tensors); `spec`: the DeviceSpec (its sm_count), or `sm_count`."""
    if not isinstance(full, dict) or "skipped" in full:
        return []
    sm_count = sm_count or getattr(spec, "sm_count", None)
    kernels = [k for k in full.get("kernels") or [] if isinstance(k, dict)]
    out = []
    for kernel in kernels:  # structural findings: on every kernel
        out += [d for d in (uncoalesced(kernel, bytes_min), grid_too_small(kernel, sm_count),
                            register_spills(kernel)) if d]
    found = re_read(full, bytes_min)
    if found:
        out.append(found)
    for kernel in _main_kernels(kernels):  # rates and stalls: only where the time goes
        out += [d for d in (dram_bound_measured(kernel), low_achieved_occupancy(kernel), top_stall(kernel)) if d]
    return out
