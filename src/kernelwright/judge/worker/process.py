"""A judge worker: one process per GPU (a few on CPU), trusted, never imports candidate code.

It keeps torch and triton imported but never touches the device itself, so that it can fork:
- a *reference child* per task (trusted; computes reference outputs and reference timings), and
- a fresh *candidate child* for every candidate (one spare is forked ahead of time, so device
  initialisation overlaps with the previous verdict).
It runs the cascade (call -> correctness -> performance), compares everything itself, and returns
a `Verdict` as a dict. Any failure of a candidate child (exception, crash, hang, GPU fault, early
exit) becomes a verdict with a reason; the child's whole process group is then killed.

This module owns the processes (forking children, each with its sandbox, the spares, the
reference kept per task, the strays, the candidate's process tree) and `main`. `Worker` is made of
three parts: these, the GPU lock as this worker holds it (shared by its children's checks,
exclusive for a timing turn: `gputurn.GpuTurns`), and the cascade of one request with the
verdict's beginning and end (`cascade.Cascade`). The stages are `correctness` (the perf-size
checks included) and `performance`, each handed this worker as the narrow interface it uses
(`interfaces`); the pipe to a child is `child_process`; failures and the retry policy are
`failures`.

Started by the coordinator (`pool.py`) as `python -m kernelwright.judge.worker.process --fd N --device D`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from multiprocessing.connection import Connection
from typing import Any

from ...tasks.files import CACHE_ROOT_ENV, cache_root, ref_files
from ..common import footprint, procs
from ..common.footprint import proc_status_bytes
from ..common.gpulock import ensure_lock_files
from ..common.messages import ErrorReply, MessageError, parse_reply
from ..common.options import ChildOptions, JudgeOptions, WorkerOptions
from ..common.requests import (
    WORKER_REQUESTS,
    ExitRequest,
    JudgeRequest,
    LoadRequest,
    parse_request,
)
from ..sandbox.confinement import ChildSandbox, base_policy, candidate_data_limit, process_limit
from .cascade import Cascade
from .child_process import ChildFailure, ChildProcess
from .failures import JudgeError, error_kind
from .gputurn import GpuTurns
from .heartbeat import Heartbeat
from .state import Judging


class Worker(GpuTurns, Cascade):
    """The worker's processes (this module), the GPU lock as it holds it (`GpuTurns`) and the
    cascade of one request (`Cascade`)."""

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

    # -- children ---------------------------------------------------------------------------
    def _add_lock_stats(self, stats: dict) -> None:
        if self.judging is not None:
            self.judging.add_lock_stats(stats)

    def _fork(self, role: str, task) -> ChildProcess:
        child = ChildProcess(role, task, self.device, self._child_options(role), self._add_lock_stats)
        if role == "reference":
            child.max_reply_bytes = self.reply_limit
        return child

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
