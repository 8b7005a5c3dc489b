"""GPU behaviour, run on the device machine: references pass with a measured speedup, and the bad
candidates (GPU faults, hangs, out-of-memory, side streams, patched timers) are contained."""

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import load_task_file, resolve_task

from .conftest import CANDIDATES, candidate_expectations

pytestmark = pytest.mark.gpu
STARTER = ["vector_add", "softmax", "rmsnorm", "matmul"]


@pytest.fixture(scope="module")
def pool():
    import os

    os.environ["KERNELWRIGHT_FRAME_GRACE_S"] = "3"  # half_a_reply.py: its timeout, not 30 s
    options = JudgeOptions(seeds=3, perf_blocks=6, call_timeout=30, case_timeout=20, load_timeout=120)
    with JudgePool("auto", options=options) as p:
        assert p.backend in ("cuda", "hip")
        yield p


@pytest.mark.parametrize("name", STARTER)
def test_triton_reference_passes_with_speedup(pool, name):
    task = resolve_task(name)
    verdict = pool.judge(task, task.triton_reference)
    assert verdict.passed, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert verdict.speedup is not None and verdict.speedup > 0
    perf = [c for c in verdict.cases if c.kind == "performance"]
    assert len(perf) == len(task.perf_cases)
    assert all(c.ci95[0] <= c.speedup <= c.ci95[1] for c in perf)
    # one worker on its GPU: no shared GPU lock, so nothing is compiled "unlocked" (item 6)
    assert "compile_unlocked" not in verdict.stage_seconds, verdict.stage_seconds


def test_shared_gpu_compiles_with_the_lock_let_go():
    """Two workers on one GPU share it: checks hold the lock shared, and Triton compiles with it
    let go (the compile hook works on this Triton)."""
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=1, perf=False, call_timeout=30, case_timeout=20, load_timeout=120)
    with JudgePool("auto", workers=1, options=options, workers_per_device=2) as shared:
        verdict = shared.judge(task, task.triton_reference)
    assert verdict.passed, verdict.reason
    assert "compile_unlocked" in verdict.stage_seconds, verdict.stage_seconds


def test_bad_candidates_are_contained(pool):
    task = resolve_task("vector_add")
    cases = candidate_expectations("vector_add", gpu=True)
    verdicts = pool.judge_many([(task, path) for path, _, _ in cases])
    wrong = []
    for (path, stage, reason), verdict in zip(cases, verdicts):
        # "a|b": either detection is right (side_stream.py: the escape gap, or the roofline when
        # the hidden work is too short for the gap to show it)
        if verdict.stage != stage or not any(r in verdict.reason for r in reason.split("|")):
            wrong.append(f"{path.name}: expected {stage} '{reason}', got {verdict.stage}: {verdict.reason}")
    assert not wrong, "\n".join(wrong)
    # an out-of-memory verdict is only given after a second try with the GPU to itself
    oom = verdicts[[p.name for p, _, _ in cases].index("out_of_memory.py")]
    assert any("judged again with the GPU to itself" in f for f in oom.flags), oom.flags
    # the GPU is still usable after faults, hangs and OOMs
    again = pool.judge(task, CANDIDATES / "vector_add" / "good.py")
    assert again.passed, again.reason


def test_patched_timers_do_not_fake_a_speedup(pool):
    task = resolve_task("vector_add")
    verdict = pool.judge(task, CANDIDATES / "vector_add" / "timer_patch.py")
    assert verdict.kind == "timer_patched" and verdict.speedup is None, verdict.reason


@pytest.mark.parametrize("name,kinds", [
    ("side_stream_long.py", ("timing_cheat", "background_work")),  # long work queued on a side stream
    ("timer_patch.py", ("timer_patched",)),                         # Event.elapsed_time / 100 (and perf_counter)
])
def test_cheats_leave_the_next_verdict_alone(pool, name, kinds):
    """The cheat fails, and an honest kernel judged right after it gets its usual speedup: nothing
    the cheat left behind (side-stream work, a patched process) reaches the next timing."""
    task = resolve_task("vector_add")
    good = CANDIDATES / "vector_add" / "good.py"
    before = pool.judge(task, good)
    cheat = pool.judge(task, CANDIDATES / "vector_add" / name)
    after = pool.judge(task, good)
    assert cheat.kind in kinds and cheat.speedup is None, f"{cheat.kind}: {cheat.reason}"
    assert before.passed and after.passed, (before.reason, after.reason)
    assert 0.8 < after.speedup / before.speedup < 1.25, (before.speedup, after.speedup)


def test_perf_only_cheats_on_gpu(pool):
    task = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
    cases = candidate_expectations("tiny_add", gpu=True)
    verdicts = pool.judge_many([(task, path) for path, _, _ in cases])
    for (path, stage, reason), verdict in zip(cases, verdicts):
        assert verdict.stage == stage and any(r in verdict.reason for r in reason.split("|")), \
            (path.name, verdict.stage, verdict.reason)
    # Perf shapes are first run (and autotuned) while other workers share the GPU: those choices
    # are dropped, so the timed configs are chosen with the GPU to itself.
    tuned = verdicts[[p.name for p, _, _ in cases].index("autotuned.py")]
    perf = [c for c in tuned.cases if c.kind == "performance" and c.ok]
    assert perf and all(c.timing["autotuners_reset"] == {"ref": 0, "cand": 1} for c in perf)


def test_a_call_that_waits_for_the_gpu_is_flagged(pool):
    task = resolve_task("vector_add")
    verdict = pool.judge(task, CANDIDATES / "vector_add" / "host_sync.py")
    assert verdict.passed, f"{verdict.stage}: {verdict.reason}"
    assert any(f.startswith("host-synchronising calls (candidate") for f in verdict.flags), verdict.flags
    good = pool.judge(task, CANDIDATES / "vector_add" / "good.py")
    assert not any(f.startswith("host-synchronising") for f in good.flags), good.flags
