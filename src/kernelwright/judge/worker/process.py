"""A judge worker: one process per GPU (a few on CPU), trusted, never imports candidate code.

It keeps torch and triton imported but never touches the device itself, so that it can fork:
- a *reference child* per task (trusted; computes reference outputs and reference timings), and
- a fresh *candidate child* for every candidate (one spare is forked ahead of time, so device
  initialisation overlaps with the previous verdict).
It runs the cascade (call -> correctness -> performance), compares everything itself, and returns
a `Verdict` as a dict. Any failure of a candidate child (exception, crash, hang, GPU fault, early
exit) becomes a verdict with a reason; the child's whole process group is then killed.

This module owns the processes (forking children, the spares, the reference kept per task, the
strays), the GPU lock as this worker holds it (shared by its children's checks, exclusive for a
timing turn), and the verdict's beginning and end (`Judging`). The stages are `correctness` (the
perf-size checks included) and `performance`, each handed this worker as the narrow interface
it uses (`interfaces`); the pipe to a child is `child_process`; failures and the retry policy
are `failures`.

Started by the coordinator (`pool.py`) as `python -m kernelwright.judge.worker.process --fd N --device D`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any, Iterator

from ...tasks import load_task_ref
from ...tasks.files import CACHE_ROOT_ENV, cache_root, ref_files
from ..common import footprint, lockholders, procs
from ..common.footprint import proc_status_bytes
from ..common.gpulock import DRAIN_REPORT_S, MAX_LOCK_CREDIT_S, device_lock, ensure_lock_files
from ..common.knobs import TRACE, trace
from ..common.messages import ErrorReply, MemoryReport, MessageError, parse_reply
from ..common.options import ChildOptions, JudgeOptions, WorkerOptions
from ..common.requests import (
    WORKER_REQUESTS,
    ExitRequest,
    JudgeRequest,
    LoadRequest,
    MemoryFractionRequest,
    MemoryRequest,
    SyncRequest,
    parse_request,
)
from ..common.verdict import FailureKind, Verdict, submitted_path
from ..sandbox.confinement import ChildSandbox, base_policy, candidate_data_limit, keep_source_path, process_limit
from . import lockguard
from .child_process import ChildFailure, ChildProcess
from .heartbeat import Heartbeat
from .correctness import CorrectnessStage, check_perf_cases
from .failures import CaseFailed, JudgeError, ProbeFailed, ask, error_kind
from .performance import run_performance
from .profiling import run_profile
from .state import Judging

# The longest a worker waits for its timing turn during a verdict (the most a child's queueing is
# credited per reply: `MAX_LOCK_CREDIT_S`)
MAX_TURN_WAIT_S = MAX_LOCK_CREDIT_S


class Worker:
    def __init__(self, device: str, options: WorkerOptions | None = None) -> None:
        self.device = device
        self.options = options or WorkerOptions()
        self.spare: ChildProcess | None = None
        # A reference process forked ahead too: starting one (fork, CUDA context) was part of the
        # ~1.8 s per task that TritonBench-revised spent loading references.
        self.spare_reference: ChildProcess | None = None
        self.references: dict[tuple, ChildProcess] = {}
        self.info: dict[str, Any] = {}
        self.caches: dict[str, str] = {}  # role -> its children's Triton cache directory
        self.no_probe: dict[str, str] = {}  # task ref -> why its reference is not probed
        self.judging: Judging | None = None  # the verdict being judged (the last one, after it)
        # This worker holds the GPU exclusively (a timing turn, or a whole task judged alone after
        # running out of memory): its children then take no lock themselves.
        self.exclusive_held = False
        # During a verdict's cascade: raises the candidate's failure if its processes hold the GPU
        # lock (`lockguard.guard`); None between verdicts.
        self.lock_guard = None
        # How large a reference's reply may be on this machine, fixed at start for it and its
        # children alike (a candidate's follows its reference's, per item: `correctness`)
        self.reply_limit = footprint.reply_limit()
        # Confinement (`--sandbox`): the files of every task this worker has judged, which its
        # children may read (a spare forked before a task with other files is replaced), and the
        # base policy, built once here before any fork.
        self.task_files: tuple[str, ...] = tuple(self.options.task_files)
        self.base_policy = None

    # -- the GPU lock, as this worker holds it -------------------------------------------------
    @property
    def share_gpu(self) -> bool:
        """Whether a request's children take the GPU lock shared around their GPU work: not while
        this worker holds it exclusively, and never when it is its GPU's only worker (the pool
        says how many share it: `gpu_workers`). Alone on its GPU, its children then take no lock,
        step aside at no launch and sync before no compile; its timing turns still take the lock
        exclusively (uncontended: one flock per task), so another run's checks on the same GPU
        still wait for them."""
        return self.options.gpu_workers > 1 and not self.exclusive_held

    @contextlib.contextmanager
    def exclusive(self, task_name: str) -> Iterator[tuple[float, float]]:
        """Hold this GPU exclusively for the block (a no-op when already held); yields (seconds
        spent waiting for it, of which at the turnstile draining readers in flight). A long drain
        is traced with the processes it waits for (KERNELWRIGHT_TRACE=1). During a verdict the wait
        raises the candidate's `gpu_lock_held` failure when the candidate's processes hold the lock
        (`lockguard`), and a `JudgeError` after `MAX_TURN_WAIT_S`: a hold nobody can be named for
        (a descriptor inherited from a locker that is gone) ends in a verdict, not a hang."""
        if self.exclusive_held:
            yield 0.0, 0.0
            return
        mark = time.monotonic()

        def long_drain(holders: list[str]) -> None:
            trace(task_name, f"taking the GPU alone: draining for {DRAIN_REPORT_S:g} s so far, behind "
                  + ("; ".join(holders) if holders else "no holder found in /proc/locks"))

        check = self._turn_wait_check(mark)
        with device_lock(self.device, exclusive=True, on_long_drain=long_drain if TRACE else None,
                         check=check) as drained:
            self.exclusive_held = True
            try:
                yield time.monotonic() - mark, drained
            finally:
                self.exclusive_held = False

    def _turn_wait_check(self, since: float):
        """What a wait for the timing turn runs every second during a verdict (None outside one)."""
        guard = self.lock_guard
        if guard is None:
            return None

        def check() -> None:
            guard("while its worker waited for the GPU alone")
            if time.monotonic() - since > MAX_TURN_WAIT_S:
                raise JudgeError(f"waited more than {MAX_TURN_WAIT_S:g} s for the GPU alone, behind "
                                 f"pid(s) {sorted(lockholders.gpu_lock_holders() or {})} holding its lock")
        return check

    @contextlib.contextmanager
    def timing_turn(self, verdict: Verdict) -> Iterator[None]:
        """`exclusive`, with the wait added to the verdict's `wait_exclusive` and the time held to
        `performance`."""
        with self.exclusive(verdict.task) as (waited, drained):
            got = time.monotonic()
            seconds = verdict.stage_seconds
            seconds["wait_exclusive"] = round(seconds.get("wait_exclusive", 0.0) + waited, 3)
            # the part of it spent with the turnstile closed (other workers' new checks queued)
            seconds["wait_exclusive_drain"] = round(seconds.get("wait_exclusive_drain", 0.0) + drained, 3)
            try:
                yield
            finally:
                seconds["performance"] = round(seconds.get("performance", 0.0) + time.monotonic() - got, 3)
                trace(verdict.task, f"timing turn: waited {waited:.2f} s ({drained:.2f} s draining others' "
                                    f"checks), held the GPU {time.monotonic() - got:.2f} s")

    def candidate_memory_cap(self, cand: ChildProcess, fraction: float, opts: JudgeOptions, stage: str) -> None:
        """Set the candidate's GPU memory cap (1.0: the whole GPU). The cap keeps a runaway candidate from
        starving the other workers' processes; while this worker has the GPU alone it only failed
        legitimate large shapes (two 8 GiB tensors of fast_rope_embedding, cloned per block). On
        the CPU the child only acknowledges it."""
        ask(cand, MemoryFractionRequest(fraction=fraction), opts.perf_timeout, "setting the candidate's memory cap",
            stage)

    @contextlib.contextmanager
    def alone_with(self, cand: ChildProcess, opts: JudgeOptions) -> Iterator[None]:
        """The candidate's memory cap lifted for the block (the caller holds the GPU exclusively)."""
        self.candidate_memory_cap(cand, 1.0, opts, "performance")
        try:
            yield
        finally:
            try:
                self.candidate_memory_cap(cand, self._memory_fraction, opts, "performance")
            except (CaseFailed, JudgeError, ChildFailure):
                pass  # the candidate is finished with either way; its verdict already says why

    # -- children ---------------------------------------------------------------------------
    def _add_lock_stats(self, stats: dict) -> None:
        if self.judging is not None:
            self.judging.add_lock_stats(stats)

    def _fork(self, role: str, task) -> ChildProcess:
        child = ChildProcess(role, task, self.device, self._child_options(role), self._add_lock_stats)
        if role == "reference":
            child.max_reply_bytes = self.reply_limit
        return child

    @property
    def _memory_fraction(self) -> float:
        """The share of GPU memory a candidate process may take while the GPU is shared."""
        return self.options.memory_fraction

    def _child_options(self, role: str) -> ChildOptions:
        return ChildOptions(memory_fraction=self._memory_fraction if role == "candidate" else None,
                            max_reply_bytes=self.reply_limit if role == "reference" else None,
                            cpu_threads=self.options.cpu_threads, triton_cache=self.caches.get(role),
                            sandbox=self._sandbox(role))

    def _sandbox(self, role: str) -> ChildSandbox:
        """A child's confinement (`sandbox.confinement`): its own scratch directory, its side's
        Triton cache and this GPU's lock files writable, the tasks' files readable; a candidate
        also gets an empty network namespace and a memory limit. Off without a scratch root."""
        level, root = self.options.sandbox, self.options.scratch_root
        if level == "off" or not root or not os.path.isdir(root):
            return ChildSandbox(level="off")
        if self.base_policy is None:
            self.base_policy = base_policy()
        scratch = tempfile.mkdtemp(prefix=f"w{os.getpid()}-{role}-", dir=root)
        # the lock files: its checks take the GPU lock shared (a candidate that holds it between
        # requests is caught by `lockguard`, on the CPU too)
        write = [p for p in (self.caches.get(role), *ensure_lock_files()) if p]
        candidate = role == "candidate"
        return ChildSandbox(level=level, scratch=scratch, write=tuple(write), read=self.task_files,
                            netns=candidate, data_bytes=candidate_data_limit() if candidate else None,
                            nproc=process_limit(), base=self.base_policy,
                            max_written_bytes=int(self.options.max_written_bytes))

    def _admit(self, task) -> None:
        """Let this worker's children read `task`'s files; spares forked without them go."""
        if self.options.sandbox == "off":
            return
        files = [f for f in ref_files(task.ref) if f not in self.task_files]
        if not files:
            return
        self.task_files = (*self.task_files, *files)
        for name in ("spare", "spare_reference"):
            child = getattr(self, name)
            if child is not None:
                child.close()
                child.remove_log()
                setattr(self, name, None)

    def _make_caches(self) -> None:
        """One Triton cache directory per side (0700, random names, removed at shutdown), set in
        each child after the fork: candidates compile into theirs and are never pointed at the
        reference's, so a candidate cannot plant a compiled kernel where the reference loads its
        own by accident or by following its environment (one that searches the disk can still
        find it: same user). Shared by the children of one side of this worker, so the driver's
        helper module and launchers are built once per worker."""
        root = self.options.cache_root
        if root and os.path.isdir(root):
            self.caches = {role: tempfile.mkdtemp(prefix=f"w{os.getpid()}-{role}-", dir=root)
                           for role in ("reference", "candidate")}

    def start(self) -> dict:
        """Fork the first spare and read the device description from it."""
        self._make_caches()
        # the children's temporary directory is their scratch: the suites' cache stays this one
        os.environ.setdefault(CACHE_ROOT_ENV, str(cache_root()))
        self.spare = self._fork("candidate", None)
        self.info = self.spare.ready(self.options.start_timeout)

        self.rss_start = proc_status_bytes().get("VmRSS", 0)  # before any task (measure_memory)
        return self.info

    def _candidate_child(self, task, opts: JudgeOptions) -> ChildProcess:
        child = self.spare
        self.spare = None
        if child is None or not child.alive:
            child = self._fork("candidate", task)
        child.task = task
        self._apply_limits(child, opts)
        return child

    @staticmethod
    def _apply_limits(child: ChildProcess, opts: JudgeOptions) -> None:
        """This verdict's compile limit and tuning allowance (JudgeOptions) on `child`'s clock."""
        child.compile_timeout = float(opts.compile_timeout)
        child.tune_config_s = float(opts.tune_config_s)

    def _reference_child(self, task, baseline_path: str | None, opts: JudgeOptions) -> ChildProcess:
        key = (task.ref, baseline_path)
        child = self.references.get(key)
        if child is not None and child.alive:
            self._apply_limits(child, opts)
            return child
        self._close_references()  # one task's reference at a time: GPU memory
        child, self.spare_reference = self.spare_reference, None
        if child is None or not child.alive:
            child = self._fork("reference", task)
        child.task = task
        self._apply_limits(child, opts)
        self._load_reference(child, task, baseline_path, opts.load_timeout)
        self.references[key] = child
        return child

    def _load_reference(self, child: ChildProcess, task, baseline_path: str | None, timeout: float) -> None:

        try:
            child.ready(timeout)
            # foreign reference code may touch the GPU at import: loaded under the shared lock
            load = LoadRequest(task_ref=task.ref, baseline_path=baseline_path, gpu_lock=self.share_gpu)
            reply = parse_reply(child.request(load, timeout, "loading the reference"), "load", "reference")
        except ChildFailure as exc:
            raise JudgeError(f"the reference process failed: {exc.described}\n{exc.log_tail}") from None
        except MessageError as exc:
            child.close()
            raise JudgeError(f"the reference process sent an unreadable reply while loading: {exc}") from None
        if isinstance(reply, ErrorReply):
            child.close()
            raise JudgeError(f"the reference failed to load: {reply.error}\n{reply.traceback}", error_kind(reply, True))

    def _close_references(self) -> None:
        for child in self.references.values():
            child.close()
            child.remove_log()
        self.references.clear()

    def shutdown(self) -> None:
        for child in [self.spare, self.spare_reference, *self.references.values()]:
            if child is not None:
                child.close()
                child.remove_log()
        procs.kill_strays(keep=set())
        for path in self.caches.values():
            shutil.rmtree(path, ignore_errors=True)

    def _collect_strays(self) -> None:
        # the reference processes, and the spare one (forked ahead when a reference was reused)
        keep = {c.pid for c in [*self.references.values(), self.spare_reference] if c is not None and c.alive}
        procs.kill_strays(keep)

    def own_children(self) -> set[int]:
        """The worker's own children: its reference processes and the spares (never a candidate's)."""
        return {c.pid for c in [*self.references.values(), self.spare, self.spare_reference] if c is not None}

    def candidate_tree(self, cand: ChildProcess) -> list[int]:
        """The candidate's process and every process it started, wherever they went: its
        descendants (in any process group or session), and orphans re-parented to this worker (a
        subreaper) that are none of the worker's own children."""
        if not isinstance(getattr(cand, "pid", None), int) or cand.pid <= 0:  # a child played by a test
            return []
        own = self.own_children()
        parents = procs.parent_map()  # one scan of /proc for both looks
        roots = [p for p in procs.children_of(os.getpid(), parents) if p not in own or p == cand.pid]
        if cand.pid not in roots and cand.alive:
            roots.append(cand.pid)
        return roots + procs.descendants(*roots, parents=parents)

    def kill_candidate(self, cand: ChildProcess) -> None:
        """The candidate's process and everything of its tree, gone now (their locks with them)."""
        tree = self.candidate_tree(cand)
        cand.kill()
        procs.signal_all([p for p in tree if p != cand.pid], signal.SIGKILL)

    def pause_candidate(self, cand: ChildProcess) -> list[int]:
        """SIGSTOP the candidate's group and every process of its tree outside it (a subprocess
        that started its own session, a daemon re-parented to this worker): nothing it left
        running may share the host with the other side's timing. Returns what to resume."""
        cand.pause()
        others: list[int] = []
        for _ in range(2):  # a process outside the group may fork while we stop it: look again
            found = [p for p in self.candidate_tree(cand) if p != cand.pid and p not in others]
            if not found:
                break
            procs.signal_all(found, signal.SIGSTOP)
            others += found
        return others

    @staticmethod
    def resume_candidate(cand: ChildProcess, others: list[int]) -> None:
        procs.signal_all(others, signal.SIGCONT)
        cand.resume()

    # -- the cascade ------------------------------------------------------------------------
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


# -- process entry ------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="kernelwright judge worker (started by the judge pool)")
    parser.add_argument("--fd", type=int, required=True, help="descriptor of the channel to the coordinator")
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    args = parser.parse_args(argv)
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is imported
    procs.die_with_parent()
    procs.become_subreaper()
    procs.make_undumpable()
    import torch  # noqa: F401 - imported once here, inherited by every forked child
    import triton  # noqa: F401

    torch.set_num_threads(1)  # the worker only compares; children set their own thread count
    conn = Connection(args.fd)
    first = conn.recv()  # the coordinator's first message: the worker's options (`WorkerHandle`)
    worker = Worker(args.device, WorkerOptions.from_wire(first["options"]))
    try:
        info = worker.start()
        conn.send({"op": "ready", "ok": True, "info": info})
    except Exception as exc:  # noqa: BLE001
        reason = exc.described if isinstance(exc, ChildFailure) else repr(exc)
        tail = exc.log_tail if isinstance(exc, ChildFailure) else ""
        conn.send({"op": "ready", "ok": False, "error": f"device initialisation failed: {reason}\n{tail}"})
        worker.shutdown()
        return
    beat = Heartbeat(conn)
    try:
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                break
            # (a malformed request is the coordinator's bug: raised, the worker ends, and the pool
            # reports it lost while judging)
            request = parse_request(msg, WORKER_REQUESTS)
            if isinstance(request, JudgeRequest):
                with beat.judging():
                    verdict = worker.judge(request)
                beat.send({"op": "verdict", "verdict": verdict})
            elif isinstance(request, ExitRequest):
                break
    finally:
        worker.shutdown()


if __name__ == "__main__":
    sys.exit(main())
