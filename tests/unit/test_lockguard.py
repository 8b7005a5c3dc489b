"""A candidate may hold the judge's GPU lock only while it has a request in flight (`lockguard`):
its processes are told from everyone else's in the lock table, a writer waiting for its turn can
give up when its own candidate is what it waits for, and a child's clock hooks raise the
candidate's failure."""

import os
import subprocess
import sys
import time

import pytest

from kernelwright.judge.common import gpulock, lockholders
from kernelwright.judge.worker import lockguard
from kernelwright.judge.worker.failures import CaseFailed

# A writer's checks counted over a wall-clock window of 0.5-3 s: alone on the machine.
pytestmark = pytest.mark.serial

HOLD = ("import fcntl, os, sys, time\n"
        "if sys.argv[2] == 'daemon' and os.fork():\n"
        "    os._exit(0)\n"  # the holder's parent exits: it is re-parented, outside our tree
        "f = open(sys.argv[1], 'a')\n"
        "fcntl.flock(f, fcntl.LOCK_SH if sys.argv[2] == 'shared' else fcntl.LOCK_EX)\n"
        "print(os.getpid(), flush=True); time.sleep(60)\n")


@pytest.fixture
def lock_files(monkeypatch, tmp_path):
    if not lockholders.flocks_listed():
        pytest.skip("/proc/locks does not list flocks here")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"guard-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    files = gpulock._open_lock_files()
    yield gpulock.lock_base()
    for f in files:
        f.close()


def _holder(base: str, how: str = "child", name: str = ".lock") -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, base + name, how], stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def test_the_candidates_hold_is_found_and_nobody_elses(lock_files):
    assert lockguard.candidate_holders(cand_pid=-1, own=set()) == []
    proc, pid = _holder(lock_files)
    try:
        assert lockholders.gpu_lock_holders() == {pid: True}
        # our child, the candidate's process: found
        assert lockguard.candidate_holders(cand_pid=pid, own=set()) == [pid]
        # re-parented to the worker and started by none of its own children: the candidate's too
        assert lockguard.candidate_holders(cand_pid=-1, own=set()) == [pid]
        # a child of the worker's own (its reference process): not the candidate's
        assert lockguard.candidate_holders(cand_pid=-1, own={pid}) == []
    finally:
        proc.kill()
        proc.wait(5)


def test_a_process_outside_the_workers_tree_is_not_the_candidate(lock_files):
    proc, pid = _holder(lock_files, "daemon", ".turnstile")  # another worker's timing turn, say
    try:
        assert pid != proc.pid and lockholders.gpu_lock_holders() == {pid: True}
        assert lockguard.candidate_holders(cand_pid=proc.pid, own=set()) == []
    finally:
        os.kill(pid, 9)
        proc.wait(5)


def test_a_writer_gives_up_waiting_when_its_check_says_so(lock_files, monkeypatch):
    monkeypatch.setattr(gpulock, "WRITER_PATIENCE_S", 0.1)
    monkeypatch.setattr(gpulock, "CHECK_EVERY_S", 0.2)
    for name in (".lock", ".turnstile"):  # held where the drain waits, and where the turnstile is
        # (with a check in flight, the writer goes to the turnstile)
        reader = _holder(lock_files, "shared")[0] if name == ".turnstile" else None
        proc, pid = _holder(lock_files, name=name)
        checks = []

        def check():
            checks.append(time.monotonic())
            if len(checks) == 3:
                raise CaseFailed("performance", "its own candidate holds the lock", kind="gpu_lock_held")

        start = time.monotonic()
        try:
            with pytest.raises(CaseFailed):
                with gpulock.device_lock("cuda", exclusive=True, check=check):
                    pytest.fail("got the GPU while another process held it")
            assert 0.5 < time.monotonic() - start < 3.0 and len(checks) == 3
        finally:
            for p in (proc, reader):
                if p is not None:
                    p.kill()
                    p.wait(5)
    with gpulock.device_lock("cuda", exclusive=True, check=check):  # the turnstile was let go
        pass


class _Child:
    def __init__(self, pid):
        self.pid, self.alive, self.killed = pid, True, False
        self.idle_check = self.lock_culprit = None

    def kill(self):
        self.killed = True


class _Verdict:
    stage, call = "call", True


class _J:
    def __init__(self, cand, ref):
        self.cand, self.ref, self.verdict = cand, ref, _Verdict()


class _Worker:
    exclusive_held = False

    def __init__(self, ref):
        self.ref = ref

    def own_children(self):
        return {self.ref.pid}

    def kill_candidate(self, cand):
        cand.kill()


def test_the_childrens_hooks_fail_the_candidate_and_let_the_reference_go(lock_files):
    proc, pid = _holder(lock_files)
    try:
        cand, ref = _Child(pid), _Child(-5)
        j = _J(cand, ref)
        worker = _Worker(ref)
        lockguard.install(worker, j)
        with pytest.raises(CaseFailed) as failed:
            cand.idle_check()
        assert failed.value.kind == "gpu_lock_held" and failed.value.stage == "correctness"
        assert f"(pid {pid}) held the GPU lock between its requests" in failed.value.reason
        with pytest.raises(CaseFailed):
            ref.lock_culprit()
        # the candidate is killed, which frees the lock: the reference's request completes and is read
        assert cand.killed and not ref.killed
        lockguard.uninstall(j)
        assert cand.idle_check is None and ref.lock_culprit is None
        # inside the worker's own timing turn the look before each request is left out
        worker.exclusive_held = True
        lockguard.install(worker, j)
        cand.idle_check()
        lockguard.uninstall(j)
    finally:
        proc.kill()
        proc.wait(5)


def test_two_processes_passing_the_lock_between_them_are_still_seen(monkeypatch):
    reads = iter([{101: True}, {102: True}])
    monkeypatch.setattr(lockguard, "gpu_lock_holders", lambda: next(reads))
    monkeypatch.setattr(lockguard, "in_candidate_tree", lambda pid, *a: True)
    assert lockguard.candidate_holders(cand_pid=100, own=set()) == [101, 102]
    reads = iter([{101: True}, {}])  # a hold for an instant (a watcher's look at the turnstile): none
    assert lockguard.candidate_holders(cand_pid=100, own=set()) == []


def test_the_reference_queueing_behind_the_candidates_hold_is_looked_at_whatever_else_holds_the_gpu(fake_child,
                                                                                                 monkeypatch):
    """Another worker's reader can hold the turnstile while it too waits for our candidate's hold:
    the reference's wait is then believed, and only the look at the candidate ends it."""
    from kernelwright.judge.worker import child_process as channel

    child, play = fake_child
    child.turn_elsewhere = lambda: True
    looks = []

    def culprit():
        looks.append(1)
        if len(looks) == 2:
            raise CaseFailed("correctness", "held the GPU lock", kind="gpu_lock_held")
    child.lock_culprit = culprit
    monkeypatch.setattr(channel, "LOCK_CHECK_S", 0.05)
    play((0.0, {"op": "gpu_lock", "state": "waiting"}), (5.0, {"op": "run", "ok": True}))
    with pytest.raises(CaseFailed):
        child.recv(10, "computing case 0")
    assert len(looks) == 2
