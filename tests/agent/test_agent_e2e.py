"""The agent end to end: the real LLM client talks HTTP to the scripted server, candidates are
judged by the real judge on the CPU interpreter, and everything lands in the run store.

Each test reads the prompts that reached the server: that is what the model was told."""

from __future__ import annotations

import json

import pytest

from .agent_support import (BROKEN, FRESH_MARK, GOOD, GOOD_SMALL_BLOCKS, OPTIMIZE_MARK, REFLECT_MARK, answer,
                           role_of, run_agent, spec)
from kernelwright.judge import JudgeOptions
from kernelwright.llm.testing import ScriptedServer

pytestmark = pytest.mark.slow

QUICK_PERF = JudgeOptions(seeds=1, perf=True, perf_blocks=3, block_ms=3, warmup_ms=3, min_calls_per_block=2,
                          max_perf_cases=1)


def prompts_by_role(server):
    return [(role_of(r.prompt), r.prompt) for r in server.requests]


def test_fail_reflect_fix_optimize_best(tmp_path):
    """A failing first kernel → the reflector sees the real error → the fix passes → the
    optimizer sees the correct kernels in ascending order of measured speed → best written."""
    script = {"rules": [
        {"match": REFLECT_MARK, "content": "The launch passes UNDEFINED_BLOCK_SIZE, which the kernel "
                                           "does not take: remove it."},
        {"match": "Your previous attempt", **answer(GOOD, "Removed the bad argument.")},
        {"match": OPTIMIZE_MARK, **answer(GOOD_SMALL_BLOCKS, "Smaller blocks.")},
    ], "default": answer(BROKEN)}
    with ScriptedServer(script) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=4), judge_options=QUICK_PERF)
    roles = [role for role, _ in prompts_by_role(server)]
    assert roles == ["generate", "reflect", "fix", "optimize", "optimize"]
    attempts = store.attempts("tiny_add", 0)
    assert [(a.mode, a.passed) for a in attempts] == [("generate", False), ("fix", True), ("optimize", True),
                                                      ("optimize", True)]
    first = attempts[0]
    reflect_prompt = server.requests[1].prompt
    # the real error trace, from the candidate's own code
    assert "UNDEFINED_BLOCK_SIZE" in first.feedback and first.feedback.strip() in reflect_prompt
    assert first.kind not in ("passed", "no_code") and "UNDEFINED_BLOCK_SIZE" in reflect_prompt
    fix_prompt = server.requests[2].prompt
    assert "remove it" in fix_prompt and BROKEN.strip() in fix_prompt
    # the second optimizer prompt holds both correct kernels, slower first
    second_opt = server.requests[4].prompt
    correct = sorted([a for a in attempts[:3] if a.passed], key=lambda a: a.speedup)
    assert all(a.speedup is not None for a in correct)
    positions = [second_opt.index(f"(attempt {a.index})") for a in correct]
    assert positions == sorted(positions)
    assert "reference ms" in second_opt and "95% CI" in second_opt
    best = results[0].best
    assert best is not None and best["speedup"] == max(a.speedup for a in attempts if a.passed)
    best_file = store.run_dir / "best" / "tiny_add.py"
    assert best_file.read_text() == attempts[best["index"]].code
    rows = [json.loads(line) for line in (store.run_dir / "results.jsonl").read_text().splitlines()]
    assert rows[0]["task"] == "tiny_add" and rows[0]["best"]["index"] == best["index"]
    calls = store.calls("tiny_add")
    assert [c["role"] for c in calls] == ["generate", "reflect", "fix", "optimize", "optimize"]
    assert all(c["input_tokens"] == 100 for c in calls if c["role"] != "reflect")


def test_debugging_trap_asks_for_a_new_strategy(tmp_path):
    script = {"rules": [
        {"match": FRESH_MARK, **answer(GOOD, "A new approach.")},
        {"match": REFLECT_MARK, "content": "Not sure."},
    ], "default": answer(BROKEN, "Keep the extra argument.")}
    with ScriptedServer(script) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=5, max_debug_attempts=2,
                                                                  optimizer=False))
    roles = [role for role, _ in prompts_by_role(server)]
    assert roles == ["generate", "reflect", "fix", "reflect", "fix", "fresh"]
    fresh_prompt = server.requests[-1].prompt
    assert "Keep the extra argument" in fresh_prompt  # the abandoned approach, named
    attempts = store.attempts("tiny_add", 0)
    assert [a.mode for a in attempts] == ["generate", "fix", "fix", "fresh"]
    assert [a.line for a in attempts] == [0, 0, 0, 1] and attempts[-1].passed
    assert store.ended()[("tiny_add", 0)]["reason"] == "correct (optimizer off)"


def test_runs_give_pass_at_k(tmp_path):
    script = {"sequence": [answer(GOOD), answer(BROKEN), answer(GOOD), answer(BROKEN)]}
    with ScriptedServer(script) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=1, runs=4), workers=2)
    r = results[0]
    assert r.runs == 4 and r.passed_runs == 2
    assert r.pass_at_k[1] == pytest.approx(0.5) and r.pass_at_k[2] == pytest.approx(5 / 6)
    assert r.pass_at_k[4] == 1.0
    seeds = sorted(req.body.get("seed") for req in server.requests)
    assert seeds == [7, 8, 9, 10]  # distinct seeds per run
    assert all(req.body.get("temperature") == 1.0 for req in server.requests)
    summary = json.loads((store.run_dir / "summary.json").read_text())
    assert summary["pass_at_k"]["2"] == pytest.approx(5 / 6)


def test_bad_answers_are_recorded_attempts(tmp_path):
    script = {"sequence": [
        {"content": ""},
        {"content": "I'd rather not write code today."},
        {"content": "```python\n" + "x = 1\n" * 30_000 + "```"},
        {"content": "```python\nimport os\nos.system('echo pwned')\n```"},
    ], "default": answer(GOOD)}
    with ScriptedServer(script) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=5, optimizer=False,
                                                                  reflection=False))
    attempts = store.attempts("tiny_add", 0)
    kinds = [a.kind for a in attempts]
    assert kinds[:3] == ["no_code", "no_code", "no_code"]
    assert "empty" in attempts[0].reason and "limit" in attempts[2].reason
    assert kinds[3] not in ("passed", "no_code")  # hostile code is judged, and fails
    assert attempts[-1].passed and results[0].best["index"] == len(attempts) - 1


def test_candidate_sees_no_api_key(tmp_path, monkeypatch):
    """The candidate looks at its environment and its parents'; what it saw comes back in the
    reason it fails with (a confined candidate can write nothing the test could read)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kernelwright-test-secret")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-kernelwright-test-secret")
    spy = GOOD.replace("def vector_add(x, y):", """def vector_add(x, y):
    import os
    seen = [repr(dict(os.environ))]
    for pid in ("self", str(os.getppid())):
        try:
            seen.append(open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace"))
        except OSError as exc:
            seen.append(repr(exc))
    text = "\\n".join(seen)
    raise RuntimeError(f"spy: environment read={'PATH' in text} secret={'test-secret' in text}")""")
    with ScriptedServer({"default": answer(spy)}) as server:
        store, _ = run_agent(tmp_path / "run", server, spec(iterations=1))
    reasons = " ".join(a.reason for a in store.attempts("tiny_add", 0))
    assert "spy: environment read=True" in reasons  # it did run and read its environment
    assert "secret=False" in reasons and "secret=True" not in reasons


def test_resume_continues_without_repeating_calls(tmp_path):
    """The agent stopped after two attempts (as a SIGKILL would leave it: the store holds what
    was committed) continues from there; the cached calls are not sent again."""
    script = {"rules": [
        {"match": REFLECT_MARK, "content": "Remove the extra argument."},
        {"match": "Your previous attempt", **answer(GOOD)},
        {"match": OPTIMIZE_MARK, **answer(GOOD_SMALL_BLOCKS)},
    ], "default": answer(BROKEN)}
    with ScriptedServer(script) as server:
        full, _ = run_agent(tmp_path / "full", server, spec(iterations=3))
        expected = [(a.mode, a.kind) for a in full.attempts("tiny_add", 0)]
    with ScriptedServer(script) as server:
        partial, _ = run_agent(tmp_path / "part", server, spec(iterations=1))
        first_requests = len(server.requests)
    # the same run directory, resumed with more iterations: as if it had been killed after one
    from kernelwright.store import RunStore

    store = RunStore(tmp_path / "part")
    stored = store.get_meta("spec")
    stored["settings"]["iterations"] = 3
    store.put_meta("spec", stored)
    store._db.execute("DELETE FROM task_runs_ended")  # a killed run never recorded its end
    store.close()
    with ScriptedServer(script) as server:
        resumed, _ = run_agent(tmp_path / "part", server, resume=True)
        roles = [role_of(r.prompt) for r in server.requests]
    assert first_requests == 1
    assert [(a.mode, a.kind) for a in resumed.attempts("tiny_add", 0)] == expected
    # the first generate call was not sent again (untimed: the run ends at the verified fix)
    assert roles == ["reflect", "fix"]


def test_untimed_run_stops_at_the_first_verified_kernel(tmp_path):
    """Nothing timed (the CPU interpreter, by default): no optimizer call is paid for, since its
    gain could not be measured; the stored reason says why the run stopped."""
    with ScriptedServer({"default": answer(GOOD)}) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=3))
    assert len(server.requests) == 1
    reason = store.ended()[("tiny_add", 0)]["reason"]
    assert "speed not measured (CPU interpreter)" in reason and "first verified kernel" in reason
    assert results[0].ended == {"0": reason}
    summary = json.loads((store.run_dir / "summary.json").read_text())
    assert summary["ended"] == {reason: 1}


def test_budget_stops_new_calls_and_keeps_the_best_verified_kernel(tmp_path):
    from kernelwright.agent.budget import Limits

    # every answer costs 150 tokens; the run may spend 400: the third call is the last one started
    script = {"sequence": [answer(GOOD)], "default": answer(GOOD_SMALL_BLOCKS)}
    with ScriptedServer(script) as server:
        store, results = run_agent(tmp_path / "run", server, spec(iterations=10, run_limits=Limits(max_tokens=400)),
                                   judge_options=QUICK_PERF)  # timed: the optimizer goes on after a pass
    assert len(server.requests) == 3
    assert "token budget" in store.ended()[("tiny_add", 0)]["reason"]
    assert results[0].best is not None and (store.run_dir / "best" / "tiny_add.py").is_file()
