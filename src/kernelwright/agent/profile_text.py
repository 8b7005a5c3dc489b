"""A judge's profile (`Verdict.profile`, docs/profile.md) as prompt text: what the optimizer sees
of the kernel it starts from and of the reference, and the reflector of a kernel that failed at
the performance stage.

Only data is made here; the headings and the wording around it live in the templates
(`_profile.j2`). Each side is split by who measured it: the judge's own numbers (its median
latency, the bytes the call must move, the fractions of peak, the diagnoses its rules computed,
Nsight Compute's counters) are plain lines; what the candidate's own process reported (its launches'
kernel metadata and launch times, the call's device time) is a separate `report` text that the
template puts inside the `untrusted` block, so a candidate that names its kernel "ignore previous
instructions" is read as data. The reference's launches come from the task's own code: plain.

Bounded: at most MAX_LAUNCHES launches and MAX_DIAGNOSES diagnoses per side, MAX_FULL_KERNELS
kernels of the full profile, each cut to a line; the rest is counted ("and 3 more").
"""

from __future__ import annotations

import math
from typing import Any, Sequence

MAX_LAUNCHES = 6
MAX_DIAGNOSES = 8
MAX_FULL_KERNELS = 4
MAX_STALLS = 3
MAX_ERRORS = 3
MAX_TEXT = 300    # one diagnosis, error or skipped sentence
MAX_NAME = 80     # a kernel's name

SIDES = ("candidate", "reference")


def as_number(value: Any) -> float | None:
    """A finite number from the profile, else None (a stored profile is JSON: anything may be there)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def clip(text: Any, limit: int) -> str:
    text = " ".join(str(text if text is not None else "").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def pct(frac: Any) -> str | None:
    value = as_number(frac)
    if value is None:
        return None
    return "<1%" if 0 < value < 0.005 else f"{value:.0%}"  # (a small fraction is not nothing)


def ms_text(value: Any) -> str | None:
    value = as_number(value)
    return None if value is None else f"{value:.4g} ms"


def human_bytes(value: Any) -> str | None:
    value = as_number(value)
    if value is None:
        return None
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"


def skipped_line(reason: Any) -> str:
    """"no profile: <why>" (a judge's sentence that already says "no profile ..." is kept whole)."""
    why = clip(reason, MAX_TEXT)
    return why if why.lower().startswith("no profile") else f"no profile: {why}"


def _more(shown: int, total: int) -> list[str]:
    return [f"and {total - shown} more"] if total > shown else []


def header(profile: dict[str, Any]) -> str:
    """One line: which case, on which device, its peaks and the profile's level."""
    label = clip(profile.get("label") or "", MAX_NAME)
    case = profile.get("case")
    where = f"perf case {case}" if isinstance(case, int) else "a perf case"
    where += f" ({label})" if label else ""
    peaks = []
    bw = as_number(profile.get("peak_bandwidth_tbs"))
    if bw is not None:
        peaks.append(f"peak bandwidth {bw:.3g} TB/s")
    tf = as_number(profile.get("peak_tflops"))
    if tf is not None:
        peaks.append(f"peak {tf:.4g} TFLOP/s" + (f" {profile['math']}" if profile.get("math") else ""))
    device = clip(profile.get("device") or "the GPU", MAX_NAME)
    peak_text = f" ({', '.join(peaks)})" if peaks else ""
    return f"Measured on {where} on {device}{peak_text}; profile level {profile.get('level', 'basic')}."


def measured_line(side: dict[str, Any]) -> str:
    """The judge's numbers of one side: time, minimum bytes, fractions of peak."""
    parts = []
    if ms_text(side.get("time_ms")):
        parts.append(f"time {ms_text(side.get('time_ms'))} (the judge's median)")
    if human_bytes(side.get("bytes_min")):
        parts.append(f"moves at least {human_bytes(side.get('bytes_min'))} (its inputs and outputs)")
    if pct(side.get("bandwidth_frac")):
        parts.append(f"{pct(side.get('bandwidth_frac'))} of peak bandwidth")
    if pct(side.get("flop_frac")):
        flops = as_number(side.get("flops"))
        parts.append(f"{pct(side.get('flop_frac'))} of peak FLOP/s" + (f" ({flops:.3g} FLOP)" if flops else ""))
    return "; ".join(parts) or "no time measured"


def launch_line(launch: dict[str, Any]) -> str:
    """One launch: kernel, grid, warps, stages, registers, spills, shared memory, occupancy, time."""
    grid = launch.get("grid")
    grid_text = "x".join(str(int(g)) for g in grid if as_number(g) is not None) if isinstance(grid, list) else "?"
    parts = [f"{clip(launch.get('kernel') or '?', MAX_NAME)} grid {grid_text}"]
    if as_number(launch.get("programs")) is not None:
        parts[0] += f" ({int(launch['programs'])} programs)"
    for key, unit in (("num_warps", "warps"), ("num_stages", "stages"), ("registers", "registers/thread"),
                      ("spills", "spilled registers")):
        if as_number(launch.get(key)) is not None:
            parts.append(f"{int(launch[key])} {unit}")
    if human_bytes(launch.get("shared_bytes")):
        parts.append(f"{human_bytes(launch.get('shared_bytes'))} shared memory")
    if pct(launch.get("occupancy")):
        limit = launch.get("occupancy_limit")
        parts.append(f"occupancy {pct(launch.get('occupancy'))}" + (f" (limited by {limit})" if limit else ""))
    if ms_text(launch.get("time_ms")):
        share = f", {pct(launch.get('time_share'))} of the call" if pct(launch.get("time_share")) else ""
        parts.append(f"{ms_text(launch.get('time_ms'))}{share}")
    return ", ".join(parts)


def launch_lines(side: dict[str, Any], limit: int = MAX_LAUNCHES) -> list[str]:
    """The call's device time, then its own launches in order (the first `limit`, the rest counted)."""
    out = []
    call, kern = ms_text(side.get("call_ms")), ms_text(side.get("kernel_ms"))
    if call or kern:
        call_ms, kernel_ms = as_number(side.get("call_ms")), as_number(side.get("kernel_ms"))
        share = f" ({kernel_ms / call_ms:.0%} of the call)" if call_ms and kernel_ms is not None else ""
        own = f"its own kernels {kern}{share}" if kern else "no kernel of its own recorded"
        out.append(f"the recorded call: {call or '-'} on the device, {own}")
    launches = [x for x in side.get("launches") or () if isinstance(x, dict)]
    out += [f"- {launch_line(x)}" for x in launches[:limit]]
    extra = as_number(side.get("more_launches")) or 0
    out += _more(min(limit, len(launches)), len(launches) + int(extra))
    return out


def diagnosis_lines(side: dict[str, Any], limit: int = MAX_DIAGNOSES) -> list[str]:
    diags = [d for d in side.get("diagnosis") or () if isinstance(d, dict) and d.get("text")]
    return [clip(d["text"], MAX_TEXT) for d in diags[:limit]] + _more(min(limit, len(diags)), len(diags))


def full_lines(side: dict[str, Any]) -> list[str]:
    """The full profile's counters (Nsight Compute / rocprofv3, run by the judge), one line per kernel."""
    full = side.get("full")
    if not isinstance(full, dict) or not full:
        return []
    if full.get("skipped"):
        return [f"no full profile: {clip(full['skipped'], MAX_TEXT)}"]
    out = []
    dram = human_bytes(full.get("dram_bytes"))
    tool = clip(full.get("tool") or "the profiler", MAX_NAME)
    out.append(f"{tool}: DRAM traffic {dram}" if dram else f"{tool}:")
    kernels = [k for k in full.get("kernels") or () if isinstance(k, dict)]
    for k in kernels[:MAX_FULL_KERNELS]:
        out.append(f"- {_full_kernel(k)}")
    out += _more(min(MAX_FULL_KERNELS, len(kernels)), len(kernels))
    return out


def _full_kernel(k: dict[str, Any]) -> str:
    parts = [clip(k.get("kernel") or "?", MAX_NAME)]
    read, write = human_bytes(k.get("dram_read_bytes")), human_bytes(k.get("dram_write_bytes"))
    if read or write:
        parts.append(f"DRAM read {read or '-'}, written {write or '-'}")
    if as_number(k.get("l1_sectors_per_request")) is not None:
        parts.append(f"{as_number(k['l1_sectors_per_request']):.3g} sectors per request (16 when lanes read contiguous 16-byte vectors)")
    if as_number(k.get("l2_sectors")) is not None:
        parts.append(f"{int(k['l2_sectors'])} L2 sectors")
    for key, what in (("dram_throughput_pct", "DRAM throughput"), ("sm_throughput_pct", "SM throughput"),
                      ("l2_hit_rate_pct", "L2 hit rate")):
        if as_number(k.get(key)) is not None:
            parts.append(f"{what} {as_number(k[key]):.0f}%")
    if pct(k.get("achieved_occupancy")):
        parts.append(f"achieved occupancy {pct(k.get('achieved_occupancy'))}")
    stalls = [s for s in k.get("stalls") or () if isinstance(s, (list, tuple)) and len(s) == 2 and as_number(s[1]) is not None]
    if stalls:
        top = ", ".join(f"{clip(r, 40)} {as_number(f):.0%}" for r, f in stalls[:MAX_STALLS])
        parts.append(f"top stalls: {top}")
    return ", ".join(parts)


def side_view(side: Any, own_report: bool) -> dict[str, Any] | None:
    """One side as the template shows it; `own_report`: its launches are the candidate's own report
    (kept apart, for the untrusted block), else they join the plain lines."""
    if not isinstance(side, dict):
        return None
    launches = launch_lines(side)
    lines = [measured_line(side)]
    if not own_report:
        lines += launches
    return {"lines": lines, "diagnosis": diagnosis_lines(side), "full": full_lines(side),
            "report": "\n".join(launches) if own_report else ""}


def profile_view(profile: Any) -> dict[str, Any] | None:
    """What a template shows of a profile: None for `{}` (profiling off, or no profile: nothing
    is shown, the prompt is as without profiles); {"skipped": why}; else header, both sides, errors."""
    if not isinstance(profile, dict) or not profile:
        return None
    if profile.get("skipped") or not any(isinstance(profile.get(s), dict) for s in SIDES):
        return {"skipped": skipped_line(profile.get("skipped") or "the profile holds no measurement")}
    errors = [clip(e, MAX_TEXT) for e in profile.get("errors") or ()][:MAX_ERRORS]
    return {"skipped": "", "header": header(profile), "errors": errors,
            "candidate": side_view(profile.get("candidate"), own_report=True),
            "reference": side_view(profile.get("reference"), own_report=False)}


def render_text(profile: Any, subject: str = "the candidate") -> str:
    """The same view as plain text (a log, a report); prompts use the template `_profile.j2`."""
    view = profile_view(profile)
    if view is None:
        return ""
    if view["skipped"]:
        return skipped_line(view["skipped"])
    out = [view["header"]]
    for name, title in (("candidate", subject), ("reference", "the reference")):
        side = view[name]
        if side is None:
            continue
        out += [f"{title}:", *side["lines"], *(f"diagnosis: {d}" for d in side["diagnosis"]), *side["full"]]
        if side["report"]:
            out += [f"{title}'s own report:", side["report"]]
    out += [f"not measured: {e}" for e in view["errors"]]
    return "\n".join(out)


def failed_at_performance(stage: str, kind: str) -> bool:
    """A kernel that failed at the performance stage (wrong values at the timed sizes, a timing
    cheat, a timeout while timed...): what the profile can help the reflector with. A correctness
    failure has nothing to do with speed: its prompt shows no profile."""
    return stage == "performance" and kind != "passed"


def lineage_profile(attempt: Any, attempts: Sequence[Any]) -> tuple[dict[str, Any], Any]:
    """The attempt's own profile, else that of the nearest kernel it descends from (a failing
    kernel has none: the judge profiles only kernels that pass), with the attempt it belongs to;
    ({}, None) when none has one."""
    seen: set[int] = set()
    current = attempt
    while current is not None and current.index not in seen:
        if getattr(current, "profile", None):
            return current.profile, current
        seen.add(current.index)
        parent = current.parent
        current = attempts[parent] if parent is not None and 0 <= parent < len(attempts) else None
    return {}, None


def start_context(correct: Sequence[Any]) -> dict[str, Any]:
    """The optimizer's template variables: the profile of the kernel it starts from (the fastest
    correct one, last of `correct`) and of the reference."""
    start = correct[-1] if correct else None
    return {"profile": profile_view(getattr(start, "profile", None)),
            "profile_subject": f"the kernel you start from (attempt {start.index}, the fastest so far)"
            if start is not None else ""}


def failure_context(attempt: Any, attempts: Sequence[Any]) -> dict[str, Any]:
    """The reflector's and fixer's template variables: a profile only when `attempt` failed at
    performance (its own, else the nearest ancestor's), else none (the prompt is as before)."""
    if not failed_at_performance(attempt.stage, attempt.kind):
        return {"profile": None, "profile_subject": ""}
    profile, owner = lineage_profile(attempt, attempts)
    if owner is None:
        return {"profile": None, "profile_subject": ""}
    subject = "this kernel" if owner is attempt else f"the kernel it started from (attempt {owner.index})"
    return {"profile": profile_view(profile), "profile_subject": subject}
