"""The call and correctness stages: the candidate imported, then every correctness case run by
both sides for each seed and compared on the trusted side (the first item is the call). Load,
call and correctness checks share the GPU with other workers: each child holds the lock shared
around its own GPU work, never while compiling (see gpulock).
"""

from __future__ import annotations

import time

from ..common.footprint import candidate_reply_limit
from ..common.messages import ReferenceRun, Skipped
from ..common.tracing import trace
from ..common.verdict import CaseResult
from .checks import check_item
from .child_process import ChildFailure, ReferenceStream, running_limit
from .failures import CaseFailed, JudgeError, ask, child_failure, parsed
from .state import Judging

# dtypes the Triton interpreter (the CPU device) computes incorrectly: their cases are skipped there
INTERPRETER_UNSUPPORTED = {"bfloat16", "float8_e4m3fn", "float8_e5m2"}
INTERPRETER_SKIP = "skipped: the Triton interpreter computes this dtype incorrectly"


class CorrectnessStage:
    """The call and correctness stages of one verdict; `worker` lends the GPU-sharing state."""

    def __init__(self, worker, judging: Judging) -> None:
        self.worker, self.j = worker, judging
        self.task, self.opts, self.verdict = judging.task, judging.opts, judging.verdict
        self.ref, self.cand = judging.ref, judging.cand
        self.results: dict[int, CaseResult] = {}  # correctness case -> its result, once one item ran
        self.n = 0  # items compared so far: the first one is the call
        self.stream: ReferenceStream | None = None
        # A foreign reference is probed for outputs it leaves undefined only for an item the
        # candidate fails without them, as perf cases are: probes are two more runs of the
        # reference per item, and most references and candidates agree at the first comparison.
        self.probing = bool(self.opts.get("probe", True)) and self.task.reference_impl is not None

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
            drain(self.ref, self.stream.pending, self.opts["case_timeout"])
            raise
        if self.n == 0:
            raise JudgeError("the task's own tests skip every correctness case on this device")
        self.verdict.correct = True
        self.verdict.stage_seconds["correctness"] = round(time.monotonic() - started, 3)

    def _load_candidate(self) -> None:
        cand, opts = self.cand, self.opts
        try:
            cand.ready(opts["load_timeout"])
        except ChildFailure as exc:
            raise child_failure(cand, "call", "starting", exc.reason, exc.kind, log_tail=exc.log_tail) from None
        limit = min(opts["load_timeout"], opts.get("run_timeout", opts["load_timeout"]))
        ask(cand, {"op": "load", "path": self.verdict.candidate, "task_ref": self.task.ref,
                   "gpu_lock": self.worker.share_gpu},
            limit, "importing the candidate", "call", cap=opts["load_timeout"],
            note=f"running limit {limit:g} s: run_timeout, at most load_timeout; compiling is limited apart")
        if self.worker.exclusive_held:  # judged again alone after running out of memory next to others
            self.worker.candidate_memory_cap(cand, 1.0, opts, "call")

    def _items(self) -> tuple[list[dict], list[str]]:
        """The (case, seed) items to run and their labels; cases this device cannot run are
        recorded as skipped."""
        items, labels = [], []
        for ci, case in enumerate(self.task.correctness_cases):
            if self.worker.device == "cpu" and case.dtype in INTERPRETER_UNSUPPORTED:
                self.verdict.cases.append(CaseResult("correctness", case.label, case.to_dict(), None,
                                                     INTERPRETER_SKIP))
                continue
            for k, seed in enumerate(self.verdict.seeds):
                items.append({"case": ci, "seed": seed, "repeat": k == 0, "probe": False})
                labels.append(f"case {case.label} (seed {seed})")
        return items, labels

    def _timeout(self) -> float:
        return self.opts["call_timeout"] if self.n == 0 else self.opts["case_timeout"]

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
            where = f"case {self.task.correctness_cases[self.stream.items[j]['case']].label}"
            self.j.take_probe_report(expected.probe_failed, expected.undefined is not None, undefined, where)
        return expected

    def _judge_item(self, j: int, item: dict, label: str, started: float) -> None:

        verdict, case = self.verdict, self.task.correctness_cases[item["case"]]
        stage = "call" if self.n == 0 else "correctness"
        mark = time.monotonic()
        expected = self._reference(j, label, stage, False)
        ref_s = time.monotonic() - mark
        if isinstance(expected, Skipped):  # the task's own test skips this input (pytest.skip)
            if item["case"] not in self.results:
                self.results[item["case"]] = CaseResult("correctness", case.label, case.to_dict(), None,
                                                        f"skipped by the task's own test: {expected.skipped}")
                verdict.cases.append(self.results[item["case"]])
            return
        item = dict(item, poison_sizes=[m.nbytes for m in expected.meta])
        # its reply carries the same outputs: no larger than the reference's call for
        self.cand.max_reply_bytes = candidate_reply_limit(sum(item["poison_sizes"]), self.worker.reply_limit)
        mark = time.monotonic()
        limit, note = running_limit(self.opts, self._timeout(), getattr(expected, "run_s", None))
        got = ask(self.cand, {"op": "run", "items": [item], "gpu_lock": self.worker.share_gpu},
                  limit, f"running {label}", stage, cap=self._timeout(), note=note)
        cand_s, mark = time.monotonic() - mark, time.monotonic()
        if self.n == 0:
            verdict.call = True
            verdict.stage_seconds["call"] = round(time.monotonic() - started, 3)
        verdict.kernels = dict(got.kernels)
        problem = self._problem(j, label, stage, expected, got)
        trace(self.task.name, f"{label}: reference {ref_s:.2f} s (waited for), candidate {cand_s:.2f} s, "
                              f"checks {time.monotonic() - mark:.2f} s{'' if problem is None else ', FAILED'}")
        result = self.results.get(item["case"])
        if result is None:
            result = self.results[item["case"]] = CaseResult("correctness", case.label, case.to_dict(), True,
                                                             launches=0, seconds=0.0)
            verdict.cases.append(result)
        result.seeds.append(item["seed"])
        result.launches += got.launches
        result.seconds = round(result.seconds + got.seconds, 6)
        self.n += 1
        if problem is not None:
            reason, detail, kind = problem
            result.ok, result.reason, result.error, result.failure = False, reason, detail, kind
            raise CaseFailed("correctness", f"{label}: {reason}", log_tail=self.cand.log_tail(), kind=kind)

    def _problem(self, j: int, label: str, stage: str, expected, got):
        """`check_item`'s finding on item j, with the reference probed where it is a mismatch."""

        problem = check_item(self.task, expected, got)
        if problem is not None and self.probing and got.launches >= 1 and problem[2] != "output_not_from_kernel":
            # Same seed: compared again with the positions the reference leaves undefined
            # (unwritten, uninitialised reads) set aside.
            probed = self._reference(j, label, stage, True)
            if isinstance(probed, ReferenceRun):
                problem = check_item(self.task, probed, got)
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
