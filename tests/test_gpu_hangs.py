"""A kernel that never terminates, on a real GPU: judged a timeout within 60 s with the default
limits (call_timeout 300 s, run_timeout 30 s), while an honest candidate judged on the same GPU at
the same time waits no longer than the detection; the GPU lock is free afterwards, and an honest
kernel judged right after passes with a speedup. About 60-80 s on an H200."""

import os
import time

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import resolve_task

from .conftest import CANDIDATES

pytestmark = pytest.mark.gpu
DETECT_S = 60.0


def test_a_kernel_that_never_ends_is_judged_fast_and_the_gpu_recovers(monkeypatch):
    from kernelwright.judge.common import gpulock, lockholders

    task = resolve_task("vector_add")
    hang = (CANDIDATES / "hangs" / "kernel_never_ends.py").read_text()
    good = (CANDIDATES / "vector_add" / "good.py").read_text()
    options = JudgeOptions(seeds=2, perf_blocks=4)  # every time limit at its default
    assert options.call_timeout >= 300 and options.run_timeout <= 30
    with JudgePool("auto", workers=1, workers_per_device=2, options=options) as pool:
        assert pool.backend in ("cuda", "hip")
        # warm workers (torch imported, CUDA initialised) and a compiled honest kernel
        warm = pool.submit(task, good, "warm", options=JudgeOptions(seeds=1, perf=False))
        assert warm.result(timeout=300).passed
        start = time.monotonic()
        hung = pool.submit(task, hang, "hang")
        time.sleep(3)  # the hang is under way (its kernel spins, its process holds the GPU shared)
        beside = pool.submit(task, good, "beside")
        verdict = hung.result(timeout=200)
        hang_s = time.monotonic() - start
        assert (verdict.stage, verdict.kind) == ("call", "timeout"), verdict.reason
        assert "s running" in verdict.reason and "running limit" in verdict.reason, verdict.reason
        assert hang_s <= DETECT_S, f"the hang took {hang_s:.1f} s to judge: {verdict.reason}"
        # judged beside the hang (its timing turn needed the GPU to itself): held up no longer
        # than the detection, then measured normally
        other = beside.result(timeout=200)
        beside_s = time.monotonic() - start
        assert other.passed and other.speedup, other.reason
        assert beside_s <= hang_s + 45, (beside_s, hang_s)
        # nothing holds this GPU's lock any more (the hung process and anything it left are gone)
        first = (os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES") or "0").split(",")[0]
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", first)
        lock, turnstile = gpulock._open_lock_files()
        try:
            assert lockholders.lock_holders(lock) == []
        finally:
            lock.close()
            turnstile.close()
        # and the GPU still works: an honest kernel right after, with a speedup
        again = pool.submit(task, good, "after").result(timeout=200)
        assert again.passed and again.speedup, again.reason
        print(f"hang judged in {hang_s:.1f} s ({verdict.reason}); beside it {beside_s:.1f} s; "
              f"after: speedup {again.speedup:.2f}")
