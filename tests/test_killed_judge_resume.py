"""A candidate whose judging kills the coordinator (the agent's or judge-suite's own process) is
never judged for ever by `--resume` / a rerun: judged once more (alone), then recorded as a
judge_error "judging this candidate killed the judge twice (...); not judged again". The
coordinator's death is a judge stub that os._exit()s while it judges the poisoned candidate, in a
subprocess run three times on the same run directory / results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest

from kernelwright.agent.judging import JudgeTurns, code_sha256, submit_recorded
from kernelwright.judge import Verdict
from kernelwright.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
TINY_ADD = ROOT / "tests" / "tasks" / "tiny_add.py"
KILLER = "# KILLS_THE_JUDGE"
DIED = 9  # the exit status of a stub that killed its process

AGENT = """
import os, sys, types
from concurrent.futures import Future
from kernelwright.agent.budget import Budget, Limits
from kernelwright.agent.loop import AgentSettings, RunContext
from kernelwright.agent.memory import Attempt
from kernelwright.agent.prompts import PromptLibrary
from kernelwright.agent.session import AgentSession
from kernelwright.judge import Verdict
from kernelwright.store import RunStore
from kernelwright.tasks import load_task_file

KILLER = "# KILLS_THE_JUDGE"


class LLM:  # the first kernel kills the judge; a fix does not
    def complete(self, messages, *, temperature=None, max_tokens=None, seed=None, sample_index=0, tags=None):
        fixing = "Your previous attempt" in messages[-1]["content"]
        code = "def vector_add(x, y):\\n    return x + y\\n" + ("" if fixing else KILLER + "\\n")
        return types.SimpleNamespace(text=f"## Strategy\\nadd\\n\\n```python\\n{code}```\\n", model="fake",
                                     usage=types.SimpleNamespace(input_tokens=1, output_tokens=1), cost_usd=0.0,
                                     cache_hit=False, finish_reason="stop", latency_s=0.0)


class Judge:
    def submit(self, task, code, candidate_id=None):
        if KILLER in code:
            os._exit(9)  # the coordinator dies while it judges this candidate
        future = Future()
        future.set_result(Verdict(task.name, candidate_id, "passed", True, True, "ok", kind="passed",
                                  candidate_id=candidate_id))
        return future


store = RunStore(sys.argv[1], decode=Attempt.from_dict)
settings = AgentSettings(iterations=3, optimizer=False, reflection=False, one_shot=False, knowledge=False)
ctx = RunContext(llm=LLM(), judge=Judge(), store=store, prompts=PromptLibrary(), settings=settings,
                 budget=Budget(store, Limits(), Limits()))
session = AgentSession(store, [load_task_file(sys.argv[2])], ctx)
session.run()
assert not session.errors, session.errors
"""


def run_script(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], check=False, capture_output=True,
                          text=True, timeout=300, env=env)


def test_agent_resume_judges_a_candidate_that_killed_the_judge_once_more_then_records_it(tmp_path):
    from kernelwright.agent.memory import Attempt

    run_dir = tmp_path / "run"
    killer_sha = code_sha256("def vector_add(x, y):\n    return x + y\n" + KILLER + "\n")
    for round_ in (1, 2):
        proc = run_script(AGENT, str(run_dir), str(TINY_ADD))
        assert proc.returncode == DIED, proc.stderr
        with RunStore(run_dir, create=False, decode=Attempt.from_dict) as store:
            assert store.attempts("tiny_add", 0) == []  # no verdict, so nothing stored for it
            assert len(store.judge_starts("tiny_add", 0, 0, killer_sha)) == round_
    proc = run_script(AGENT, str(run_dir), str(TINY_ADD))  # the second resume: not judged a third time
    assert proc.returncode == 0, proc.stderr
    with RunStore(run_dir, create=False, decode=Attempt.from_dict) as store:
        attempts = store.attempts("tiny_add", 0)
        assert len(store.judge_starts("tiny_add", 0, 0, killer_sha)) == 2
        ended = store.ended()
    first, fix = attempts
    assert (first.kind, first.stage) == ("judge_error", "judge_error")
    assert first.reason.startswith("judging this candidate killed the judge twice (its judging started at ")
    assert first.reason.endswith("); not judged again") and KILLER in (first.code or "")
    assert (fix.mode, fix.parent, fix.kind) == ("fix", 0, "passed")  # and the run goes on
    assert ended[("tiny_add", 0)]["reason"] == "correct (optimizer off)"


SUITE = """
import json, os, sys
from pathlib import Path
from kernelwright.judge import Verdict
from kernelwright.suites.runner import ResultStore, plan, run_suite
from kernelwright.tasks import list_builtin_tasks


class Pool:
    \"\"\"Takes every job up at once (as workers side by side would), then judges them in order;
    the poisoned one kills this process.\"\"\"
    def judge_many(self, jobs, on_verdict=None, options=None, on_start=None):
        for i in range(len(jobs)):
            on_start(i)
        verdicts = []
        for i, (task, path) in enumerate(jobs):
            if "KILLS_THE_JUDGE" in Path(path).read_text():
                os._exit(9)
            verdicts.append(Verdict(task.name, str(path), "passed", True, True, "ok", kind="passed"))
            on_verdict(i, verdicts[-1])
        return verdicts


out, candidates = Path(sys.argv[1]), sys.argv[2]
store = ResultStore(out)
work = plan([t for t in list_builtin_tasks() if t.name in ("vector_add", "silu", "softmax")], candidates, store, "cpu")
print(json.dumps({"to_judge": [t.name for t, _ in work.to_judge], "alone": sorted(work.alone)}), flush=True)
run_suite(work, store, Pool())
"""


@pytest.mark.slow
def test_suite_rerun_judges_a_task_that_killed_the_judge_once_more_then_records_it(tmp_path):
    from kernelwright.suites.runner import ResultStore

    candidates = tmp_path / "candidates"
    candidates.mkdir()
    for name in ("vector_add", "silu", "softmax"):
        (candidates / f"{name}.py").write_text(f"# {name}\n" + (KILLER + "\n" if name == "silu" else ""))
    out = tmp_path / "results.jsonl"
    first = run_script(SUITE, str(out), str(candidates))
    assert first.returncode == DIED, first.stderr
    plans = [json.loads(first.stdout.splitlines()[0])]
    assert plans[0]["alone"] == []
    # all three were taken up when the run died: each has a judging without a verdict
    assert set(ResultStore(out).starts) == {"vector_add", "silu", "softmax"} - set(ResultStore(out).records)
    second = run_script(SUITE, str(out), str(candidates))
    assert second.returncode == DIED, second.stderr
    plans.append(json.loads(second.stdout.splitlines()[0]))
    assert "silu" in plans[1]["alone"]  # judged alone, before the others
    third = run_script(SUITE, str(out), str(candidates))
    assert third.returncode == 0, third.stderr
    plans.append(json.loads(third.stdout.splitlines()[0]))
    assert "silu" not in plans[2]["to_judge"]  # not judged a third time
    store = ResultStore(out)
    assert store.starts == {}
    silu = store.records["silu"]
    assert silu.status == "judge_error" and silu.verdict["kind"] == "judge_error"
    assert silu.reason.startswith("judging this candidate killed the judge twice (") and "not judged again" in silu.reason
    # the tasks that were only judged beside it got their real verdicts
    assert store.records["vector_add"].status == store.records["softmax"].status == "judged"
    # the results file keeps one record a line; what started is in the side file
    assert all("status" in json.loads(line) for line in out.read_text().splitlines())
    # a fourth run judges nothing
    fourth = run_script(SUITE, str(out), str(candidates))
    assert fourth.returncode == 0 and json.loads(fourth.stdout.splitlines()[0])["to_judge"] == []


def test_a_removed_results_file_takes_its_judging_file_with_it(tmp_path):
    from kernelwright.suites.runner import ResultStore

    out = tmp_path / "r.jsonl"
    store = ResultStore(out)
    store.add_start("silu", "abc", "key")
    assert out.exists() and ResultStore(out).unfinished_starts("silu", "abc", "key")
    out.unlink()  # --fresh
    assert ResultStore(out).starts == {} and not store.judging_path.exists()


# -- the pieces -------------------------------------------------------------------------------------
class CountingJudge:
    def __init__(self) -> None:
        self.submitted: list[str] = []

    def submit(self, task, code, candidate_id=None):
        self.submitted.append(code)
        future: Future = Future()
        future.set_result(Verdict(task.name, candidate_id, "passed", True, True, "ok", kind="passed"))
        return future


class FakeTask:
    name = "t"


def test_a_candidate_sent_twice_without_a_verdict_is_not_sent_again(tmp_path):
    store, judge, turns = RunStore(tmp_path / "run"), CountingJudge(), JudgeTurns()
    for _ in range(2):
        store.add_judge_start("t", 0, 3, code_sha256("x = 1\n"))
    verdict = submit_recorded(judge, store, turns, FakeTask(), 0, 3, "x = 1\n", "cid").result()
    assert judge.submitted == [] and (verdict.stage, verdict.kind, verdict.candidate_id) == ("judge_error",
                                                                                             "judge_error", "cid")
    assert "killed the judge twice" in verdict.reason
    # another candidate of the same attempt (other code), or of another attempt, is judged
    assert submit_recorded(judge, store, turns, FakeTask(), 0, 3, "x = 2\n", "c2").result().passed
    assert submit_recorded(judge, store, turns, FakeTask(), 0, 4, "x = 1\n", "c3").result().passed
    assert len(judge.submitted) == 2 and len(store.judge_starts("t", 0, 4, code_sha256("x = 1\n"))) == 1


def test_a_suspect_is_judged_alone():
    turns, events = JudgeTurns(), []
    turns.take(alone=False)  # a candidate being judged

    def suspect():
        turns.take(alone=True)
        events.append("alone")

    def later():
        turns.take(alone=False)
        events.append("later")

    a = threading.Thread(target=suspect)
    a.start()
    time.sleep(0.2)
    b = threading.Thread(target=later)  # asks after the suspect: waits for it
    b.start()
    time.sleep(0.2)
    assert events == []
    turns.give(alone=False)
    a.join(5)
    time.sleep(0.2)
    assert events == ["alone"]
    turns.give(alone=True)
    b.join(5)
    assert events == ["alone", "later"]


class ClosedJudge:
    """A judge closed before it could decide (Ctrl-C): the future raises."""

    def submit(self, task, code, candidate_id=None):
        from kernelwright.judge import PoolClosed

        future: Future = Future()
        future.set_exception(PoolClosed("closed"))
        return future


def test_an_interrupted_judging_does_not_count_as_one_that_killed_the_run(tmp_path):
    """Ctrl-C twice on the same candidate must not make it 'killed the judge twice'."""
    store, turns = RunStore(tmp_path / "run"), JudgeTurns()
    for _ in range(3):
        future = submit_recorded(ClosedJudge(), store, turns, FakeTask(), 0, 0, "x = 1\n", "cid")
        assert future.exception() is not None
    assert store.judge_starts("t", 0, 0, code_sha256("x = 1\n")) == []
    assert submit_recorded(CountingJudge(), store, turns, FakeTask(), 0, 0, "x = 1\n", "cid").result().passed


def test_an_interrupted_suite_run_forgets_what_it_was_judging(tmp_path):
    from kernelwright.suites.runner import ResultStore, plan, run_suite
    from kernelwright.tasks import list_builtin_tasks

    class InterruptedPool:
        def judge_many(self, jobs, on_verdict=None, options=None, on_start=None):
            on_start(0)
            raise KeyboardInterrupt

    candidates = tmp_path / "candidates"
    candidates.mkdir()
    (candidates / "silu.py").write_text("# silu\n")
    out = tmp_path / "r.jsonl"
    tasks = [t for t in list_builtin_tasks() if t.name == "silu"]
    for _ in range(3):
        store = ResultStore(out)
        work = plan(tasks, str(candidates), store, "cpu")
        assert [t.name for t, _ in work.to_judge] == ["silu"] and work.alone == set()
        try:
            run_suite(work, store, InterruptedPool())
        except KeyboardInterrupt:
            pass
        assert ResultStore(out).starts == {}
