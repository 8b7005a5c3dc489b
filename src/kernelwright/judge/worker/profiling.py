"""The profile step of a passing verdict (`Verdict.profile`, docs/judge.md): after the cascade's
last request, both children are asked for a basic profile of the largest timed perf case, with
the GPU held exclusively (as for timing: nothing else runs beside the recorded calls).

A profile never changes a verdict: `run_profile` swallows every failure (a child's error or
malformed reply, a timeout, a bug here) into `profile["errors"]`, and runs only once the verdict
is decided (the candidate passed). What the children report is theirs to forge; the fractions
of peak use the judge's own medians and the reference's byte count only (`common.profile`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..common.diagnosis import diagnose
from ..common.full_rules import full_diagnosis
from ..common.hardware import spec_for
from ..common.profile import build_side
from ..common.requests import ProfileRequest
from .failures import ask
from .fullprofile import full_profile
from .state import Judging

# the acceptance wording: the interpreter reports "no profile under the interpreter" cleanly
INTERPRETER_SKIP = "no profile under the interpreter (TRITON_INTERPRET=1): profiling needs a GPU"
UNTIMED_SKIP = "no profile without timing: no perf case was timed (--no-perf, or a task without perf cases)"
# each side's profile request: two calls of a case already timed, compiled and tuned
PROFILE_TIMEOUT_S = 30.0
# the full profile of one candidate: the profiler's start, a compile, replayed kernels (issue 30: 60 s)
FULL_PROFILE_TIMEOUT_S = 60.0


def full_profile_hook(worker: Any, j: Judging, case: int) -> dict:
    """The `full` slot of the candidate's side at level "full": Nsight Compute or rocprofv3
    counters of one call of `case` (`fullprofile.full_profile`), made in a fresh process under
    the profiler once the verdict is decided, confined as the worker's children are, bounded in
    time, cached by the candidate's bytes. The GPU is held alone: the profiler replays kernels."""
    backend = "hip" if str(worker.info.get("backend", "")).lower() in ("hip", "rocm") else "cuda"
    cache_dir = os.path.join(worker.options.cache_root, "profiles") if worker.options.cache_root else None
    with worker.exclusive(j.task.name):
        return full_profile(j.task.ref, j.verdict.candidate, case, j.perf_seed(case),
                            str(worker.info.get("name", "")), role="candidate", backend=backend,
                            cache_dir=cache_dir, timeout_s=FULL_PROFILE_TIMEOUT_S,
                            sandbox=worker.options.sandbox, read=tuple(worker.task_files),
                            triton_cache=worker.caches.get("candidate"), device=worker.device)


def run_profile(worker: Any, j: Judging, measured: bool) -> None:
    """Fill `j.verdict.profile` (nothing at level "off"), and its seconds in `stage_seconds`.
    Never raises: whatever fails is written into the profile instead."""
    verdict = j.verdict
    if j.opts.profile == "off":
        return
    mark = time.monotonic()
    profile: dict[str, Any] = {}
    try:
        profile = _profile(worker, j, measured)
    except Exception as exc:  # noqa: BLE001 - a profile never decides anything
        reason = f"the profile failed: {str(exc).splitlines()[0][:300] if str(exc) else repr(exc)}"
        if "level" in profile:
            profile.setdefault("errors", []).append(reason)
        else:
            profile = {"skipped": reason}
    verdict.profile = profile
    verdict.stage_seconds["profile"] = round(time.monotonic() - mark, 4)


def _timed_cases(j: Judging) -> dict[int, Any]:
    """Perf case index -> its CaseResult, for the cases both sides were timed on."""
    index = {case.label: i for i, case in enumerate(j.task.perf_cases)}
    return {index[c.label]: c for c in j.verdict.cases
            if c.kind == "performance" and c.label in index and c.ref_ms is not None and c.cand_ms is not None}


def _profile(worker: Any, j: Judging, measured: bool) -> dict:
    if worker.device == "cpu" or os.environ.get("TRITON_INTERPRET") == "1":
        return {"skipped": INTERPRETER_SKIP}
    timed = _timed_cases(j)
    if not measured or not timed:
        return {"skipped": UNTIMED_SKIP}
    # the largest timed case (by the reference's output bytes, the timing order's measure)
    pi = max(timed, key=lambda p: (j.perf_bytes.get(p, 0), p))
    task, result = j.task, timed[pi]
    case = task.perf_cases[pi]
    spec = spec_for(worker.info.get("name"))
    cost = task.cost(case) if task.cost is not None else None
    math = (cost or {}).get("math") or ("float8" if case.dtype.startswith("float8") else case.dtype)
    peak = spec.peak_tflops(math) if spec is not None else None
    flops = float(cost["flops"]) if cost and cost.get("flops") else None
    profile: dict[str, Any] = {
        "level": j.opts.profile, "case": pi, "label": case.label,
        "device": spec.name if spec is not None else str(worker.info.get("name", "")),
        "peak_bandwidth_tbs": spec.bandwidth_tbs if spec is not None else None, "math": math,
        "peak_tflops": peak, "errors": []}
    if spec is None:
        profile["errors"].append(f"the GPU {worker.info.get('name')!r} is not in the hardware table: "
                                 "no peak rates nor occupancy")
    replies = _ask_both(worker, j, pi, profile["errors"])
    # bytes_min from the trusted reference's tensors; the candidate's own count is its word
    bytes_min = replies["reference"].io_bytes if "reference" in replies else None
    for who, ms in (("reference", result.ref_ms), ("candidate", result.cand_ms)):
        side = build_side(replies.get(who), ms, bytes_min, spec, flops, peak)
        side["diagnosis"] = diagnose(side, spec, peak)
        if j.opts.profile == "full":
            side["full"] = full_profile_hook(worker, j, pi) if who == "candidate" else \
                {"skipped": "full profiles are made of the candidate only"}
            if "kernels" in side["full"]:
                seen = {(d["rule"], d.get("kernel")) for d in side["diagnosis"]}
                side["diagnosis"] += [d for d in full_diagnosis(side["full"], bytes_min, spec,
                                                                spec.sm_count if spec is not None else None)
                                      if (d["rule"], d.get("kernel")) not in seen]  # measured beside estimated
        profile[who] = side
    return profile


def _ask_both(worker: Any, j: Judging, pi: int, errors: list[str]) -> dict[str, Any]:
    """Each side's `Profile` reply, asked with the GPU held alone; a side that fails has none."""
    ref, cand = j.children()
    request = ProfileRequest(case=pi, seed=j.perf_seed(pi))
    replies: dict[str, Any] = {}
    waited = 0.0
    with worker.exclusive(j.task.name) as (waited, _):
        for who, child in (("reference", ref), ("candidate", cand)):
            if not child.alive:
                errors.append(f"the {who}'s process is gone: no profile of it")
                continue
            try:
                replies[who] = ask(child, request, PROFILE_TIMEOUT_S, f"profiling perf case {pi}", "performance")
            except Exception as exc:  # noqa: BLE001 - the side's failure, described; the verdict stands
                errors.append(f"the {who}'s profile failed: {str(exc).splitlines()[0][:300] if str(exc) else repr(exc)}")
    if waited:
        j.verdict.stage_seconds["profile_wait"] = round(waited, 4)
    return replies
