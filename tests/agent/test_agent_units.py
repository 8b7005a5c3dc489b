"""The agent's pieces alone: attempts and the memory's views, the planner (debugging trap,
optimizer), answer parsing of hostile answers, the prompt templates, the run store, budgets."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import pytest

from kernelwright.agent.answers import MAX_CODE_CHARS, bounded, parse_code_answer
from kernelwright.agent.brief import brief_for, signatures_from_source
from kernelwright.agent.budget import Budget, Limits
from kernelwright.agent.calls import Reply
from kernelwright.agent.loop import AgentSettings, plan_next
from kernelwright.agent.memory import Attempt, Mode, TaskMemory
from kernelwright.agent.prompts import PromptError, PromptLibrary
from kernelwright.store import RunStore, StoreError
from kernelwright.tasks import resolve_task


def att(index, mode="generate", line=0, kind="runtime_error", speedup=None, parent=None, code="x = 1\n"):
    return Attempt("t", 0, index, mode, line, parent, code, kind=kind, speedup=speedup,
                   reason=f"reason {index}")


def memory(*attempts):
    return TaskMemory.of(attempts)


def test_attempts_are_immutable_and_roundtrip():
    a = att(0, kind="passed", speedup=1.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.kind = "x"  # type: ignore[misc]
    assert Attempt.from_dict(a.to_dict()) == a
    m = memory(a)
    assert m.add(att(1)).attempts[0] is a and len(m) == 1  # add returns a new memory
    with pytest.raises(ValueError):
        m.add(att(5))


def test_correct_kernels_in_ascending_order_fastest_last():
    m = memory(att(0, kind="passed", speedup=2.0), att(1, kind="passed", speedup=0.5), att(2),
               att(3, kind="passed", speedup=1.0), att(4, kind="passed"))
    assert [a.index for a in m.correct()] == [4, 1, 3, 0]
    assert m.best().index == 0


def test_plan_first_fix_optimize():
    s = AgentSettings(max_debug_attempts=2)
    assert plan_next(memory(), s).mode == "generate"
    failed = memory(att(0))
    assert plan_next(failed, s) == plan_next(failed, s)
    p = plan_next(failed, s)
    assert (p.mode, p.parent, p.line) == ("fix", 0, 0)
    ok = memory(att(0), att(1, "fix", parent=0, kind="passed", speedup=1.1))
    p = plan_next(ok, s)
    assert (p.mode, p.parent, p.line) == ("optimize", 1, 1)
    assert plan_next(ok, dataclasses.replace(s, optimizer=False)) is None


def test_debugging_trap_fires_after_max_failed_fixes():
    s = AgentSettings(max_debug_attempts=2)
    m = memory(att(0), att(1, "fix", parent=0))
    assert plan_next(m, s).mode == "fix"  # one failed fix: keep debugging
    m = m.add(att(2, "fix", parent=1))
    p = plan_next(m, s)
    assert (p.mode, p.line) == ("fresh", 1)  # two failed fixes: abandon the line
    # with a correct kernel in the pool the trap hands over to the optimizer instead
    m2 = memory(att(0, kind="passed", speedup=1.0), att(1, "optimize", line=1, parent=0),
                att(2, "fix", line=1, parent=1), att(3, "fix", line=1, parent=2))
    p = plan_next(m2, s)
    assert (p.mode, p.parent, p.line) == ("optimize", 0, 2)


def test_untimed_runs_stop_at_the_first_verified_kernel():
    # nothing timed (the CPU interpreter): the optimizer's gain cannot be measured, so no optimizer
    s = AgentSettings(max_debug_attempts=2)
    ok = memory(att(0), att(1, "fix", parent=0, kind="passed"))
    assert plan_next(ok, s, timed=False) is None and plan_next(ok, s).mode == "optimize"
    assert plan_next(memory(att(0)), s, timed=False).mode == "fix"  # failing: still debugged
    trap = memory(att(0, kind="passed"), att(1, "fix", parent=0), att(2, "fix", parent=1))
    assert plan_next(trap, s, timed=False).mode != "optimize"


def test_a_failing_given_kernel_ends_the_run_unless_fix_start():
    given = memory(att(0, "given", kind="missing_entry_point", code=""))
    assert plan_next(given, AgentSettings()) is None  # nothing is asked of the model
    p = plan_next(given, AgentSettings(fix_start=True))
    assert (p.mode, p.parent) == ("fix", 0)
    passed = memory(att(0, "given", kind="passed", speedup=1.0))
    assert plan_next(passed, AgentSettings()).mode == "optimize"


def test_codeless_answers_count_as_failed_fixes_and_first_attempts_retry():
    s = AgentSettings(max_debug_attempts=3)
    m = memory(att(0, code=None, kind="no_code"))
    assert plan_next(m, s).mode == "generate"  # nothing to fix yet: write it again
    m = memory(att(0), att(1, "fix", parent=0, code=None, kind="no_code"))
    p = plan_next(m, s)
    assert (p.mode, p.parent) == ("fix", 0)  # fix the last attempt that had code
    assert m.failed_fixes() == 1


@pytest.mark.parametrize("answer, why", [
    ("", "empty"), ("   \n", "empty"), ("I cannot help with that.", "no code"),
    ("```python\n" + "x = 1\n" * (MAX_CODE_CHARS // 6 + 10) + "```", "limit"),
])
def test_bad_answers_are_reasons_not_exceptions(answer, why):
    parsed = parse_code_answer(answer, "softmax")
    assert parsed.code is None and why in parsed.failure


def test_answer_strategy_and_code():
    text = "## Strategy\nOne row per program.\n\n```python\ndef softmax(x):\n    return x\n```\n"
    parsed = parse_code_answer(text, "softmax")
    assert parsed.strategy == "One row per program." and parsed.code.startswith("def softmax")
    js = '{"thought": "tile it", "code": "def softmax(x):\\n    return x"}'
    parsed = parse_code_answer(js, "softmax")
    assert parsed.strategy == "tile it" and "def softmax" in parsed.code
    assert len(bounded("a" * 10_000, 1000)) < 1100


def test_interface_from_golden_source():
    src = "import torch\ndef add_value(x: torch.Tensor, value, BLOCK=128) -> torch.Tensor:\n    pass\n" \
          "class Model(torch.nn.Module):\n    def __init__(self, d):\n        pass\n    def forward(self, x):\n        pass\n"
    found = signatures_from_source(src, ("add_value", "Model"))
    assert found["add_value"] == "def add_value(x: torch.Tensor, value, BLOCK=128) -> torch.Tensor"
    assert found["Model"].startswith("class Model(torch.nn.Module): def __init__(self, d); def forward(self, x)")


def test_brief_never_shows_hidden_cases():
    task = resolve_task("softmax")
    brief = brief_for(task)
    assert brief.interface == (task.entry_point.signature,)
    shown = " ".join(brief.visible_cases + brief.perf_cases)
    for case in task.hidden_cases:
        if case not in task.visible_cases and case not in task.perf_cases:
            assert case.label not in shown


def test_prompt_templates_render_and_override(tmp_path):
    lib = PromptLibrary()
    base = {"task": brief_for(resolve_task("vector_add")).as_context(), "backend_name": "NVIDIA",
            "knowledge": "", "example": None}
    text = lib.render("generate", **base, code_to_optimize="", abandoned=["tiles of 7 (failed 3 times)"])
    assert "vector_add" in text and "tiles of 7" in text and "different strategy" in text
    (tmp_path / "generate.j2").write_text("custom {{ task.name }}")
    assert PromptLibrary(tmp_path).render("generate", **base, code_to_optimize="", abandoned=[]) == "custom vector_add\n"
    (tmp_path / "reflect.j2").write_text("{{ nonexistent.field }}")
    with pytest.raises(PromptError):
        PromptLibrary(tmp_path).render("reflect", **base)
    with pytest.raises(PromptError):
        PromptLibrary(tmp_path / "missing")


def test_store_is_append_only_and_reopens(tmp_path):
    store = RunStore(tmp_path / "run", decode=Attempt.from_dict)
    store.add_attempt(att(0))
    with pytest.raises(sqlite3.IntegrityError):
        store.add_attempt(att(0))  # the same attempt twice
    with pytest.raises(sqlite3.DatabaseError, match="immutable"):
        store._db.execute("UPDATE attempts SET kind = 'passed'")
    store.add_call("t", 0, 0, Reply("generate", [{"role": "user", "content": "hi"}], "answer", "m", 10, 5, 0.25))
    store.add_call("t", 0, 1, Reply("fix", [], "", "m", 0, 0, 0.0, cache_hit=True))
    store.end_task_run("t", 0, "done", 0)
    store.close()
    again = RunStore(tmp_path / "run", create=False, decode=Attempt.from_dict)
    records = RunStore(tmp_path / "run", create=False).attempts("t", 0)  # without a decoder: plain records
    assert isinstance(records[0], dict) and Attempt.from_dict(records[0]) == att(0)
    assert again.attempts("t", 0) == [att(0)]
    assert again.spend("t") == (0.25, 15) and again.ended()[("t", 0)]["reason"] == "done"
    with pytest.raises(StoreError):
        RunStore(tmp_path / "nothing", create=False)


def test_modes_are_stored_as_the_strings_they_always_were(tmp_path):
    assert [m.value for m in Mode] == ["given", "generate", "fresh", "fix", "optimize", "tune", "crossover"]
    a = att(0, "fix")   # a plain string is made a Mode
    assert a.mode is Mode.FIX and a.mode == "fix" and f"{a.mode}" == str(a.mode) == "fix"
    assert json.dumps(a.to_dict()) == json.dumps({**a.to_dict(), "mode": "fix"})
    assert not Mode.GIVEN.by_llm and not Mode.TUNE.by_llm and Mode.FRESH.by_llm
    store = RunStore(tmp_path / "run", decode=Attempt.from_dict)
    store.add_attempt(a)
    column, record = store._db.execute("SELECT mode, record FROM attempts").fetchone()
    assert (column, json.loads(record)["mode"]) == ("fix", "fix")
    assert type(column) is str
    back = store.attempts("t", 0)[0]
    assert back == a and back.mode is Mode.FIX
    # a record as every earlier store holds it (the mode a plain string) reads back the same
    old = {**a.to_dict(), "mode": "optimize"}
    assert Attempt.from_dict(json.loads(json.dumps(old))).mode is Mode.OPTIMIZE
    with pytest.raises(ValueError):
        att(1, "sideways")


def test_budget_limits(tmp_path):
    store = RunStore(tmp_path / "run")
    budget = Budget(store, Limits(max_cost=1.0), Limits(max_tokens=100))
    budget.start_task("t")
    assert budget.exhausted("t") is None
    store.add_call("t", 0, 0, Reply("generate", [], "a", "m", 80, 30, 0.1))
    assert "token budget" in budget.exhausted("t") and budget.exhausted("u") is None
    store.add_call("u", 0, 0, Reply("generate", [], "a", "m", 1, 1, 2.0))
    assert "cost budget" in budget.exhausted("u")
    assert "time limit" in Budget(store, Limits(time_limit=1e-9)).exhausted("t")
    with pytest.raises(ValueError):
        Limits(max_cost=0)
