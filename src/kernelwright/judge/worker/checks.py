"""The candidate's integrity, checked on the trusted side: its outputs against the reference's
(at test sizes, `check_item`; sampled at perf sizes, `check_spot`), that they came from its own
Triton kernels, and what its timing replies give away (patched timers, cached results, work
left running, device work escaping the timed stream, a report the worker's clock contradicts, a
time below the roofline). Each check returns or raises what is wrong; none asks a child.
"""

from __future__ import annotations

from ..common.verdict import output_name
from .compare import compare_outputs, compare_tensor, identical
from .failures import CaseFailed
from .timing import RETIME_ROUNDS, idle_cpu_exceeded


def reference_varies_note(varied: int) -> str:
    """What to add to a mismatch when the reference's own runs already disagreed elsewhere: the
    reference is then not a function of its inputs (uninitialised or out-of-bounds reads, write
    races), and a difference at a position its runs happened to agree on may be its doing too."""
    if not varied:
        return ""
    return (f" (the reference's own runs differed at {varied} other output value(s): it is not fully "
            "determined by its inputs, so this difference may be the reference's too)")


def define_undefined(outputs: list, references: list, masks: list) -> list:
    """Copy the reference's values into the positions the reference itself leaves undefined
    (masks from a run on poisoned memory), so only defined positions are compared."""
    import torch

    result = list(outputs)
    for i, mask in enumerate(masks):
        if mask is None or i >= len(result) or i >= len(references):
            continue
        out, ref = result[i], references[i]
        if isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor) and out.shape == ref.shape == mask.shape \
                and out.dtype == ref.dtype:
            result[i] = torch.where(mask.to(out.device), ref.to(out.device), out)
    return result


def not_from_kernel_problem(not_from_kernel: list[int], ref_from_kernel: list[bool] | None,
                            names: list[str] | None, n: int, foreign_calls: list[str] = ()):
    """(reason, detail, kind) when an output the candidate returned was not written by its own
    Triton kernels: its memory was given to none of the launches of a kernel defined in its file
    during the call (the candidate child reports which: `not_from_kernel`). Where a foreign
    reference's own kernels launched but left one of its outputs to other code (a benchmark's
    test that returns a value it computed with torch), that output is not required of the
    candidate either (`ref_from_kernel`); a reference that launched no kernel of its own (PyTorch)
    says nothing, and every output is required. `foreign_calls`: a benchmark's test function
    called an entry point that returned such a tensor (TritonBench-T). None when nothing is wrong."""
    if foreign_calls:
        listed = "; ".join(foreign_calls[:4]) + (f"; and {len(foreign_calls) - 4} more" if len(foreign_calls) > 4 else "")
        return (f"the test's {listed} returned a tensor that the candidate's own Triton kernels did not write: "
                "no launch of a kernel defined in its file was given that memory during the call (computed with "
                "torch next to a token launch?)", {"foreign_calls": list(foreign_calls)}, "output_not_from_kernel")
    required = set(range(n)) if ref_from_kernel is None else {i for i, own in enumerate(ref_from_kernel) if own}
    bad = [i for i in not_from_kernel if i in required]
    if not bad:
        return None
    what = ", ".join(output_name(i, names, n) for i in bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
    return (f"{what} {'was' if len(bad) == 1 else 'were'} not written by the candidate's own Triton kernels: no "
            "launch of a kernel defined in its file was given that memory during the call (computed with torch "
            "next to a token launch?)", {"not_from_kernel": bad}, "output_not_from_kernel")



def check_item(task, expected, got):
    """Return None if the candidate's outputs for one (case, seed) are acceptable, else
    (reason, detail, FailureKind value). `expected` is the reference's `ReferenceRun`,
    `got` the candidate's `CandidateRun`."""

    if got.launches < 1:
        return ("the candidate's own Triton kernels were never launched (did it compute with torch?)", {},
                "no_kernel_launch")
    pristine, after = expected.input_digests, got.input_digests
    for i, (a, b) in enumerate(zip(pristine, after)):
        if i not in task.mutable_args and a != b:
            return (f"modified its input tensor #{i}; inputs must be left unchanged", {}, "mutated_input")
    masks = expected.undefined or []
    names = expected.names or got.names
    outputs = define_undefined(got.outputs, expected.reference, masks)
    result = compare_outputs(outputs, expected.reference, [m.as_dict() for m in expected.meta],
                             task.tolerance_for, names=names)
    if not result.ok:
        varied = sum(int(m.sum()) for m in masks if m is not None)
        return (result.reason + reference_varies_note(varied), result.detail, result.kind or "wrong_values")
    if got.repeat_outputs is not None and got.repeat_launches < 1:
        return ("the second call on the same inputs launched no kernel (cached result?)", {}, "cached_result")
    problem = not_from_kernel_problem(got.not_from_kernel, expected.from_kernel, names, len(outputs),
                                      got.foreign_calls)
    if problem is not None:
        return problem
    again_problem = not_from_kernel_problem(got.repeat_not_from_kernel, expected.from_kernel, names,
                                            len(outputs), got.repeat_foreign_calls)
    if again_problem is not None:
        return ("the second call on the same inputs returned memory that its own launches were not given "
                f"(a result cached from the first call?): {again_problem[0]}", again_problem[1], "cached_result")
    if got.repeat_outputs is not None:
        again = define_undefined(got.repeat_outputs, expected.reference, masks)
        if task.deterministic:
            if not identical(again, outputs):
                return ("two runs on the same inputs are not bitwise identical, but the task is "
                        "deterministic (a race or nondeterministic reduction?)", {}, "nondeterministic")
        else:
            metas = [{"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape)}
                     for t in outputs]
            rerun = compare_outputs(again, outputs, metas, task.tolerance_for, names=names)
            if not rerun.ok:
                return ("two runs on the same inputs disagree (a race condition?): " + rerun.reason,
                        rerun.detail, "nondeterministic")
    return None



def check_spot(task, label: str, expected, got) -> None:
    """The candidate's `CandidateSpot` against the reference's `ReferenceSpot` of one perf case."""

    if got.launches < 1:
        raise CaseFailed("performance", f"{label}: the candidate's own Triton kernels were never launched",
                         kind="no_kernel_launch")
    metas = expected.native_meta
    if len(got.meta) != len(metas):
        raise CaseFailed("performance", f"{label}: returned {len(got.meta)} outputs, expected {len(metas)}",
                         kind="wrong_shape_dtype")
    names = expected.names or got.names
    undefined_samples = expected.undefined_samples or [None] * len(metas)
    undefined_counts = expected.undefined_counts or [0] * len(metas)
    for i, (meta, got_meta) in enumerate(zip(metas, got.meta)):
        what = output_name(i, names, len(metas))
        if got_meta.shape != meta.shape or got_meta.dtype != meta.dtype:
            raise CaseFailed("performance", f"{label}: {what} is {got_meta.dtype} {got_meta.shape}, "
                             f"expected {meta.dtype} {meta.shape}", kind="wrong_shape_dtype")
        if got.nan_counts[i] > expected.nan_counts[i] + undefined_counts[i]:
            raise CaseFailed("performance", f"{label}: {what} holds {got.nan_counts[i]} NaN values "
                             "where the reference has fewer (unwritten output?)", kind="unwritten_output")
        tol = task.tolerance_for(meta.dtype)
        sampled = define_undefined([got.samples[i]], [expected.samples[i]], [undefined_samples[i]])[0]
        check = compare_tensor(sampled, expected.samples[i], tol.atol, tol.rtol, f"{what} (sampled)")
        if not check.ok:
            raise CaseFailed("performance", f"{label}: at perf size, {check.reason}"
                             + reference_varies_note(sum(undefined_counts)),
                             kind="unwritten_output" if check.kind == "unwritten_output" else "perf_mismatch")
    problem = not_from_kernel_problem(got.not_from_kernel, expected.from_kernel, names, len(metas),
                                      got.foreign_calls)
    if problem is not None:
        raise CaseFailed("performance", f"{label}: at perf size, {problem[0]}", kind=problem[2])



def patched_failure(label: str, names: list[str]) -> CaseFailed:
    listed = ", ".join(n[:80] for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return CaseFailed("performance", f"{label}: the candidate replaced timing functions in its process "
                      f"({listed}): its own timings cannot be trusted", kind="timer_patched")


def check_warmup(label: str, prep) -> None:
    """The candidate's warm-up (`messages.PerfPrepared`) launched a kernel in every call."""
    if prep.warmup_launches < prep.warmup_calls:
        raise CaseFailed("performance", f"{label}: {prep.warmup_launches} kernel launches in "
                         f"{prep.warmup_calls} warm-up calls (results cached across calls?)",
                         kind="cached_result")


def check_idle_cpu(label: str, used: float, window: float, processes: int) -> None:
    """The candidate's processes (`processes` in its tree) used no more than an idle share of the
    CPU in the `window` seconds it had no request: else it left work running after its calls."""
    if idle_cpu_exceeded(used, window):
        raise CaseFailed("performance", f"{label}: the candidate's processes used {used:.2f} s of CPU in the "
                         f"{window:.2f} s after its calls returned, with no call in flight (threads or "
                         f"processes it left running: {processes} process(es) in its tree); they "
                         "would run next to the timing of the reference", kind="background_work")


def check_escape_gap(label: str, gap_excess: float, gap_limit: float, readings: int) -> None:
    """The candidate's device work ended at most `gap_limit` ms later after its timed stream than
    the reference's, in the least of `readings` readings on each side."""
    if gap_excess > gap_limit:
        raise CaseFailed("performance", f"{label}: work kept running {gap_excess:.3f} ms after the timed stream "
                         f"finished, the least of {readings} readings on each side (side streams or threads "
                         "escaping the timer)", kind="timing_cheat")


def check_candidate_block(label: str, block, n: int) -> None:
    """One of the candidate's timing blocks (`messages.TimedBlock` of `n` calls): its timers are
    its own, and every call launched a kernel."""
    if block.patched:
        raise patched_failure(label, block.patched)
    if block.launches < n:
        raise CaseFailed("performance", f"{label}: only {block.launches} kernel launches in {n} "
                         "timed calls (results cached across calls?)", kind="cached_result")


def timing_mismatch(label: str, excess: float, slack: float, reported: float, blocks: int) -> CaseFailed:
    """The failure of a candidate whose blocks took longer on the worker's clock than it reported,
    in every round (`timing.wall_clock_excess`)."""
    return CaseFailed("performance", f"{label}: the candidate's timing blocks took {excess:.1f} ms more on the "
                      f"judge's own clock than its reported times ({reported:.1f} ms in all) explain, "
                      f"beyond what the reference's blocks left unexplained (allowed {slack:.1f} ms), in "
                      f"{RETIME_ROUNDS + 1} rounds of {blocks} blocks: its process reported less "
                      "time than it took (patched timers or harness, or a forged reply)",
                      kind="timing_mismatch")


def check_roofline(result, label: str, cand_ms: float, bound: float | None, slack: float, hardware: str) -> None:
    """The candidate's time is not below what the hardware allows for the task's cost model
    (`bound` ms, divided by `slack`); else its case `result` fails, and the stage with it."""
    if bound is not None and cand_ms < bound / slack:
        result.ok, result.failure = False, "timing_cheat"
        result.reason = (f"measured {cand_ms:.4f} ms, below the {bound:.4f} ms that "
                         f"{hardware} allows for this cost model")
        raise CaseFailed("performance", f"{label}: faster than the hardware allows "
                         f"({cand_ms:.4f} ms < roofline {bound:.4f} ms): "
                         "suspect a cheat, a cached result or a wrong cost model", kind="timing_cheat")
