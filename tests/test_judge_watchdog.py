"""The coordinator's watchdog (coordinator/workerhandle.py): a worker stopped by a signal, or one
that sends no heartbeat while it judges, is noticed within seconds (not the hours of
`job_timeout`), killed with its whole process tree and replaced, and its candidate gets a
judge_error verdict that says why; the pool goes on judging."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing import Pipe
from pathlib import Path

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.common import procs
from kernelwright.judge.common.requests import JudgeRequest
from kernelwright.judge.coordinator import workerhandle
from kernelwright.judge.coordinator.workerhandle import WorkerHandle, WorkerLost
from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
GOOD = CANDIDATES / "tiny_add" / "good.py"


def alive(pid: int) -> bool:
    """A process that still runs (a zombie, dead and waiting for init to reap it, does not)."""
    return procs.process_state(pid) not in (None, "Z", "X")


@pytest.mark.slow
def test_a_worker_stopped_mid_judging_is_a_judge_error_and_the_pool_goes_on(tmp_path):
    slow = tmp_path / "sleeps.py"
    slow.write_text(GOOD.read_text().replace(
        "def vector_add(x, y):\n", "def vector_add(x, y):\n    import time\n    time.sleep(120)\n"))
    options = JudgeOptions(seeds=1, perf=False, run_timeout=120, call_timeout=200, case_timeout=200)
    with JudgePool("cpu", workers=1, options=options) as pool:
        pool.start()
        worker = pool._workers[0]
        assert worker is not None
        pid = worker.process.pid
        future = pool.submit(TASK, slow, candidate_id="stopped")
        # the request is with the worker once its children are there (the reference's and the
        # candidate's, which sleeps in its call); on a loaded machine that takes more than seconds
        deadline = time.monotonic() + 120
        while len(procs.descendants(pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        assert not future.done()
        tree = procs.descendants(pid)
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        verdict = future.result(timeout=60)
        noticed = time.monotonic() - stopped
        assert (verdict.stage, verdict.kind) == ("judge_error", "judge_error"), verdict.reason
        assert "the judge's worker" in verdict.reason and "stopped by a signal (SIGSTOP" in verdict.reason
        assert "while judging this candidate" in verdict.reason and "killed with its process tree" in verdict.reason
        assert verdict.candidate_id == "stopped"
        assert noticed < 15, f"noticed {noticed:.1f} s after the stop"
        # the worker and everything it had started are gone (a zombie waits for init: not running)
        assert not os.path.exists(f"/proc/{pid}"), f"worker {pid} is still there"
        # (SIGKILLed is not yet gone: a child of torch's size takes a moment to unmap its memory)
        deadline = time.monotonic() + 10
        while [p for p in tree if alive(p)] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert tree and not [p for p in tree if alive(p)], [(p, procs.process_state(p)) for p in tree]
        # and the pool goes on, on a new worker
        again = pool.submit(TASK, GOOD.read_text()).result(timeout=300)
        assert again.passed, again.reason
        assert pool._workers[0] is not None and pool._workers[0].process.pid != pid


# -- the handle alone, against a fake worker (no torch: seconds) -----------------------------------
FAKE_WORKER = """
import os, signal, sys, time
from multiprocessing.connection import Connection

conn = Connection(int(sys.argv[1]))
conn.recv()                                   # the options
conn.send({"op": "ready", "ok": True, "info": {}})
conn.recv()                                   # the judge request
how = sys.argv[2]
if how == "beats":                            # busy for 3 s, beating, then the verdict
    for _ in range(6):
        time.sleep(0.5)
        conn.send({"op": "alive"})
    conn.send({"op": "verdict", "verdict": {"fine": True}})
elif how == "silent":                         # wedged: no heartbeat, no reply
    time.sleep(600)
elif how == "half_then_stop":                 # stopped in the middle of its reply
    os.write(conn.fileno(), (1000).to_bytes(4, "big") + b"x" * 10)
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(600)
elif how == "child_then_stop":                # a child in a session of its own, then stopped
    import subprocess
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    print(child.pid, flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(600)
"""


def fake_handle(how: str, tmp_path: Path, silence_s: float = 60.0) -> WorkerHandle:
    """A WorkerHandle whose process is FAKE_WORKER (constructed by hand: the real constructor
    starts kernelwright's worker)."""
    script = tmp_path / "fake_worker.py"
    script.write_text(textwrap.dedent(FAKE_WORKER))
    ours, theirs = Pipe(duplex=True)
    handle = WorkerHandle.__new__(WorkerHandle)
    handle.backend, handle.index, handle.start_timeout, handle.info = "cpu", 0, 30.0, None
    handle.process = subprocess.Popen([sys.executable, str(script), str(theirs.fileno()), how],
                                      pass_fds=[theirs.fileno()], start_new_session=True,
                                      stdout=subprocess.PIPE, text=True)
    theirs.close()
    handle.conn = ours
    handle._conn_lock = threading.Lock()
    handle._buffer = bytearray()
    from collections import deque
    handle._inbox = deque()
    handle.stop_grace_s, handle.silence_s = workerhandle.STOP_GRACE_S, silence_s
    handle.conn.send({"options": {}})
    handle.wait_ready()
    return handle


REQUEST = JudgeRequest(task_ref="tiny_add", candidate_path="/c.py", seeds=[1], options=JudgeOptions())


def test_heartbeats_keep_a_busy_worker_alive(tmp_path):
    handle = fake_handle("beats", tmp_path, silence_s=1.5)
    try:
        assert handle.judge(REQUEST, timeout=30) == {"fine": True}  # 3 s busy, never 1.5 s silent
    finally:
        handle.kill()


def test_a_silent_worker_is_wedged_and_killed(tmp_path):
    handle = fake_handle("silent", tmp_path, silence_s=1.5)
    started = time.monotonic()
    with pytest.raises(WorkerLost, match=r"sent no sign of life for \d+ s while judging this candidate") as caught:
        handle.judge(REQUEST, timeout=3600)
    assert time.monotonic() - started < 10
    assert "no heartbeat; it was sleeping" in str(caught.value)
    assert handle.process.poll() is not None  # killed and reaped


def test_a_worker_stopped_inside_a_reply_is_noticed(tmp_path):
    """A partial frame never blocks the watchdog: the rest of a reply is read as it comes."""
    handle = fake_handle("half_then_stop", tmp_path)
    started = time.monotonic()
    with pytest.raises(WorkerLost, match=r"stopped by a signal \(SIGSTOP"):
        handle.judge(REQUEST, timeout=3600)
    assert time.monotonic() - started < 10
    assert handle.process.poll() is not None


def test_a_stopped_worker_is_killed_with_its_whole_tree(tmp_path):
    handle = fake_handle("child_then_stop", tmp_path)
    pid = handle.process.pid
    with pytest.raises(WorkerLost, match="killed with its process tree"):
        handle.judge(REQUEST, timeout=3600)
    child = int(handle.process.stdout.readline())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child), f"the worker's child {child} (another session) outlived it"
    assert not os.path.exists(f"/proc/{pid}")
