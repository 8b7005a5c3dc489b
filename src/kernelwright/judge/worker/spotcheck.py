"""Correctness at perf sizes: every perf case that will be timed is computed by both sides and
compared at sampled output positions (a perf shape must be computed correctly too), with the JIT
compilation and autotuning at those shapes (CPU-bound, seconds per task) sharing the GPU with
other workers; and checked again where the candidate's autotuners, tuned alone for timing, picked
another configuration.
"""

from __future__ import annotations

import time

from ..common.messages import ReferenceSpot, Skipped
from ..common.tracing import trace
from ..common.verdict import CaseResult
from .checks import check_spot
from .child_process import running_limit
from .correctness import INTERPRETER_SKIP, INTERPRETER_UNSUPPORTED
from .failures import (
    CaseFailed,
    CaseNotOfTask,
    CaseSkipped,
    JudgeError,
    ask,
    retry_alone,
)
from .state import Judging
from .timing import perf_subset


def check_perf_cases(worker, j: Judging) -> dict[int, float | None]:
    """Check every perf case that will be timed at sampled output positions. Returns {perf case
    index: seconds the check took, or None when it ran out of memory and must be checked under
    the exclusive lock}; cases that are not timed are recorded with the reason."""
    task, opts, verdict = j.task, j.opts, j.verdict
    checked: dict[int, float | None] = {}
    timed = perf_subset(len(task.perf_cases), opts.get("max_perf_cases"))
    for pi, case in enumerate(task.perf_cases):
        if pi not in timed:
            verdict.cases.append(CaseResult("performance", case.label, case.to_dict(), None,
                                            f"not timed: at most {opts['max_perf_cases']} perf cases per task"))
            continue
        if worker.device == "cpu" and case.dtype in INTERPRETER_UNSUPPORTED:
            verdict.cases.append(CaseResult("performance", case.label, case.to_dict(), None, INTERPRETER_SKIP))
            continue
        try:
            mark = time.monotonic()
            spot_check(worker, j, pi)
            checked[pi] = round(time.monotonic() - mark, 4)
        except CaseSkipped as skip:
            reason = str(skip) if isinstance(skip, CaseNotOfTask) else f"skipped by the task's own test: {skip}"
            verdict.cases.append(CaseResult("performance", case.label, case.to_dict(), None, reason))
        except (CaseFailed, JudgeError) as exc:
            # Other workers' processes hold GPU memory during the shared phase: a shape that
            # does not fit now is checked again while this worker has the GPU to itself.
            if not retry_alone(exc, worker.exclusive_held):
                raise
            checked[pi] = None
    verdict.stage_seconds["perf_check"] = round(sum(v for v in checked.values() if v), 3)
    return checked


def spot_check(worker, j: Judging, pi: int) -> None:
    """One perf case computed by both sides and compared at sampled positions. A foreign
    reference is probed for outputs it leaves undefined only when the first comparison fails:
    probing runs it twice more at perf size, and a suite's references are mostly well behaved
    (the probes tripled the reference's share of the perf-size checks)."""

    task, opts = j.task, j.opts
    label = f"perf case {task.perf_cases[pi].label}"
    seed = j.perf_seed(pi)
    timeout = opts["perf_timeout"]

    def reference(probe: bool) -> ReferenceSpot:
        expected = ask(j.ref, {"op": "spot", "case": pi, "seed": seed, "samples": opts["spot_samples"],
                               "probe": probe, "gpu_lock": worker.share_gpu},
                       timeout, f"computing {label}", "performance")
        if isinstance(expected, Skipped):
            raise CaseSkipped(expected.skipped)
        j.take_probe_report(expected.probe_failed, expected.undefined_counts is not None,
                            sum(expected.undefined_counts or []), label)
        return expected

    probing = bool(opts.get("probe", True)) and task.reference_impl is not None
    mark = time.monotonic()
    expected = reference(False)
    ref_s, mark = time.monotonic() - mark, time.monotonic()
    if task.reference_impl is not None and j.ref_launches > 0 and expected.launches == 0:
        raise CaseNotOfTask("not timed: the benchmark's perf test never runs the task's own kernels here (the "
                            "reference launched its kernels in the tests, none in this perf case)")
    # A candidate that hangs only at perf size is stopped as at the test sizes: its running limit
    # scales from the reference's running time on this same case, not the stage's whole cap.
    limit, note = running_limit(opts, timeout, j.ref.last_run_s)
    got = ask(j.cand, {"op": "spot", "case": pi, "seed": seed, "positions": expected.positions,
                       "poison_sizes": [m.nbytes for m in expected.native_meta],
                       "gpu_lock": worker.share_gpu},
              limit, f"running {label}", "performance", cap=timeout, note=note)
    j.spot_tuned[pi] = dict(got.tuned)
    trace(task.name, f"{label} at perf size: reference {ref_s:.2f} s, candidate {time.monotonic() - mark:.2f} s")
    try:
        check_spot(task, label, expected, got)
    except CaseFailed:
        if not probing:
            raise
        # Same seed, same sampled positions: the candidate's outputs are compared again with
        # the positions the reference leaves undefined (unwritten, uninitialised reads) set aside.
        expected = reference(True)
        check_spot(task, label, expected, got)
    j.perf_bytes[pi] = sum(m.nbytes for m in expected.native_meta)


def check_timed_configuration(worker, j: Judging, pi: int) -> None:
    """The perf-size check of case `pi` again, with the configurations the candidate's
    autotuners picked alone for timing. Alone as well if it runs out of memory next to others."""
    def check() -> None:
        try:
            spot_check(worker, j, pi)
        except CaseFailed as exc:
            if exc.kind == "gpu_lock_held":  # (not a finding about the configuration)
                raise
            raise CaseFailed(exc.stage, f"{exc.reason} (with the configuration its autotuner picked when tuned "
                             "alone for timing; the check next to other workers had run another)",
                             detail=exc.detail, log_tail=exc.log_tail, kind=exc.kind) from None

    try:
        check()
    except (CaseFailed, JudgeError) as exc:
        if not retry_alone(exc, worker.exclusive_held):
            raise
        with worker.exclusive(j.task.name), worker.alone_with(j.cand, j.opts):
            check()
