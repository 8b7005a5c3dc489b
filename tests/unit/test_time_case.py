"""The worker's timing of one perf case, driven in-process by scripted children (no GPU): the
checks that follow the timed blocks (roofline, host-synchronisation flag) apply to every case."""

import dataclasses

import pytest

from kernelwright.judge.hardware import spec_for
from kernelwright.judge.pool import JudgeOptions
from kernelwright.judge.verdict import Verdict
from kernelwright.judge.worker import CaseFailed, Worker
from kernelwright.tasks import resolve_task


class ScriptedChild:
    """Answers the worker's timing requests with a fixed per-call time."""

    def __init__(self, call_ms: float, host_sync: bool = False) -> None:
        self.call_ms, self.host_sync = call_ms, host_sync

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def request(self, msg: dict, timeout: float, doing: str) -> dict:
        if msg["op"] == "perf_prepare":
            return {"ok": True, "est_ms": self.call_ms, "flush_ms": 0.01, "pad_ms": 0.02, "gap_ms": 0.01,
                    "warmup_launches": 3, "warmup_calls": 3, "sets": 3, "host_sync": self.host_sync}
        if msg["op"] == "time_block":
            return {"ok": True, "times_ms": [self.call_ms] * msg["n"], "launches": msg["n"]}
        return {"ok": True}


def time_one_case(ref_ms: float, cand_ms: float, host_sync: bool = False) -> Verdict:
    task = resolve_task("vector_add")
    worker = Worker("cuda")
    verdict = Verdict(task=task.name, candidate="c.py", stage="performance", call=True, correct=True,
                      reason="", seeds=[1])
    opts = dataclasses.asdict(JudgeOptions(perf_blocks=2))
    pi = len(task.perf_cases) - 1
    worker._time_case(task, ScriptedChild(ref_ms), ScriptedChild(cand_ms, host_sync), verdict, opts, pi,
                      {pi: 0.1}, 1 << 20, {"ref": 0, "cand": 0}, [], spec_for("NVIDIA H200"))
    return verdict


def test_a_time_below_the_roofline_fails_the_case():
    with pytest.raises(CaseFailed, match="faster than the hardware allows"):
        time_one_case(ref_ms=1.0, cand_ms=1e-4)


def test_a_plausible_time_passes_and_a_host_synchronising_call_is_flagged_once():
    verdict = time_one_case(ref_ms=1.0, cand_ms=1.0, host_sync=True)
    (case,) = verdict.cases
    assert case.ok and case.roofline_ms is not None and case.speedup == pytest.approx(1.0)
    assert [f for f in verdict.flags if f.startswith("host-synchronising calls (candidate")]
    assert not time_one_case(ref_ms=1.0, cand_ms=1.0).flags
