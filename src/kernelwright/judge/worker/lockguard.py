"""A candidate holds the GPU lock only while it has a request in flight (issue 20, item 2).

A child takes this GPU's lock shared around its own GPU work and lets go of it before it replies
(`Harness.send`), so between two requests nothing of a candidate's process tree holds the lock or
its turnstile. A candidate can take them itself (a thread or a helper process that flocks the
lock files: it runs as the same user, so it can open them). Holding them, it would keep every
other worker's timing turn draining, and every check queued behind that turn, for as long as its
verdict lasts; the queued checks' clocks are stopped meanwhile (their wait is believed: a timing
turn elsewhere), so the cost would fall on everyone but the candidate.

The worker looks wherever the candidate has no request in flight, and fails it (`gpu_lock_held`):
- before each request to the candidate (`ChildProcess.idle_check`), except inside the worker's
  own timing turn: the lock is the worker's then, and a turnstile the candidate takes only
  delays checks that wait for the turn anyway (the request after the turn looks again);
- once a second while its reference queues for the GPU (whatever else holds it: another worker's
  reader can hold the turnstile while it too waits for the candidate's hold): the candidate's
  processes are killed, which frees the lock (`ChildProcess.lock_culprit`);
- while it waits for its own timing turn (`gpulock.device_lock`'s `check`).
What it cannot name: a hold taken through a descriptor a process inherited from a locker that is
gone (/proc/locks names the locker's pid). A worker waiting for its timing turn behind such a hold
gives up after `gputurn.MAX_TURN_WAIT_S` with a judge error; the candidate's processes are killed
at the verdict's end. Holders are matched by inode alone (/proc/locks gives the device as the
kernel sees it, which need not match `st_dev` under overlay filesystems): another file of the same
inode number on another filesystem, locked at the same moment, would be taken for ours.
"""

from __future__ import annotations

import os
import time
from typing import Callable

from ..common import procs
from ..common.lockholders import gpu_lock_holders
from .failures import CaseFailed
from .interfaces import GuardedWorker

# A hold must be seen twice this far apart: a child's watcher thread may test the turnstile for an
# instant just as its hold ends (`SharedHold._watch`), which is no hold.
SETTLE_S = 0.05


def in_candidate_tree(pid: int, cand_pid: int, worker_pid: int, own: set[int]) -> bool:
    """Whether `pid` is the candidate's process or one it started, as far as parentage tells now:
    a descendant of it, or of a process re-parented to the worker (a subreaper) that is none of
    the worker's own children (`own`: its reference and spare processes). An orphan of the
    reference counts as the candidate's too; a reference starts no processes that hold the lock."""
    if pid == worker_pid:
        return False
    chain = [pid, *procs.ancestry(pid)]
    if cand_pid in chain:
        return True
    if worker_pid in chain:  # (never at chain[0]: that is `pid`)
        return chain[chain.index(worker_pid) - 1] not in own
    return False


def candidate_holders(cand_pid: int, own: set[int], worker_pid: int | None = None) -> list[int]:
    """The processes of the candidate's tree that hold this GPU's lock or its turnstile, in two
    reads `SETTLE_S` apart (both reads must find one, not necessarily the same: two helpers could
    pass the lock between them); [] where /proc/locks cannot tell."""
    worker_pid = os.getpid() if worker_pid is None else worker_pid

    def holding() -> set[int]:
        holders = gpu_lock_holders() or {}
        return {pid for pid in holders if in_candidate_tree(pid, cand_pid, worker_pid, own)}

    found = holding()
    if not found:
        return []
    time.sleep(SETTLE_S)
    again = holding()
    return sorted(found | again) if again else []


def lock_held_failure(stage: str, pids: list[int], when: str) -> CaseFailed:
    return CaseFailed(stage, f"the candidate's processes (pid {', '.join(map(str, pids))}) held the GPU lock "
                             f"{when}: a check holds it only around its own GPU work, and holding it keeps "
                             "every other worker's timing waiting", kind="gpu_lock_held")


def guard(worker: GuardedWorker, j) -> Callable[[str], None]:
    """For the verdict `j` of `worker`: a check that raises the candidate's `gpu_lock_held`
    failure when its tree holds the GPU lock; `when` says where it was found."""
    def check(when: str) -> None:
        cand = j.cand
        if cand is None or not isinstance(getattr(cand, "pid", None), int) or not cand.alive:
            return
        pids = candidate_holders(cand.pid, worker.own_children() - {cand.pid})
        if pids:
            verdict = j.verdict
            stage = verdict.stage if verdict.stage == "performance" else ("correctness" if verdict.call else "call")
            raise lock_held_failure(stage, pids, when)
    return check


def install(worker: GuardedWorker, j) -> Callable[[str], None]:
    """Set the `guard` of verdict `j` on its two children, and return it (`uninstall` takes it off:
    the reference outlives the verdict). Not before the candidate's requests while the worker
    holds the GPU exclusively (`worker.exclusive_held`): the lock is the worker's then (a turnstile
    the candidate takes only delays checks that wait for this turn anyway), and the look costs
    milliseconds where /proc is slow (gVisor: 5.6 ms per timing block in a TritonBench run). When
    the reference is found waiting for the candidate's hold, the candidate's processes are killed
    first (`worker.kill_candidate`): that frees the lock, so the reference's request completes and
    is read, and the loaded reference stays usable."""
    check = guard(worker, j)

    def idle_check() -> None:
        if not worker.exclusive_held:
            check("between its requests")
    j.cand.idle_check = idle_check

    def culprit() -> None:
        try:
            check("while the reference queued for the GPU")
        except CaseFailed:
            worker.kill_candidate(j.cand)
            raise
    j.ref.lock_culprit = culprit
    return check


def uninstall(j) -> None:
    for child in (j.cand, j.ref):
        if child is not None:
            child.idle_check = child.lock_culprit = None
