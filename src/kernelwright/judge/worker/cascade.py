"""The cascade of one judge request (`Cascade`, a part of `process.Worker`): load both sides,
then call -> correctness -> performance -> profile; the task judged again without probes when a
probe broke its reference, and again with the GPU to itself when it ran out of memory next to
other workers; the verdict's beginning and end (`state.Judging`: how each failure becomes the
verdict; here: the candidate gone, spares forked for the next verdict, the memory report).

The stages are `correctness` and `performance`; the processes this uses (the children, their
spares, the reference kept per task, the strays) are `process.Worker`'s; the GPU lock as it is
held, `gputurn`.
"""

from __future__ import annotations

import time
from typing import Any

from ...tasks import load_task_ref
from ..common.footprint import proc_status_bytes
from ..common.knobs import trace
from ..common.messages import MemoryReport, MessageError, parse_reply
from ..common.options import JudgeOptions
from ..common.requests import JudgeRequest, MemoryRequest, SyncRequest
from ..common.verdict import FailureKind, Verdict, submitted_path
from ..sandbox.confinement import keep_source_path
from . import lockguard
from .child_process import ChildFailure, ChildProcess
from .correctness import CorrectnessStage, check_perf_cases
from .failures import CaseFailed, JudgeError, ProbeFailed, ask
from .performance import run_performance
from .profiling import run_profile
from .state import Judging


class Cascade:
    """The worker's members that judge one request; the children and the GPU turns they use are
    `Worker`'s (process.py) and `GpuTurns`' (gputurn.py)."""

    device: str
    info: dict[str, Any]  # the device's description, copied into every verdict
    no_probe: dict[str, str]  # task ref -> why its reference is not probed
    judging: Judging | None  # the verdict being judged (the last one, after it)
    spare: ChildProcess | None
    spare_reference: ChildProcess | None

    def judge(self, request: JudgeRequest) -> dict:
        task = load_task_ref(request.task_ref)
        self._admit(task)
        started = time.monotonic()
        trace(task.name, f"judging {request.candidate_path}")
        result = self._judge_probing(task, request)
        if self.device != "cpu" and self.judging.ran_out_of_memory:
            # Other workers' processes hold GPU memory while checks share the GPU: a task that ran
            # out of it is judged again with the GPU to itself (a real excess fails again).
            self._close_references()
            with self.exclusive(task.name) as (waited, _):
                result = self._judge_probing(task, request)
            seconds = result.setdefault("stage_seconds", {})
            seconds["wait_exclusive"] = round(seconds.get("wait_exclusive", 0.0) + waited, 3)
            result.setdefault("flags", []).append("ran out of GPU memory next to other workers: judged "
                                                  "again with the GPU to itself")
        trace(task.name, f"verdict {result.get('stage')} after {time.monotonic() - started:.1f} s")
        return result

    def _judge_probing(self, task, request: JudgeRequest) -> dict:
        try:
            return self._judge(task, request)
        except ProbeFailed as exc:
            self.no_probe[task.ref] = str(exc)
            self._close_references()  # its CUDA context may be broken
            return self._judge(task, request)

    def _judge(self, task, request: JudgeRequest) -> dict:
        opts = request.options
        # (stage and kind are placeholders: every ending below sets both)
        verdict = Verdict(task=task.name, candidate=request.candidate_path, stage="call", call=False,
                          correct=False, reason="", device=dict(self.info), seeds=list(request.seeds),
                          baseline=opts.baseline, kind=FailureKind.JUDGE_ERROR)
        j = self.judging = Judging(task, opts, verdict, probe=task.ref not in self.no_probe)
        try:
            self._cascade(j)
            j.passed()
        except ProbeFailed:
            raise
        except CaseFailed as failure:
            j.case_failed(failure)
        except JudgeError as exc:
            # A probe can break the reference directly, or leave poisoned memory behind in its
            # allocator that a later, clean call reads (garbage indices): either way the task is
            # judged again in fresh processes, without probes.
            if (j.probe_failures or j.probed) and j.probe:
                raise ProbeFailed(j.probe_failures[0] if j.probe_failures else
                                  f"after a probe: {str(exc).splitlines()[0][:300]}") from None
            j.judge_failed(exc)
        except Exception as exc:  # noqa: BLE001 - a bug in the judge must not lose the verdict
            j.internal_error(exc)
        finally:
            self._finish(j)
        return verdict.to_dict()

    def _cascade(self, j: Judging) -> None:
        """Load both sides, then call -> correctness -> performance; a failure raises."""
        task, opts, verdict = j.task, j.opts, j.verdict
        if task.unsupported:
            raise JudgeError(f"task {task.name} cannot run on this platform: {task.unsupported}")
        baseline_path = str(task.triton_reference) if opts.baseline == "triton" else None
        if opts.baseline == "triton" and task.triton_reference is None:
            raise JudgeError(f"task {task.name} has no Triton reference to use as the baseline")
        if task.ref in self.no_probe:
            verdict.flags.append("the reference failed on poisoned memory, so it was not probed for "
                                 f"outputs it leaves unwritten ({self.no_probe[task.ref]})")
        measure = bool(opts.perf and task.perf_cases)
        # Load, call and correctness checks share the GPU with other workers: each child holds
        # the lock shared around its own GPU work, never while compiling (see gpulock).
        mark = time.monotonic()
        j.ref = self._reference_child(task, baseline_path, opts)
        j.cand = self._candidate_child(task, opts)
        verdict.stage_seconds["reference_load"] = round(time.monotonic() - mark, 3)
        self.lock_guard = lockguard.install(self, j)
        CorrectnessStage(self, j).run()
        if measure:
            # Correctness at perf sizes, and with it the JIT compilation and autotuning at
            # those shapes (CPU-bound, seconds per task), shares the GPU the same way; only
            # re-tuning, warm-up and timing hold it exclusively, in one turn per task.
            verdict.stage = "performance"
            checked = check_perf_cases(self, j)
            run_performance(self, j, checked)
        # Every reply read was the one due: a frame the candidate wrote on the channel itself and
        # left unread would answer this request instead.
        ask(j.cand, SyncRequest(), opts.case_timeout, "finishing", "performance" if measure else "correctness")
        # The verdict is decided (it passes): the profile describes it, never changes it (run_profile never raises)
        run_profile(self, j, measure)

    def _finish(self, j: Judging) -> None:
        """The verdict's end, however it went: memory report, the candidate gone, spares forked
        for the next verdict, the children's lock statistics."""
        verdict = j.verdict
        self.lock_guard = None
        lockguard.uninstall(j)
        if j.opts.measure_memory:
            verdict.memory = self._memory_report(j.ref, j.cand, j.opts)
        if j.cand is not None:
            if not verdict.log_tail:
                verdict.log_tail = j.cand.log_tail()
            if j.cand.scratch_dir:
                submitted_path(verdict, keep_source_path(j.cand.scratch_dir, verdict.candidate))
            j.cand.close()
            j.cand.remove_log()
        self._collect_strays()
        self.spare = self._fork("candidate", None)
        if self.spare_reference is None:
            self.spare_reference = self._fork("reference", None)
        j.record_lock_stats()
        if j.longest_hold[0]:
            trace(j.task.name, f"longest shared hold without a look for a timing turn: "
                               f"{j.longest_hold[0]:.2f} s ({j.longest_hold[1]})")

    def _memory_report(self, ref: ChildProcess | None, cand: ChildProcess | None, opts: JudgeOptions) -> dict:
        """Peak memory of each process of this verdict (`JudgeOptions.measure_memory`): each
        child's own report (a child that died or failed to answer has none), and this worker's."""

        report: dict[str, Any] = {}
        for name, child in (("reference", ref), ("candidate", cand)):
            if child is None or not child.alive:
                continue
            try:
                reply = parse_reply(child.request(MemoryRequest(), opts.case_timeout, "reporting its memory"),
                                    "memory", child.role)
            except (ChildFailure, MessageError):
                continue
            if isinstance(reply, MemoryReport):
                report[name] = {k: v for k, v in vars(reply).items() if k not in ("op", "ok", "seq")}
        status = proc_status_bytes()
        report["worker"] = {"rss_start_bytes": getattr(self, "rss_start", 0), "rss_bytes": status.get("VmRSS", 0),
                            "rss_peak_bytes": status.get("VmHWM", 0)}
        return report
