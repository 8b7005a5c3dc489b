"""Workers die with the thread that started them (PR_SET_PDEATHSIG): the pool must start them
from a thread of its own, or every worker started inside judge_many dies when it returns (seen on
the H200: the next candidate got 'judge worker 0 died ... (exit status -9)')."""

import time

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_judge_bug_costs_one_verdict_and_never_shifts_the_others(monkeypatch, tmp_path):
    """An exception while judging one candidate (CI once saw CPython 3.11's AST converter fail in a
    judging thread) becomes that candidate's judge_error verdict; every other verdict stays with
    its own candidate."""
    from kernelwright.judge.coordinator import pool as pool_module

    good, wrong = CANDIDATES / "tiny_add" / "good.py", tmp_path / "subtracts.py"
    wrong.write_text(good.read_text().replace("mask=mask) + tl.load", "mask=mask) - tl.load"))
    real = pool_module.static_verdict

    def flaky(task, candidate):
        if candidate.name == "good.py" and not flaky.raised:
            flaky.raised = True
            raise SystemError("AST constructor recursion depth mismatch (before=24, after=18)")
        return real(task, candidate)

    flaky.raised = False
    monkeypatch.setattr(pool_module, "static_verdict", flaky)
    with JudgePool("cpu", workers=2, options=JudgeOptions(seeds=1, perf=False)) as pool:
        verdicts = pool.judge_many([(TASK, good), (TASK, wrong), (TASK, good)])
    assert [v.candidate for v in verdicts] == [str(good), str(wrong), str(good)]
    assert verdicts[0].stage == "judge_error" and "recursion depth mismatch" in verdicts[0].reason
    assert verdicts[1].stage == "correctness" and verdicts[2].passed


def test_sources_are_parsed_one_at_a_time(monkeypatch, tmp_path):
    import ast
    import threading

    from kernelwright.judge.coordinator import static

    inside, most = [0], [0]
    real = ast.parse

    def slow_parse(*args, **kwargs):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.02)
        inside[0] -= 1
        return real(*args, **kwargs)

    monkeypatch.setattr(static.ast, "parse", slow_parse)
    path = CANDIDATES / "tiny_add" / "good.py"
    threads = [threading.Thread(target=static.check_source, args=(path, "tiny_add")) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1


def test_closing_the_pool_mid_run_records_no_verdict_for_what_was_not_judged():
    """Ctrl-C closes the pool while judging threads still run. A candidate whose worker is killed
    by that close, or that never got a worker, must get no verdict at all: a stored verdict is
    final and a resumed run would skip the task (CI once saw all six builtin tasks stored after
    SIGINT, four of them 'cannot schedule new futures after shutdown')."""
    import threading

    import pytest

    from kernelwright.judge import PoolClosed

    good = CANDIDATES / "tiny_add" / "good.py"
    seen = []
    pool = JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, perf=False))
    outcome = {}

    def judge_all():
        try:
            pool.judge_many([(TASK, good)] * 6, on_verdict=lambda i, v: seen.append((i, v)))
        except PoolClosed as exc:
            outcome["raised"] = exc

    thread = threading.Thread(target=judge_all)
    thread.start()
    deadline = time.time() + 120
    while not seen and time.time() < deadline:
        time.sleep(0.05)
    assert seen, "no candidate was judged in 120 s"
    pool.close()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert "raised" in outcome and "not judged" in str(outcome["raised"])
    assert seen and len(seen) < 6
    assert all(v.passed for _, v in seen), [v.reason for _, v in seen]
    with pytest.raises(PoolClosed):
        pool.judge(TASK, good)


@pytest.mark.slow
def test_workers_start_side_by_side():
    """Only starting the process goes through the spawner thread; the handshake (importing torch,
    initialising the device) is awaited by whoever needs the worker. One after another, eight
    workers took 34 s on the H200 before the last one judged anything."""
    options = JudgeOptions(seeds=1, perf=False)
    with JudgePool("cpu", workers=3, options=options) as pool:
        mark = time.monotonic()
        pool.start(wait=False)
        spawned = time.monotonic() - mark
        handles = [w for w in pool._workers if w is not None]
        assert len(handles) == 3 and all(w.info is None for w in handles)
        assert all(w.process.poll() is None for w in handles)
        mark = time.monotonic()
        pool.start()  # waits for the handshakes of the workers already starting
        ready = time.monotonic() - mark
        assert [w.process.pid for w in pool._workers] == [w.process.pid for w in handles], "workers restarted"
        assert all(w.info for w in handles) and pool.device_info
        # every process was started before any handshake was awaited: the start cost one
        # worker's import, not three (a worker imports torch and Triton: seconds)
        assert spawned < ready / 2, (spawned, ready)
        assert pool.judge(TASK, CANDIDATES / "tiny_add" / "good.py").passed


def test_a_pool_closed_while_its_workers_start_leaves_no_process():
    """A usage error found after the workers were started (judge-suite loads the suite while they
    start) closes the pool at once: a worker still importing torch is killed, not awaited."""
    import os

    pool = JudgePool("cpu", workers=2, options=JudgeOptions(seeds=1, perf=False)).start(wait=False)
    pids = [w.process.pid for w in pool._workers]
    mark = time.monotonic()
    pool.close()
    assert time.monotonic() - mark < 5
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} outlived its pool")


def test_the_backend_is_detected_without_initialising_cuda(monkeypatch):
    """judge-suite starts its pool while the suite loads, and loading runs test modules in forked
    processes; `torch.cuda.is_available()` initialises the driver, after which no forked child can
    use the GPU (on the H200 two ROCm tasks whose modules touch it at import were lost). The count
    comes from `torch.cuda.device_count()`, which asks NVML."""
    import pytest
    import torch

    from kernelwright.judge.coordinator.pool import DeviceUnavailable, detect_backend

    def initialises_the_driver():
        raise AssertionError("torch.cuda.is_available() poisons fork()")

    monkeypatch.setattr(torch.cuda, "is_available", initialises_the_driver)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert detect_backend("auto") == ("cuda", 2)
    assert detect_backend("cuda") == ("cuda", 2)
    with pytest.raises(DeviceUnavailable, match="sees a cuda GPU"):
        detect_backend("hip")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    assert detect_backend("auto")[0] == "cpu"
    with pytest.raises(DeviceUnavailable, match="sees no GPU"):
        detect_backend("cuda")


def test_workers_per_gpu_default_to_one_per_two_cores_of_its_share(monkeypatch):
    from kernelwright.judge.coordinator import pool as pool_module

    monkeypatch.setattr(pool_module.os, "cpu_count", lambda: 16)
    assert pool_module.default_workers_per_device(1) == 8     # one H200, 16 cores: the suites' setting
    assert pool_module.default_workers_per_device(2) == 4
    monkeypatch.setattr(pool_module.os, "cpu_count", lambda: 128)
    assert pool_module.default_workers_per_device(8) == 8     # capped
    monkeypatch.setattr(pool_module.os, "cpu_count", lambda: 2)
    assert pool_module.default_workers_per_device(4) == 1     # never none
    monkeypatch.setattr(pool_module.os, "cpu_count", lambda: None)
    assert pool_module.default_workers_per_device(1) == 1
