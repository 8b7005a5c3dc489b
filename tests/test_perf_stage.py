"""The performance stage under the interpreter: interleaved timing with statistics, and the
perf-only cheats (wrong answers at timed shapes, results cached across timed calls)."""

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES, candidate_expectations

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
CASES = candidate_expectations("tiny_add", gpu=False)


@pytest.fixture(scope="module")
def verdicts():
    # run_timeout 5 s, not 30: hang_at_perf_size.py is stopped at the running limit (the floor
    # run_timeout, the reference's time at perf size being far shorter), well before perf_timeout
    options = JudgeOptions(seeds=2, seed=7, perf=True, perf_blocks=4, block_ms=5, warmup_ms=5,
                           min_calls_per_block=3, call_timeout=30, case_timeout=30, perf_timeout=60, run_timeout=5)
    with JudgePool("cpu", workers=2, options=options) as pool:
        results = pool.judge_many([(TASK, path) for path, _, _ in CASES])
    return {path.name: v for (path, _, _), v in zip(CASES, results)}


@pytest.mark.slow
@pytest.mark.parametrize("path,stage,reason", CASES, ids=[p.stem for p, _, _ in CASES])
def test_perf_verdict(verdicts, path, stage, reason):
    verdict = verdicts[path.name]
    assert verdict.stage == stage, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert any(r in verdict.reason for r in reason.split("|")), verdict.reason  # "a|b": either
    if stage == "performance":
        assert verdict.correct and verdict.speedup is None


@pytest.mark.slow
def test_speedup_statistics_are_complete(verdicts):
    verdict = verdicts["good.py"]
    perf = [c for c in verdict.cases if c.kind == "performance"]
    assert len(perf) == 2
    for case in perf:
        assert case.ref_ms > 0 and case.cand_ms > 0
        assert case.speedup == pytest.approx(case.ref_ms / case.cand_ms)
        assert case.ci95[0] <= case.speedup <= case.ci95[1]
        assert len(case.timing["ref_block_ms"]) == len(case.timing["cand_block_ms"]) == 4
    mean = sum(c.speedup for c in perf) / len(perf)
    assert verdict.speedup == pytest.approx(mean)
    assert verdict.speedup_geomean <= verdict.speedup + 1e-12  # AM >= GM
    assert verdict.speedup_ci95[0] <= verdict.speedup_ci95[1]


def test_perf_subset_spreads_from_first_to_last():
    from kernelwright.judge.worker.timing import perf_subset

    assert perf_subset(5, None) == {0, 1, 2, 3, 4}
    assert perf_subset(3, 5) == {0, 1, 2}
    assert perf_subset(16, 4) == {0, 5, 10, 15}
    assert perf_subset(16, 1) == {15}


@pytest.mark.slow
def test_untimed_perf_cases_are_reported_not_dropped():
    from kernelwright.judge import JudgeOptions, JudgePool

    options = JudgeOptions(seeds=1, perf=True, perf_blocks=2, block_ms=2, warmup_ms=2, min_calls_per_block=2,
                           max_perf_cases=1)
    with JudgePool("cpu", workers=1, options=options) as pool:
        verdict = pool.judge(TASK, CANDIDATES / "tiny_add" / "good.py")
    perf = [c for c in verdict.cases if c.kind == "performance"]
    assert verdict.passed and len(perf) == 2
    assert [c.ok for c in perf] == [None, True]
    assert "not timed" in perf[0].reason



@pytest.mark.slow
def test_trace_names_every_item_and_the_timing_turn(monkeypatch, capfd):
    """KERNELWRIGHT_TRACE=1 makes the worker print where a task's time goes while it runs: each
    correctness item, each perf-size check, the timing turn and the verdict, on stderr."""
    monkeypatch.setenv("KERNELWRIGHT_TRACE", "1")
    options = JudgeOptions(seeds=2, perf=True, perf_blocks=2, block_ms=2, warmup_ms=2, min_calls_per_block=2,
                           call_timeout=30, case_timeout=30, perf_timeout=60)
    with JudgePool("cpu", workers=1, options=options) as pool:
        verdict = pool.judge(TASK, CANDIDATES / "tiny_add" / "good.py")
    assert verdict.stage == "passed", verdict.reason
    lines = [line for line in capfd.readouterr().err.splitlines() if line.startswith("[kernelwright worker")]
    items = [line for line in lines if ": reference " in line and "candidate" in line and "at perf size" not in line]
    assert len(items) == 2 * len(TASK.correctness_cases), lines
    assert sum("at perf size" in line for line in lines) == len(TASK.perf_cases), lines
    assert sum("timing turn: waited" in line for line in lines) == 1, lines
    assert lines[0].endswith("good.py") and "verdict passed after" in lines[-1], lines


@pytest.mark.slow
def test_calls_longer_than_a_block_are_timed_two_per_block_on_one_set():
    """A call longer than a block is timed twice per block, both times on the block's own input
    set (block b uses set b): half the exclusive time of cycling every set, and a result cached
    by address still shows up as a call without a launch."""
    options = JudgeOptions(seeds=1, seed=3, perf=True, perf_blocks=3, block_ms=0.001, warmup_ms=2,
                           min_calls_per_block=3, call_timeout=30, case_timeout=30, perf_timeout=60)
    good, cached = CANDIDATES / "tiny_add" / "good.py", CANDIDATES / "tiny_add" / "cached_in_timing.py"
    with JudgePool("cpu", workers=2, options=options) as pool:
        passed, caught = pool.judge_many([(TASK, good), (TASK, cached)])
    assert passed.stage == "passed", passed.reason
    timed = [c for c in passed.cases if c.kind == "performance" and c.timing]
    assert timed and all(c.timing["one_set_per_block"] and c.timing["calls_per_block"] == 2 for c in timed)
    assert all(len(c.timing["cand_block_ms"]) == 3 for c in timed)
    assert caught.stage == "performance" and "cached across calls" in caught.reason, caught.reason
