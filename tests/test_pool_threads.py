"""Workers die with the thread that started them (PR_SET_PDEATHSIG): the pool must start them
from a thread of its own, or every worker started inside judge_many dies when it returns (seen on
the H200: the next candidate got 'judge worker 0 died ... (exit status -9)')."""

import time

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")


def test_workers_outlive_the_threads_of_judge_many():
    options = JudgeOptions(seeds=1, perf=False)
    with JudgePool("cpu", workers=2, options=options) as pool:
        good = CANDIDATES / "tiny_add" / "good.py"
        first = pool.judge_many([(TASK, good), (TASK, good)])
        assert all(v.passed for v in first)
        pids = [w.process.pid for w in pool._workers if w is not None]
        assert pids, "judge_many started no worker"
        time.sleep(1.0)  # a pdeathsig would have landed by now
        assert all(w.process.poll() is None for w in pool._workers if w is not None)
        again = pool.judge(TASK, good)
        assert again.passed, again.reason
        assert {w.process.pid for w in pool._workers if w is not None} >= set(pids[:1])
