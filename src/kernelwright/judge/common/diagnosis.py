"""The basic profile's diagnosis: documented rules over a SIDE's numbers (`profile.build_side`),
computed on the trusted side, never by an LLM. Each rule is one function with its threshold in
its docstring (docs/judge.md lists them); each finding is a DIAG, `{"rule", "kernel", "value",
"text"}`, whose text is one sentence with the numbers, read by a person and by an agent alike.
Standard library only.
"""

from __future__ import annotations

from typing import Callable

from .hardware import DeviceSpec

MEMORY_BOUND_FRAC = 0.6
COMPUTE_BOUND_FRAC = 0.5
FAR_BELOW_FRAC = 0.3
LOW_OCCUPANCY = 0.25
SHARED_LIMITED_OCCUPANCY = 0.5
OUTSIDE_KERNELS_FRAC = 0.5


def _pct(frac: float) -> str:
    """A fraction as a percentage; "<1%" rather than a "0%" that reads as nothing at all."""
    return "<1%" if 0 < frac < 0.005 else f"{frac:.0%}"


def _diag(rule: str, kernel: str | None, value: float | None, text: str) -> dict:
    return {"rule": rule, "kernel": kernel, "value": value, "text": text}


def memory_bound(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """bandwidth_frac >= 0.6: the call moves its bytes at 60% or more of peak bandwidth."""
    frac = side.get("bandwidth_frac")
    if frac is None or frac < MEMORY_BOUND_FRAC or spec is None:
        return []
    return [_diag("memory_bound", None, frac,
                  f"memory-bound at {frac:.0%} of peak bandwidth ({frac * spec.bandwidth_tbs:.1f} of "
                  f"{spec.bandwidth_tbs:g} TB/s): little left to gain")]


def compute_bound(side: dict, spec: DeviceSpec | None, peak_tflops: float | None = None) -> list[dict]:
    """flop_frac >= 0.5: the call runs at half the peak FLOP rate or more (tasks with a cost model)."""
    frac = side.get("flop_frac")
    if frac is None or frac < COMPUTE_BOUND_FRAC:
        return []
    rate = f" ({frac * peak_tflops:.0f} of {peak_tflops:g} TFLOP/s)" if peak_tflops else ""
    return [_diag("compute_bound", None, frac, f"compute-bound at {frac:.0%} of the peak FLOP rate{rate}")]


def far_below_roofline(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """Neither bandwidth_frac nor flop_frac reaches 0.3, where at least one is known."""
    known = {name: side.get(name) for name in ("bandwidth_frac", "flop_frac") if side.get(name) is not None}
    if not known or any(v >= FAR_BELOW_FRAC for v in known.values()):
        return []
    parts = [f"{_pct(v)} of peak {'bandwidth' if k == 'bandwidth_frac' else 'FLOP rate'}" for k, v in known.items()]
    return [_diag("far_below_roofline", None, max(known.values()),
                  f"far below the roofline: {' and '.join(parts)} (under {FAR_BELOW_FRAC:.0%} of both); "
                  "look at memory access patterns (coalescing, re-reads) and the launch configuration")]


def grid_too_small(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """programs < SM count (under 1 program per SM or compute unit): some SMs stay idle."""
    if spec is None or not spec.sm_count:
        return []
    return [_diag("grid_too_small", ln["kernel"], float(ln["programs"]),
                  f"{ln['kernel']} runs {ln['programs']} program(s) on a GPU of {spec.sm_count} SMs: "
                  f"at least {spec.sm_count - ln['programs']} SMs stay idle")
            for ln in side.get("launches", []) if 0 < ln["programs"] < spec.sm_count]


def register_spills(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """A launch whose kernel spills registers (spills > 0): local memory traffic."""
    return [_diag("register_spills", ln["kernel"], float(ln["spills"]),
                  f"{ln['kernel']} spills {ln['spills']} register(s) to local memory ({ln['registers']} registers "
                  f"per thread, {ln['num_warps']} warps): smaller blocks or fewer live values per thread")
            for ln in side.get("launches", []) if ln.get("spills")]


def low_occupancy(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """A launch whose theoretical occupancy is below 0.25 of the SM's warps."""
    return [_diag("low_occupancy", ln["kernel"], ln["occupancy"],
                  f"{ln['kernel']} has a theoretical occupancy of {ln['occupancy']:.0%} "
                  f"(limited by {str(ln['occupancy_limit']).replace('_', ' ')})")
            for ln in side.get("launches", []) if ln.get("occupancy") is not None and ln["occupancy"] < LOW_OCCUPANCY]


def shared_memory_limited(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """A launch whose occupancy is set by shared memory and stays below 0.5."""
    return [_diag("shared_memory_limited", ln["kernel"], ln["occupancy"],
                  f"{ln['kernel']} uses {ln['shared_bytes']} bytes of shared memory per program, which caps its "
                  f"occupancy at {ln['occupancy']:.0%}: fewer stages or smaller tiles")
            for ln in side.get("launches", [])
            if ln.get("occupancy_limit") == "shared_memory" and ln.get("occupancy") is not None
            and ln["occupancy"] < SHARED_LIMITED_OCCUPANCY]


def time_outside_kernels(side: dict, spec: DeviceSpec | None) -> list[dict]:
    """The own kernels take under half the call's device time (kernel_ms / call_ms < 0.5): the
    rest is other launches (torch) or gaps between launches. Only where own launches were timed."""
    kernel_ms, call_ms = side.get("kernel_ms"), side.get("call_ms")
    if not side.get("launches") or kernel_ms is None or not call_ms or kernel_ms / call_ms >= OUTSIDE_KERNELS_FRAC:
        return []
    share = kernel_ms / call_ms
    return [_diag("time_outside_kernels", None, round(share, 4),
                  f"the call's own kernels take {share:.0%} of its device time ({kernel_ms:.3f} of {call_ms:.3f} ms): "
                  "the rest is other launches or gaps between them")]


RULES: tuple[Callable[..., list[dict]], ...] = (
    memory_bound, far_below_roofline, grid_too_small, register_spills, low_occupancy,
    shared_memory_limited, time_outside_kernels)


def diagnose(side: dict, spec: DeviceSpec | None, peak_tflops: float | None = None) -> list[dict]:
    """Every finding of the basic rules on one SIDE, in the rules' order."""
    found = memory_bound(side, spec) + compute_bound(side, spec, peak_tflops)
    for rule in RULES[1:]:
        found += rule(side, spec)
    return found
