"""Is the candidate correct: the call and correctness stages (the candidate imported, then every
correctness case run by both sides for each seed and compared on the trusted side; the first item
is the call), and correctness at perf sizes (every perf case that will be timed is computed by
both sides and compared at sampled output positions, with the JIT compilation and autotuning at
those shapes sharing the GPU with other workers; and checked again where the candidate's
autotuners, tuned alone for timing, picked another configuration). The checks on what the
children return (`check_item` at test sizes, `check_spot` sampled at perf sizes, outputs that
came from its own Triton kernels) return or raise what is wrong and ask no child. Load, call and
correctness checks share the GPU with other workers: each child holds the lock shared around its
own GPU work, never while compiling (see gpulock).
"""

from __future__ import annotations

import dataclasses
import time

from ...tasks.derived import DROPPED, atol_scales, derived_kind
from ..common.footprint import candidate_reply_limit
from ..common.knobs import trace
from ..common.messages import ReferenceRun, ReferenceSpot, Skipped
from ..common.requests import LoadRequest, RunItem, RunRequest, SpotRequest
from ..common.verdict import CaseResult, output_name
from .child_process import ChildFailure, ReferenceStream, running_limit
from .compare import compare_outputs, compare_tensor, identical
from .failures import (
    CaseFailed,
    CaseNotOfTask,
    CaseSkipped,
    JudgeError,
    ask,
    child_failure,
    parsed,
    retry_alone,
)
from .interfaces import CheckingWorker
from .state import Judging
from .timing import perf_subset

# dtypes the Triton interpreter (the CPU device) computes incorrectly: their cases are skipped there
INTERPRETER_UNSUPPORTED = {"bfloat16", "float8_e4m3fn", "float8_e5m2"}


INTERPRETER_SKIP = "skipped: the Triton interpreter computes this dtype incorrectly"


class CorrectnessStage:
    """The call and correctness stages of one verdict; `worker` lends the GPU-sharing state."""

    def __init__(self, worker: CheckingWorker, judging: Judging) -> None:
        self.worker, self.j = worker, judging
        self.task, self.opts, self.verdict = judging.task, judging.opts, judging.verdict
        self.ref, self.cand = judging.children()
        self.results: dict[int, CaseResult] = {}  # correctness case -> its result, once one item ran
        self.n = 0  # items compared so far: the first one is the call
        self.stream: ReferenceStream | None = None
        # A foreign reference is probed for outputs it leaves undefined only for an item the
        # candidate fails without them, as perf cases are: probes are two more runs of the
        # reference per item, and most references and candidates agree at the first comparison.
        self.probing = judging.probe and self.task.reference_impl is not None

    def run(self) -> None:
        started = time.monotonic()
        self._load_candidate()
        items, labels = self._items()
        if not items:
            raise JudgeError("no correctness case can run on this device")
        self.stream = ReferenceStream(self.ref, items, self.worker.share_gpu)
        try:
            for j, (item, label) in enumerate(zip(items, labels)):
                self._judge_item(j, item, label, started)
        except (CaseFailed, JudgeError):
            drain(self.ref, self.stream.pending, self.opts.case_timeout)
            raise
        if self.n == 0:
            raise JudgeError("the task's own tests skip every correctness case on this device")
        self.verdict.correct = True
        self.verdict.stage_seconds["correctness"] = round(time.monotonic() - started, 3)

    def _load_candidate(self) -> None:
        cand, opts = self.cand, self.opts
        try:
            cand.ready(opts.load_timeout)
        except ChildFailure as exc:
            raise child_failure(cand, "call", "starting", exc.reason, exc.kind, log_tail=exc.log_tail) from None
        self.verdict.sandbox = dict(cand.sandbox)
        if opts.sandbox == "strict" and not cand.sandbox.get("complete"):
            raise JudgeError("--sandbox strict: the candidate's process could not be confined fully ("
                             + "; ".join(cand.sandbox.get("missing") or ["no confinement"]) + "): not judged")
        limit = min(opts.load_timeout, opts.run_timeout)
        # A confined child cannot read the submitted file: the bytes travel with the request.
        with open(self.verdict.candidate, "rb") as f:
            source = f.read()
        ask(cand, LoadRequest(path=self.verdict.candidate, task_ref=self.task.ref, gpu_lock=self.worker.share_gpu,
                              source=source),
            limit, "importing the candidate", "call", cap=opts.load_timeout,
            note="run_timeout, at most load_timeout" if limit < opts.load_timeout else "load_timeout")
        if self.worker.exclusive_held:  # judged again alone after running out of memory next to others
            self.worker.candidate_memory_cap(cand, 1.0, opts, "call")

    def _items(self) -> tuple[list[RunItem], list[str]]:
        """The (case, seed) items to run and their labels; cases this device cannot run are
        recorded as skipped."""
        items, labels = [], []
        for ci, case in enumerate(self.task.correctness_cases):
            if self.worker.device == "cpu" and case.dtype in INTERPRETER_UNSUPPORTED:
                self.verdict.cases.append(CaseResult("correctness", case.label, case.to_dict(), None,
                                                     INTERPRETER_SKIP))
                continue
            derived_case = derived_kind(case) is not None
            # a derived case's worth is its distribution, not one more draw: the first seed, no
            # rerun (the visible case's rerun checked stability already)
            for k, seed in enumerate(self.verdict.seeds[:1] if derived_case else self.verdict.seeds):
                items.append(RunItem(case=ci, seed=seed, repeat=k == 0 and not derived_case, probe=False))
                labels.append(f"case {case.label} (seed {seed})")
        return items, labels

    def _timeout(self) -> float:
        return self.opts.call_timeout if self.n == 0 else self.opts.case_timeout

    def _reference(self, j: int, label: str, stage: str, probe: bool):
        """The reference's `ReferenceRun` (or `Skipped`) of item j, probed if `probe`."""
        doing = f"computing the reference for {label}"
        try:
            # the reference's first item compiles its kernels: it gets the call's timeout
            raw = (self.stream.probe(j, self._timeout(), doing) if probe
                   else self.stream.reply(j, self._timeout(), doing))
        except ChildFailure as exc:
            self.stream.outstanding.clear()
            raise child_failure(self.ref, stage, f"computing {label}", exc.reason, exc.kind,
                                log_tail=exc.log_tail) from None

        expected = parsed(self.ref, raw, "run", f"computing {label}", stage)
        if isinstance(expected, ReferenceRun):
            self.j.ref_launches += expected.launches
            undefined = sum(int(m.sum()) for m in expected.undefined or [] if m is not None)
            where = f"case {self.task.correctness_cases[self.stream.items[j].case].label}"
            self.j.take_probe_report(expected.probe_failed, expected.undefined is not None, undefined, where)
        return expected

    def _judge_item(self, j: int, item: RunItem, label: str, started: float) -> None:
        verdict, case = self.verdict, self.task.correctness_cases[item.case]
        stage = "call" if self.n == 0 else "correctness"
        mark = time.monotonic()
        expected = self._reference(j, label, stage, False)
        ref_s = time.monotonic() - mark
        if isinstance(expected, Skipped):  # the task's own test skips this input (pytest.skip)
            if item.case not in self.results:
                # or a derived hidden case the problem is not defined on: dropped, said in the flags
                dropped = derived_kind(case) is not None and expected.skipped.startswith(DROPPED)
                reason = expected.skipped if dropped else f"skipped by the task's own test: {expected.skipped}"
                self.results[item.case] = CaseResult("correctness", case.label, case.to_dict(), None, reason)
                verdict.cases.append(self.results[item.case])
                if dropped:
                    verdict.flags.append(f"case {case.label}: {reason}")
            return
        item = dataclasses.replace(item, poison_sizes=[m.nbytes for m in expected.meta])
        # its reply carries the same outputs: no larger than the reference's call for
        self.cand.max_reply_bytes = candidate_reply_limit(sum(item.poison_sizes), self.worker.reply_limit)
        mark = time.monotonic()
        limit, note = running_limit(self.opts, self._timeout(), getattr(expected, "run_s", None))
        got = ask(self.cand, RunRequest(items=[item], gpu_lock=self.worker.share_gpu),
                  limit, f"running {label}", stage, cap=self._timeout(), note=note)
        cand_s, mark = time.monotonic() - mark, time.monotonic()
        if self.n == 0:
            verdict.call = True
            verdict.stage_seconds["call"] = round(time.monotonic() - started, 3)
        verdict.kernels = dict(got.kernels)
        problem = self._problem(j, label, stage, expected, got)
        trace(self.task.name, f"{label}: reference {ref_s:.2f} s (waited for), candidate {cand_s:.2f} s, "
                              f"checks {time.monotonic() - mark:.2f} s{'' if problem is None else ', FAILED'}")
        result = self.results.get(item.case)
        if result is None:
            result = self.results[item.case] = CaseResult("correctness", case.label, case.to_dict(), True,
                                                             launches=0, seconds=0.0)
            verdict.cases.append(result)
        result.seeds.append(item.seed)
        result.launches += got.launches
        result.seconds = round(result.seconds + got.seconds, 6)
        self.n += 1
        if problem is not None:
            reason, detail, kind = problem
            result.ok, result.reason, result.error, result.failure = False, reason, detail, kind
            raise CaseFailed("correctness", f"{label}: {reason}", log_tail=self.cand.log_tail(), kind=kind)

    def _problem(self, j: int, label: str, stage: str, expected, got):
        """`check_item`'s finding on item j, with the reference probed where it is a mismatch."""

        case = self.task.correctness_cases[self.stream.items[j].case]
        problem = check_item(self.task, expected, got, case)
        if problem is not None and self.probing and got.launches >= 1 and problem[2] != "output_not_from_kernel":
            # Same seed: compared again with the positions the reference leaves undefined
            # (unwritten, uninitialised reads) set aside.
            probed = self._reference(j, label, stage, True)
            if isinstance(probed, ReferenceRun):
                problem = check_item(self.task, probed, got, case)
                if problem is not None and probed.probe_failed:
                    problem = (f"{problem[0]} (the reference failed on poisoned memory, so it was not probed "
                               f"for outputs it leaves undefined: {probed.probe_failed})", *problem[1:])
        return problem


def drain(ref, pending: int, timeout: float) -> None:
    """Read the reference's replies for items we no longer need, so the reference process
    stays usable for the next candidate; if that fails, close it (it is restarted on demand)."""
    try:
        for _ in range(pending):  # one message per item: each is answered, failed or not
            ref.recv(timeout, "draining")
    except ChildFailure:
        ref.close()


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


def check_item(task, expected, got, case=None):
    """Return None if the candidate's outputs for one (case, seed) are acceptable, else
    (reason, detail, FailureKind value). `expected` is the reference's `ReferenceRun`,
    `got` the candidate's `CandidateRun`; `case` the correctness case (a derived hidden case's
    atol is scaled by its outputs' magnitudes: tasks/derived.py)."""

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
    scales = atol_scales(expected.reference) if case is not None and derived_kind(case) else None
    result = compare_outputs(outputs, expected.reference, [m.as_dict() for m in expected.meta],
                             task.tolerance_for, names=names, atol_scales=scales)
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


def check_perf_cases(worker: CheckingWorker, j: Judging) -> dict[int, float | None]:
    """Check every perf case that will be timed at sampled output positions. Returns {perf case
    index: seconds the check took, or None when it ran out of memory and must be checked under
    the exclusive lock}; cases that are not timed are recorded with the reason."""
    task, opts, verdict = j.task, j.opts, j.verdict
    checked: dict[int, float | None] = {}
    timed = perf_subset(len(task.perf_cases), opts.max_perf_cases)
    for pi, case in enumerate(task.perf_cases):
        if pi not in timed:
            verdict.cases.append(CaseResult("performance", case.label, case.to_dict(), None,
                                            f"not timed: at most {opts.max_perf_cases} perf cases per task"))
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


def spot_check(worker: CheckingWorker, j: Judging, pi: int) -> None:
    """One perf case computed by both sides and compared at sampled positions. A foreign
    reference is probed for outputs it leaves undefined only when the first comparison fails:
    probing runs it twice more at perf size, and a suite's references are mostly well behaved
    (the probes tripled the reference's share of the perf-size checks)."""

    task, opts = j.task, j.opts
    label = f"perf case {task.perf_cases[pi].label}"
    seed = j.perf_seed(pi)
    timeout = opts.perf_timeout

    def reference(probe: bool) -> ReferenceSpot:
        request = SpotRequest(case=pi, seed=seed, samples=opts.spot_samples, probe=probe, gpu_lock=worker.share_gpu)
        expected = ask(j.ref, request, timeout, f"computing {label}", "performance")
        if isinstance(expected, Skipped):
            raise CaseSkipped(expected.skipped)
        j.take_probe_report(expected.probe_failed, expected.undefined_counts is not None,
                            sum(expected.undefined_counts or []), label)
        return expected

    probing = j.probe and task.reference_impl is not None
    mark = time.monotonic()
    expected = reference(False)
    ref_s, mark = time.monotonic() - mark, time.monotonic()
    if task.reference_impl is not None and j.ref_launches > 0 and expected.launches == 0:
        raise CaseNotOfTask("not timed: the benchmark's perf test never runs the task's own kernels here (the "
                            "reference launched its kernels in the tests, none in this perf case)")
    # A candidate that hangs only at perf size is stopped as at the test sizes: its running limit
    # scales from the reference's running time on this same case, not the stage's whole cap.
    limit, note = running_limit(opts, timeout, j.ref.last_run_s)
    request = SpotRequest(case=pi, seed=seed, positions=expected.positions,
                          poison_sizes=[m.nbytes for m in expected.native_meta], gpu_lock=worker.share_gpu)
    got = ask(j.cand, request, limit, f"running {label}", "performance", cap=timeout, note=note)
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


def check_timed_configuration(worker: CheckingWorker, j: Judging, pi: int) -> None:
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
        with worker.exclusive(j.task.name), worker.alone_with(j.children()[1], j.opts):
            check()
