"""Hangs are judged fast, slow compiles are not cut off (Triton interpreter, real cascade).

The judge's default limits, except a short `run_timeout` (the floor of a candidate's running
limit: 30 s by default) to keep this quick: a hang must time out after *that*, with the stage's
old cap (call_timeout 300 s, case_timeout 60 s) untouched. How long a verdict takes with the
defaults is measured by benchmarks/hang_detection.py, not asserted here."""

import re

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import resolve_task

from .conftest import CANDIDATES, candidate_expectations

HANGS = candidate_expectations("hangs", gpu=False)
RUN_S = 4.0


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    # control: the same 8 s as slow_compile_finishes.py, spent running instead of compiling
    control = tmp_path_factory.mktemp("control") / "slow_host_code.py"
    control.write_text((CANDIDATES / "hangs" / "slow_compile_finishes.py").read_text()
                       .replace("        _slow_compile()", "        time.sleep(COMPILE_S)"))
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=2, seed=5, perf=False, run_timeout=RUN_S)
    assert options.call_timeout >= 300 and options.load_timeout >= 120  # the caps stay long
    jobs = [(task, path) for path, _, _ in HANGS] + [(task, control)]
    with JudgePool("cpu", workers=2, options=options) as pool:
        results = pool.judge_many(jobs)
    return {path.name: v for (_, path), v in zip(jobs, results)}


@pytest.mark.parametrize("path,stage,reason", HANGS, ids=[p.stem for p, _, _ in HANGS])
def test_hang_candidate_verdict(verdicts, path, stage, reason):
    verdict = verdicts[path.name]
    assert verdict.stage == stage, f"{path.name}: {verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert reason in verdict.reason, verdict.reason
    if stage != "passed":
        assert verdict.kind == "timeout", verdict.kind
        # the short running limit ran out, not the stage's cap: run_timeout, or 50x the
        # reference's own time on the item where that is longer (a loaded CI machine's
        # interpreter can take 0.3 s for vector_add's first item: a 14 s limit)
        found = re.search(r"timed out after ([0-9.]+) s running", verdict.reason)
        assert found, verdict.reason
        assert RUN_S <= float(found.group(1)) < 60, verdict.reason
        assert "its running limit (" in verdict.reason and "run_timeout" in verdict.reason
        # one sentence: what it was running is said once, first; the limit's number once
        assert verdict.reason.count(" s running") == 1 and " while " not in verdict.reason, verdict.reason


def test_import_hang_is_a_call_stage_timeout_at_import(verdicts):
    verdict = verdicts["import_loop.py"]
    assert (verdict.stage, verdict.kind, verdict.call) == ("call", "timeout", False)
    assert re.search(r'import_loop\.py", line 1[56] in <module>', verdict.log_tail), verdict.log_tail


def test_later_call_hang_keeps_the_first_call(verdicts):
    verdict = verdicts["host_loop_later_call.py"]
    assert verdict.call and not verdict.correct
    assert "at most 60 s" in verdict.reason  # case_timeout caps a later call


def test_time_spent_running_is_not_excused_like_compiling(verdicts):
    verdict = verdicts["slow_host_code.py"]
    assert (verdict.stage, verdict.kind) == ("call", "timeout"), verdict.reason
    assert f"timed out after {RUN_S:g} s running" in verdict.reason
