"""On a real GPU: candidates that fault in a row make the judge check the GPU with the known-good
kernel, which passes on a healthy GPU, so the GPU stays in service, the faults stand as the
candidates' verdicts, and the next candidate is judged there as before (health.py)."""

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.coordinator.health import FAULT_STREAK
from kernelwright.tasks import resolve_task

from .conftest import CANDIDATES

pytestmark = pytest.mark.gpu


def test_faulting_candidates_do_not_take_a_healthy_gpu_out_of_service():
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=1, perf=False, call_timeout=30, case_timeout=20, load_timeout=120)
    with JudgePool("auto", workers=1, options=options, workers_per_device=1) as pool:
        assert pool.backend in ("cuda", "hip")
        faults = [pool.judge(task, CANDIDATES / "vector_add" / "illegal_memory_access.py") for _ in range(FAULT_STREAK)]
        after = pool.judge(task, CANDIDATES / "vector_add" / "good.py")
    assert all(v.kind.value == "gpu_fault" for v in faults), [(v.kind, v.reason) for v in faults]
    assert pool.health.checks == 1 and not pool.health.retired
    assert after.passed, after.reason
