"""`--executor ray`: a candidate whose actor died is judged again, at most twice, then gets a
judge error naming each loss (issue 33, item 2). The pool's attempts are driven by a stub; no
Ray is needed (raypool imports Ray only when a pool connects)."""

import threading
from pathlib import Path
from types import SimpleNamespace

from kernelwright.judge import FailureKind, JudgeOptions, Verdict
from kernelwright.scale import raypool

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "candidates" / "vector_add" / "good.py"


def pool_with(outcomes):
    """A RayJudgePool (without a cluster) whose attempts give `outcomes` in turn."""
    pool = object.__new__(raypool.RayJudgePool)
    pool.options, pool.backend = JudgeOptions(seeds=1), "cpu"
    pool._closing = threading.Event()
    attempts = iter(outcomes)

    def once(task, request, resolved):
        outcome = next(attempts)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    pool._judge_once = once
    return pool


TASK = SimpleNamespace(name="vector_add", ref="x", entry_point=SimpleNamespace(name="vector_add"))


def passed() -> Verdict:
    return Verdict(task="vector_add", candidate=str(GOOD), stage="passed", call=True, correct=True, reason="",
                   kind=FailureKind.PASSED)


def test_a_lost_actor_costs_an_attempt_not_the_verdict():
    pool = pool_with([raypool.ActorLost("actor 0 died"), passed()])
    verdict = pool._judge_file(TASK, GOOD, None)
    assert verdict.correct and verdict.stage == "passed"


def test_three_lost_actors_give_a_judge_error_naming_each():
    losses = [raypool.ActorLost(f"actor {i} died") for i in range(3)]
    pool = pool_with([*losses, passed()])
    verdict = pool._judge_file(TASK, GOOD, None)
    assert verdict.kind == "judge_error" and not verdict.correct
    assert "judged 3 times" in verdict.reason
    assert all(f"actor {i} died" in verdict.reason for i in range(3))
