"""Issue 20 item 2: a candidate cannot move the other side's timing. What it leaves running after
its calls (threads, subprocesses) fails it; clocks and timers patched in its process fail it; a
harness patched so thoroughly that its own check sees nothing is caught by the worker's clock
around each block. An honest candidate still passes. (Item 6: a GPU with one worker takes no
shared GPU lock.)"""

import pytest

from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES, QUICK_PERF

# Measures a candidate's CPU time and the worker's wall clock around each timed block: alone.
pytestmark = pytest.mark.serial

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
KINDS = {
    "background_thread.py": "background_work",
    "outliving_subprocess.py": "background_work",
    "patched_clocks.py": "timer_patched",
    "patched_event_timing.py": "timer_patched",
    "forged_harness_timer.py": "timing_mismatch",
    "good.py": "passed",
}


@pytest.fixture(scope="module")
def verdicts():
    from kernelwright.judge import JudgeOptions, JudgePool

    options = JudgeOptions(seeds=1, call_timeout=60, case_timeout=60, perf_timeout=120, **QUICK_PERF)
    with JudgePool("cpu", workers=1, options=options) as pool:
        results = pool.judge_many([(TASK, CANDIDATES / "tiny_add" / name) for name in KINDS])
    return dict(zip(KINDS, results))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(KINDS))
def test_kind(verdicts, name):
    verdict = verdicts[name]
    assert verdict.kind == KINDS[name], f"{verdict.stage} {verdict.kind}: {verdict.reason}"
    if name != "good.py":
        assert verdict.stage == "performance" and verdict.correct and verdict.speedup is None


@pytest.mark.slow
def test_honest_candidate_records_the_cross_checks(verdicts):
    perf = [c for c in verdicts["good.py"].cases if c.kind == "performance" and c.ok]
    assert perf
    for case in perf:
        excess, slack = case.timing["wall_excess_ms"]
        assert excess <= slack
        used, window = case.timing["idle_cpu_s"]
        assert window > 0 and used < 0.1


def test_wall_clock_excess_sees_under_reporting():
    from kernelwright.judge.worker.timing import wall_clock_excess

    # both sides: 10 ms of calls and 3 ms of flushes, pads and round trip per block
    honest = [(13.0, 10.0)] * 4
    excess, slack = wall_clock_excess(honest, honest)
    assert excess == 0 and slack > 0
    # the candidate reports a tenth of its 10 ms
    excess, slack = wall_clock_excess(honest, [(13.0, 1.0)] * 4)
    assert excess == pytest.approx(36.0) and excess > slack
    # reporting more than it took is never flagged (it only hurts itself)
    assert wall_clock_excess(honest, [(13.0, 12.0)] * 4)[0] < 0


def test_candidate_tree_reaches_processes_in_other_sessions():
    import os
    import subprocess
    import sys
    import time

    from kernelwright.judge.common import procs

    child = subprocess.Popen([sys.executable, "-c",
                              "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                              "'while True: pass'], start_new_session=True); time.sleep(30)"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(procs.descendants(child.pid)) < 1:
            time.sleep(0.05)
        (grandchild,) = procs.descendants(child.pid)
        assert os.getsid(grandchild) != os.getsid(child.pid)
        before = procs.cpu_seconds([grandchild])[grandchild]
        time.sleep(0.3)
        assert procs.cpu_seconds([grandchild])[grandchild] > before
    finally:
        for pid in procs.descendants(child.pid):
            procs.kill_group(pid)
        child.kill()
        child.wait()


def test_a_gpu_with_one_worker_takes_no_shared_lock(monkeypatch):
    from kernelwright.judge.common.options import WorkerOptions
    from kernelwright.judge.coordinator import pool as pool_module
    from kernelwright.judge.worker.process import Worker

    assert Worker("cuda", WorkerOptions(gpu_workers=1)).share_gpu is False
    shared = Worker("cuda", WorkerOptions(gpu_workers=2))
    assert shared.share_gpu is True
    shared.exclusive_held = True
    assert shared.share_gpu is False
    assert Worker("cuda").share_gpu is True  # a worker started without the count: shared, as before

    monkeypatch.setattr(pool_module, "detect_backend", lambda device: ("cuda", 2))
    for per_device, expected in ((1, 1), (3, 3)):
        pool = pool_module.JudgePool("cuda", workers_per_device=per_device)
        try:
            assert pool.gpu_workers == expected
        finally:
            pool.close()
