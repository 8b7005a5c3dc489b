"""One verdict in the making (`Judging`): the task, the request's options, the verdict being
filled in, the two children, and what the stages learn on the way (probe reports, perf-case
sizes, the candidate's autotuner picks, its children's GPU-lock statistics). It lives for one
call of `Worker._judge` (cascade.py); nothing of it outlasts its verdict.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any

from ..common.options import JudgeOptions
from ..common.verdict import JUDGE_ERROR, PASSED, FailureKind, Verdict
from .child_process import ChildProcess
from .failures import CaseFailed, JudgeError, judge_alone_after
from .timing import perf_seed


@dataclass
class Judging:
    task: Any
    opts: JudgeOptions  # the request's (the children's clocks read their limits here)
    verdict: Verdict
    # whether the task's (foreign) reference is probed for outputs it leaves undefined: not once
    # it failed on poisoned memory (`Worker.no_probe`)
    probe: bool = True
    ref: ChildProcess | None = None
    cand: ChildProcess | None = None
    probe_failures: list[str] = field(default_factory=list)
    probed: bool = False  # whether any probe ran (a later reference failure may be its doing)
    perf_bytes: dict[int, int] = field(default_factory=dict)  # perf case -> output bytes (the timing order)
    spot_tuned: dict[int, dict] = field(default_factory=dict)  # perf case -> the candidate's autotuner picks when checked
    lock_stats: dict[str, float] = field(default_factory=dict)  # GPU lock waits, unlocked compiles
    longest_hold: tuple[float, str] = (0.0, "")  # (seconds, what) held without a look for a timing turn
    ref_launches: int = 0  # own-file kernel launches of a foreign reference in the tests
    # whether the verdict failed for want of memory, on either side (the failure's kind, from the
    # exception class a child reported: never the words of a reason)
    ran_out_of_memory: bool = False

    def children(self) -> tuple[ChildProcess, ChildProcess]:
        """(reference, candidate): the stages run once the cascade has loaded both."""
        if self.ref is None or self.cand is None:
            raise JudgeError("a stage ran before both children were loaded")  # (a judge bug)
        return self.ref, self.cand

    def perf_seed(self, pi: int) -> int:
        return perf_seed(self.verdict.seeds[0], pi)

    def add_lock_stats(self, stats: dict) -> None:
        """A child's report of its GPU-lock waits and unlocked compiles (`gpu_lock_s` of a reply)."""
        for key, seconds in stats.items():
            if isinstance(seconds, (int, float)):
                self.lock_stats[key] = self.lock_stats.get(key, 0.0) + seconds
        longest = stats.get("longest_hold")
        if isinstance(longest, dict) and isinstance(longest.get("seconds"), (int, float)) \
                and longest["seconds"] > self.longest_hold[0]:
            self.longest_hold = (float(longest["seconds"]), str(longest.get("doing", ""))[:200])

    def take_probe_report(self, probe_failed: str | None, probed: bool, undefined: int, where: str) -> None:
        """What a reference reply says about its probes: one that failed, whether one ran (a later
        reference failure may be its doing), and how many output positions are undefined. One
        flag for test cases and one for perf cases (the first found): the reference's own output
        is partly undefined, so the candidate is compared on the rest only."""
        if probe_failed:
            self.probe_failures.append(probe_failed)
        self.probed = self.probed or probed
        if not undefined:
            return
        flags = self.verdict.flags
        perf = where.startswith("perf case")
        if not any(f.startswith("the reference leaves") and (" of perf case " in f) == perf for f in flags):
            flags.append(f"the reference leaves {undefined} output value(s) of {where} depending on "
                         "uninitialised memory or memory outside its inputs; those positions are not compared")

    # -- how the verdict ends ----------------------------------------------------------------
    def passed(self) -> None:
        verdict = self.verdict
        if self.probe_failures:
            verdict.flags.append("the reference failed on poisoned memory, so it was not fully probed for "
                                 f"outputs it leaves unwritten ({self.probe_failures[0]})")
        verdict.stage, verdict.reason, verdict.kind = PASSED, "passed", FailureKind.PASSED
        if verdict.flags:
            verdict.reason = "passed with notes: " + "; ".join(verdict.flags)

    def case_failed(self, failure: CaseFailed) -> None:
        verdict = self.verdict
        self.ran_out_of_memory = judge_alone_after(failure.kind)
        verdict.stage, verdict.reason, verdict.kind = failure.stage, failure.reason, failure.kind
        verdict.detail, verdict.log_tail = failure.detail, failure.log_tail or verdict.log_tail
        if failure.stage == "performance":
            verdict.speedup = verdict.speedup_geomean = verdict.speedup_ci95 = None

    def judge_failed(self, exc: JudgeError) -> None:
        verdict = self.verdict
        self.ran_out_of_memory = judge_alone_after(exc.kind)
        verdict.stage, verdict.reason = JUDGE_ERROR, str(exc).splitlines()[0]
        # (the reference's own kind, an out_of_memory say, is what decides a retry, not the verdict's)
        verdict.kind = (FailureKind.PROBLEM_TOO_LARGE if exc.kind == FailureKind.PROBLEM_TOO_LARGE
                        else FailureKind.JUDGE_ERROR)
        verdict.detail = str(exc)

    def internal_error(self, exc: Exception) -> None:
        """A bug in the judge (called while `exc` is handled): the verdict says so, with the trace."""
        verdict = self.verdict
        verdict.stage, verdict.reason = JUDGE_ERROR, f"internal judge error: {exc!r}"
        verdict.kind = FailureKind.JUDGE_ERROR
        verdict.detail = traceback.format_exc()

    def record_lock_stats(self) -> None:
        """The children's GPU-lock waits and unlocked compiles, into the verdict's stage_seconds."""
        seconds = self.verdict.stage_seconds
        for key, name in (("wait_s", "wait_shared"), ("compile_s", "compile_unlocked"),
                          ("yield_s", "wait_shared_yielded")):
            if self.lock_stats.get(key):
                seconds[name] = round(self.lock_stats[key], 3)
        if self.longest_hold[0]:
            # not a sum like the others: the longest a timing turn could have waited on this task
            seconds["longest_shared_hold"] = round(self.longest_hold[0], 3)
