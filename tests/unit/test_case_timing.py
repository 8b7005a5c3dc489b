"""An attempt keeps each side's spread over the timed blocks (issue 31: the report's latency per
shape has intervals for both sides), and records stored before that field read back."""

from __future__ import annotations

from kernelwright.agent.memory import Attempt
from kernelwright.judge.common.verdict import CaseResult, FailureKind, Verdict


def _verdict() -> Verdict:
    case = CaseResult(kind="performance", label="n=4096", params={}, ok=True, ref_ms=2.0, cand_ms=1.0,
                      speedup=2.0, ci95=(1.9, 2.1),
                      timing={"ref_block_ms": [2.1, 1.95, 2.0], "cand_block_ms": [1.0, 1.05, 0.98]})
    return Verdict(task="t", candidate="c.py", stage="passed", call=True, correct=True, reason="passed",
                   speedup=2.0, cases=[case], kind=FailureKind.PASSED)


def test_the_attempt_keeps_both_sides_block_ranges_and_round_trips():
    attempt = Attempt(task="t", run=0, index=0, mode="generate", line=0, parent=None, code="x").with_verdict(_verdict(), "")
    (t,) = attempt.timings
    assert t.ref_range == (1.95, 2.1) and t.cand_range == (0.98, 1.05)
    back = Attempt.from_dict(attempt.to_dict())
    assert back.timings == attempt.timings


def test_a_record_from_before_the_ranges_reads_back_without_them():
    data = Attempt(task="t", run=0, index=0, mode="generate", line=0, parent=None, code="x").with_verdict(_verdict(), "").to_dict()
    for t in data["timings"]:
        t.pop("ref_range"), t.pop("cand_range")
    (t,) = Attempt.from_dict(data).timings
    assert t.ref_range is None and t.cand_range is None and t.ci95 == (1.9, 2.1)
