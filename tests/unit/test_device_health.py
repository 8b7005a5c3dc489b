"""A GPU whose candidates keep faulting is checked with a known-good kernel and, if that fails
there too, taken out of service for the rest of the run; the candidate that tipped it is judged
again on another GPU (issue 33, item 2; judge/coordinator/health.py).

The pools here are real `JudgePool` / `RayJudgePool` objects whose workers are stubs answering
as a healthy or a broken GPU would (no GPU, no Ray needed): what is under test is the pool's
bookkeeping, which the real workers feed with the same dicts."""

from __future__ import annotations

import queue
import threading
from pathlib import Path

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.coordinator import health as health_mod
from kernelwright.judge.coordinator.health import FAULT_STREAK, DeviceHealth
from kernelwright.judge.coordinator.pool import known_good_job
from kernelwright.scale import raypool
from kernelwright.tasks.registry import builtin_task_paths, load_builtin_task

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "candidates" / "vector_add" / "good.py"
BAD = ROOT / "tests" / "candidates" / "vector_add" / "illegal_memory_access.py"
TASK = load_builtin_task(builtin_task_paths()["vector_add"])
PROBE = str(known_good_job()[1].resolve())


def reply(kind: str, candidate: str) -> dict:
    ok = kind == "passed"
    return {"task": "vector_add", "candidate": candidate, "stage": "passed" if ok else "correctness", "call": ok,
            "correct": ok, "reason": "" if ok else f"{kind} (stub)", "kind": kind}


class StubWorker:
    """A worker on a healthy GPU (a candidate's own fault shows; the rest passes) or on a
    broken one (everything faults, the known-good kernel included)."""

    def __init__(self, log: list, device: int, broken: bool) -> None:
        self.log, self.device, self.broken = log, device, broken

    def judge(self, request, timeout) -> dict:
        path = request.candidate_path
        self.log.append((self.device, "probe" if path == PROBE else Path(path).name))
        if self.broken or Path(path).name == BAD.name:
            return reply("gpu_fault", path)
        return reply("passed", path)


def local_pool(broken: set[int], n_devices: int = 2) -> tuple[JudgePool, list]:
    """A JudgePool of `n_devices` GPUs, one worker each, whose workers are stubs."""
    pool = object.__new__(JudgePool)
    pool.options, pool.backend = JudgeOptions(seeds=1), "cuda"
    pool.device_ids, pool.n_devices = tuple(range(n_devices)), n_devices
    pool.n_workers, pool._closing, pool._lock, pool._task_files = n_devices, threading.Event(), threading.Lock(), []
    pool._free = queue.Queue()
    for i in range(n_devices):
        pool._free.put(i)
    log: list = []
    workers = [StubWorker(log, d, d in broken) for d in range(n_devices)]
    pool._worker = lambda i: workers[i]
    pool._replace = lambda i: None
    pool.health = DeviceHealth(n_devices, pool._device_name)
    return pool, log


def judge_in_turn(pool, paths) -> list:
    """One candidate at a time, so which GPU takes which is fixed (the free queue's order)."""
    return [pool._judge_file(TASK, p, None) for p in paths]


def test_a_broken_gpu_leaves_the_run_and_its_candidates_are_judged_again_elsewhere(capsys):
    pool, log = local_pool(broken={1})
    verdicts = judge_in_turn(pool, [GOOD] * 10)  # taken by GPU 0, 1, 0, 1, ... in turn
    # GPU 1 faulted on good kernels: the first two such verdicts stand (nothing said yet that the
    # GPU is to blame); the third triggered the check, which failed, so that candidate was judged
    # again on GPU 0, as is everything after it
    tipped = 2 * FAULT_STREAK - 1
    assert [v.kind.value for v in verdicts] == ["passed", "gpu_fault"] * (FAULT_STREAK - 1) + ["passed"] * 6
    assert pool.health.retired.keys() == {1}
    assert "known-good kernel failed there too" in pool.health.retired[1]
    probe = log.index((1, "probe"))
    assert log[probe + 1] == (0, "good.py")  # the tipping candidate, again, on GPU 0
    assert all(d == 0 for d, _ in log[probe + 1:]) and len(log[probe + 1:]) == len(verdicts) - tipped
    err = capsys.readouterr().err
    assert "GPU 1 is out of service for the rest of this run" in err and "1 of 2 GPU(s) judge from now on" in err
    assert pool.health.report() == [{"device": "GPU 1", "why": pool.health.retired[1]}]


def test_a_candidate_that_faults_everywhere_does_not_take_a_gpu_out_of_service():
    """The known-good kernel passes where the candidates faulted: their verdicts stand, the GPU
    stays, and the next check waits for twice the streak."""
    pool, log = local_pool(broken=set(), n_devices=1)
    verdicts = judge_in_turn(pool, [BAD] * (3 * FAULT_STREAK))
    assert all(v.kind.value == "gpu_fault" for v in verdicts)
    assert not pool.health.retired
    probes = [i for i, (_, what) in enumerate(log) if what == "probe"]
    # checks after the 3rd and (3 + 6 =) 9th fault: 3, 6, 12, ... (health.MAX_STREAK caps it)
    assert len(probes) == 2 and pool.health.checks == 2
    assert probes[0] == FAULT_STREAK and probes[1] == FAULT_STREAK * 3 + 1


def test_a_clean_verdict_between_faults_restarts_the_streak():
    pool, log = local_pool(broken=set(), n_devices=1)
    judge_in_turn(pool, [BAD, BAD, GOOD, BAD, BAD, GOOD, BAD, BAD])
    assert pool.health.checks == 0 and not any(what == "probe" for _, what in log)


def test_the_last_gpu_in_service_is_kept_with_a_warning(capsys):
    """A false alarm on the only GPU would end the whole run: it stays, and says so."""
    pool, log = local_pool(broken={0, 1})
    verdicts = judge_in_turn(pool, [GOOD] * 12)
    assert pool.health.retired.keys() == {0}  # the first to fail its check (GPU 0 takes candidate 1)
    assert pool.health.in_service(1) and pool.health.warnings
    assert "it is the last GPU in service, so it stays" in capsys.readouterr().err
    assert all(v.kind.value == "gpu_fault" for v in verdicts)  # what GPU 1 gives stands: nothing better exists
    one, _ = local_pool(broken={0}, n_devices=1)
    judge_in_turn(one, [GOOD] * (2 * FAULT_STREAK))
    assert not one.health.retired and len(one.health.warnings) == 1


def test_when_every_gpu_is_out_of_service_each_candidate_gets_a_judge_error_at_once():
    """Only a dead worker (a Ray actor) takes the last GPU: then nothing can judge, and says so."""
    pool, log = local_pool(broken=set(), n_devices=1)
    pool.health.retire(0, "its actor died (the actor is not restarted)")
    verdict = pool._judge_file(TASK, GOOD, None)
    assert verdict.kind.value == "judge_error" and "every GPU of this run is out of service" in verdict.reason
    assert verdict.reason.count("its actor died") == 1 and not log


def test_the_check_runs_on_a_fresh_worker():
    """Nothing a candidate left in the old worker (its Triton cache) can fail the check."""
    pool, log = local_pool(broken=set(), n_devices=1)
    replaced = []
    pool._replace = lambda i: replaced.append((i, len(log)))
    judge_in_turn(pool, [BAD] * FAULT_STREAK)
    assert replaced == [(0, FAULT_STREAK)] and log[FAULT_STREAK] == (0, "probe")


def test_timeouts_in_a_row_are_suspect_too():
    pool, log = local_pool(broken=set(), n_devices=1)

    class Hanging(StubWorker):
        def judge(self, request, timeout):
            out = super().judge(request, timeout)
            return out if self.log[-1][1] == "probe" else reply("timeout", request.candidate_path)

    hanging = Hanging(log, 0, False)
    pool._worker = lambda i: hanging
    judge_in_turn(pool, [GOOD] * FAULT_STREAK)
    assert pool.health.checks == 1


def test_closing_during_the_check_retires_nothing():
    pool, log = local_pool(broken={1})

    def closing_check(index):
        pool._closing.set()
        return type(pool)._known_good_fails(pool, index)

    pool._known_good_fails = closing_check
    from kernelwright.judge import PoolClosed

    with pytest.raises(PoolClosed):
        judge_in_turn(pool, [GOOD] * (2 * FAULT_STREAK))
    assert not pool.health.retired


def test_a_suspect_verdict_from_a_gpu_retired_meanwhile_is_judged_again():
    """Another worker's check retired the GPU while this candidate ran there: its fault is the
    GPU's, so it is judged again elsewhere."""
    pool, log = local_pool(broken={1})
    pool.health.retire(1, "checked by another worker")
    pool._free = queue.Queue()
    for i in (1, 0):  # the candidate was already on GPU 1's worker
        pool._free.put(i)
    real = pool._take_slot
    pool._take_slot = lambda: pool._free.get() if not log else real()
    verdict = pool._judge_file(TASK, GOOD, None)
    assert verdict.correct and log == [(1, "good.py"), (0, "good.py")]


def test_the_streak_needed_doubles_up_to_its_cap():
    h = DeviceHealth(1)
    needed = []
    for _ in range(6):
        n = 0
        while not h.record(0, suspect=True):
            n += 1
        needed.append(n + 1)
        assert h.check(0, lambda: None) is None
    assert needed == [3, 6, 12, 24, 48, health_mod.MAX_STREAK]


def test_a_ray_actors_gpu_leaves_the_run_by_the_same_rule(capsys):
    """RayJudgePool shares the rule: an actor whose GPU keeps faulting, the known-good kernel
    included, is out of service; a dead actor is out at once (its own test: test_ray_executor)."""
    pool = object.__new__(raypool.RayJudgePool)
    pool.options, pool.backend, pool.n_devices, pool.n_workers = JudgeOptions(seeds=1), "cuda", 2, 2
    pool._closing, pool._lock, pool._task_files = threading.Event(), threading.Lock(), []
    pool._free = queue.Queue()
    for i in range(2):
        pool._free.put(i)
    log: list = []
    workers = [StubWorker(log, 0, False), StubWorker(log, 1, True)]
    pool._workers = [None, None]
    pool._worker = lambda i: workers[i]
    pool.health = DeviceHealth(2, pool._device_name)
    verdicts = judge_in_turn(pool, [GOOD] * 8)
    assert pool.health.retired.keys() == {1}
    assert [v.correct for v in verdicts] == [True, False] * (FAULT_STREAK - 1) + [True] * 4
    assert "the GPU of judging actor 1 is out of service" in capsys.readouterr().err


def test_the_meter_reports_the_gpus_out_of_service():
    from kernelwright.agent.meter import JudgeMeter

    pool, _ = local_pool(broken={1})
    judge_in_turn(pool, [GOOD] * 6)
    report = JudgeMeter(pool, 2).report()
    assert report["out_of_service"] == [{"device": "GPU 1", "why": pool.health.retired[1]}]
    healthy, _ = local_pool(broken=set())
    assert "out_of_service" not in JudgeMeter(healthy, 2).report()


@pytest.mark.parametrize("name", ["vector_add"])
def test_the_known_good_kernel_is_the_builtin_reference(name):
    task, path = known_good_job()
    assert task.name == name and path.is_file() and path.parent.name == "triton_refs"
