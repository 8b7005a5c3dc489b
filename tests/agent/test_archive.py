"""The evolutionary archive (agent/archive.py) on hand-made attempts: only passed kernels enter,
cells from the code, the migration schedule, seeded selection, and the prompts it builds."""

from __future__ import annotations

import pytest

from kernelwright.agent.archive import Archive, cell_of, choose, epoch_of_next, iteration_epochs, rng_for
from kernelwright.agent.memory import Attempt, Mode

FLAT = "@triton.jit\ndef k(x, BLOCK: tl.constexpr):\n    tl.store(x, 1)\n\n\ndef f(x):\n    k[(1,)](x, BLOCK={b}, num_warps={w})\n"
LOOP = ("@triton.jit\ndef k(x, BLOCK_SIZE: tl.constexpr):\n    for i in range(0, 8, BLOCK_SIZE):\n        pass\n\n\n"
        "def f(x):\n    k[(1,)](x, BLOCK_SIZE={b})\n")
DOT = "@triton.jit\ndef k(a, b):\n    acc = tl.dot(a, b)\n\n\ndef f(x):\n    k[(1,)](x, BLOCK_M=64, num_warps=8)\n"
AUTO = "@triton.autotune(configs=[triton.Config({'BLOCK': 4096}, num_warps=4)], key=['n'])\n@triton.jit\ndef k(x):\n    pass\n"


def att(run: int, index: int, code: str = "", kind: str = "passed", speedup: float | None = 1.0,
        mode: str = "optimize") -> Attempt:
    return Attempt("t", run, index, mode if index else "generate", 0, None, code or FLAT.format(b=1024, w=4),
                   kind=kind, speedup=speedup)


def test_cells_from_the_code():
    assert cell_of(FLAT.format(b=1024, w=4)) == ("flat", "b<=1024", "w<=4")
    assert cell_of(FLAT.format(b=64, w=8)) == ("flat", "b<=128", "w>4")
    assert cell_of(LOOP.format(b=2048)) == ("loop", "b>1024", "w<=4")
    assert cell_of(DOT) == ("dot", "b<=128", "w>4")
    assert cell_of(AUTO) == ("autotune", "b>1024", "w<=4")
    # a loop in the wrapper, not in the kernel, is not the kernel's approach
    assert cell_of(FLAT.format(b=256, w=4) + "    for i in range(3):\n        pass\n")[0] == "flat"


def test_only_passed_attempts_enter():
    attempts = [att(0, 0), att(0, 1, kind="wrong_values", speedup=None), att(0, 2, kind="no_code"),
                att(1, 0, kind="compile_error"), att(1, 1, speedup=2.0)]
    archive = Archive.of(attempts)
    assert [e.key for e in archive.entries] == ["r0a0", "r1a1"]


def test_epochs_count_the_models_iterations():
    attempts = [Attempt("t", 0, 0, "given", 0, None, "x", kind="passed"), *(att(0, i) for i in range(1, 6)),
                Attempt("t", 0, 6, "tune", 0, 5, "x", kind="passed")]
    epochs = iteration_epochs(attempts, 2)
    assert [epochs[i] for i in range(7)] == [-1, 0, 0, 1, 1, 2, 3]
    assert epoch_of_next(attempts[:3], 2) == 1 and epoch_of_next(attempts[:2], 2) == 0


def test_migration_on_schedule():
    # run 1's kernels: a slow one in epoch 0, a fast one in epoch 1 (iterations 3-4)
    fast, slow = FLAT.format(b=256, w=8), FLAT.format(b=512, w=4)
    attempts = [att(0, 0), att(0, 1), att(1, 0, slow, speedup=1.1), att(1, 1, kind="wrong_values"),
                att(1, 2, fast, speedup=3.0)]
    archive = Archive.of(attempts, migrate_every=2)
    assert archive.migrants(0, 0) == []                              # epoch 0: nothing received yet
    assert [e.key for e in archive.migrants(0, 1)] == ["r1a0"]       # boundary 1: run 1's best of epoch 0
    assert [e.key for e in archive.migrants(0, 2)] == ["r1a0", "r1a2"]  # boundary 2: its best of epochs 0-1
    view = archive.view(0, 1)
    assert {e.key for e in view.entries} == {"r0a0", "r0a1", "r1a0"}  # own kernels at once, others by migration


def test_selection_is_seeded_and_reproducible():
    codes = [FLAT.format(b=b, w=w) for b, w in ((64, 4), (256, 8), (2048, 4), (1024, 8))]
    attempts = [att(r, i, codes[(r + i) % 4], speedup=1.0 + r * 0.1 + i * 0.3) for r in range(2) for i in range(3)]
    view = Archive.of(attempts).view(0, 5)
    draws = [choose(view, rng_for(7, "t", 0, i)) for i in range(20)]
    again = [choose(view, rng_for(7, "t", 0, i)) for i in range(20)]
    assert [d.origin() for d in draws] == [d.origin() for d in again]
    other = [choose(view, rng_for(8, "t", 0, i)).origin() for i in range(20)]
    assert other != [d.origin() for d in draws]
    best = max(view.entries, key=lambda e: e.speed)
    parents = {d.parent.key for d in draws}
    assert best.key in parents and len(parents) > 1  # the best cell, and less-explored ones
    assert {d.mode for d in draws} == {Mode.OPTIMIZE, Mode.CROSSOVER}
    for d in draws:
        assert 1 <= len(d.inspirations) <= 3
        assert all(e.key != d.parent.key for e in d.inspirations)
        other_cells = [e for e in d.inspirations if e.cell != d.parent.cell]
        assert other_cells or len({e.cell for e in view.entries}) == 1


def test_the_prompts_show_parent_inspirations_and_speeds():
    from kernelwright.agent import optimizer
    from kernelwright.agent.brief import TaskBrief
    from kernelwright.agent.prompts import PromptLibrary

    attempts = [att(0, 0, FLAT.format(b=64, w=4), speedup=1.25), att(1, 0, LOOP.format(b=2048), speedup=1.75)]
    view = Archive.of(attempts).view(0, 1)
    brief = TaskBrief("t", "Add two vectors.", ("vector_add",), ("def vector_add(x, y)",), "", (), ())
    base = {"task": brief.as_context(), "backend_name": "NVIDIA", "knowledge": "", "example": None}
    for i in range(12):
        choice = choose(view, rng_for(1, "t", 0, i))
        text = optimizer.evolve_messages(PromptLibrary(), base, choice, attempts)[1]["content"]
        assert "1.250x" in text and "1.750x" in text  # both kernels, each with its speed
        if choice.mode == Mode.CROSSOVER:
            assert "Combine the two kernels" in text and "Kernel B (run" in text
        else:
            assert "## The kernel to improve" in text and "### Inspiration 1 (run" in text


def test_metrics_say_evolve_runs_are_not_independent():
    from kernelwright.agent.scaling import scaling

    # task t: run 0 fails, run 1 passes; unbiased pass@1 would be 0.5, best-of-1 is run 0 alone
    attempts = [att(0, 0, kind="wrong_values"), att(1, 0)]
    ind = scaling(attempts, ["t"], runs=2, iterations=1)
    evo = scaling(attempts, ["t"], runs=2, iterations=1, search="evolve")
    assert ind["independent_runs"] and not evo["independent_runs"]
    last_ind, last_evo = ind["per_runs"][-1]["metrics"], evo["per_runs"][-1]["metrics"]
    assert last_ind["pass@1"]["value"] == 0.5 and last_evo["pass@1"]["value"] == 0.0
    assert last_evo["pass@2"]["value"] == 1.0 and "best-of-2" in last_evo["pass@2"]["note"]


def test_migration_every_iteration():
    # migrate_every=1 (--migrate-every 1): every iteration is an epoch, so run 1's kernels reach
    # run 0 one iteration after they are written, where migrate_every=2 waits for the boundary
    fast, slow = FLAT.format(b=256, w=8), FLAT.format(b=512, w=4)
    attempts = [att(0, 0), att(0, 1), att(1, 0, slow, speedup=1.1), att(1, 1, kind="wrong_values"),
                att(1, 2, fast, speedup=3.0)]
    every_one = Archive.of(attempts, migrate_every=1)
    assert [e.key for e in every_one.migrants(0, 1)] == ["r1a0"]            # after iteration 1
    assert [e.key for e in every_one.migrants(0, 2)] == ["r1a0"]            # iteration 2 failed
    assert [e.key for e in every_one.migrants(0, 3)] == ["r1a0", "r1a2"]    # after iteration 3
    assert [e.key for e in Archive.of(attempts, migrate_every=2).migrants(0, 1)] == ["r1a0"]  # after iteration 2


@pytest.mark.parametrize("every, migrated", [(1, True), (2, False)])
def test_the_loop_draws_from_the_archive_with_the_runs_migrate_every(tmp_path, every, migrated):
    """The task-run's archive is cut at the run's migrate_every (the --migrate-every the run was
    started with): after one iteration, run 1's kernel is run 0's to see with 1, not with 2."""
    from kernelwright.agent.brief import brief_for
    from kernelwright.agent.loop import AgentSettings, Plan, RunContext, TaskRun
    from kernelwright.agent.memory import TaskMemory
    from kernelwright.agent.prompts import PromptLibrary
    from kernelwright.store import RunStore
    from kernelwright.tasks import load_task_file

    from .agent_support import TINY_ADD

    task = load_task_file(TINY_ADD)
    mine = Attempt(task.name, 0, 0, "generate", 0, None, FLAT.format(b=1024, w=4), kind="passed", speedup=1.0)
    other = Attempt(task.name, 1, 0, "generate", 0, None, LOOP.format(b=2048), kind="passed", speedup=2.0)
    with RunStore(tmp_path / "run", decode=Attempt.from_dict) as store:
        store.add_attempt(mine)
        store.add_attempt(other)
        for seed in range(8):  # whatever the draw: the other island's kernel is in it, or never
            settings = AgentSettings(iterations=4, runs=2, search="evolve", migrate_every=every, seed=seed)
            ctx = RunContext(llm=None, judge=None, store=store, prompts=PromptLibrary(),  # type: ignore[arg-type]
                             settings=settings, budget=None)  # type: ignore[arg-type]
            run = TaskRun(task, brief_for(task), 0, ctx)
            _, origin, messages = run._evolve_plan(TaskMemory((mine,)), Plan(Mode.OPTIMIZE, 0, 0))
            assert ("r1a0" in origin) == migrated, origin
            assert (other.code.strip() in messages[1]["content"]) == migrated


def test_the_docs_evolve_prompts_are_what_the_templates_render():
    """docs/agent-prompts.md's --search evolve examples (between the evolve-examples markers) are
    benchmarks/render_agent_prompts.py --evolve-examples's output: a template change shows here."""
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("render_agent_prompts", root / "benchmarks" / "render_agent_prompts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = (root / "docs" / "agent-prompts.md").read_text()
    shown = doc.split(module.EVOLVE_BEGIN + "\n", 1)[1].split(module.EVOLVE_END, 1)[0]
    rendered = module.evolve_examples()
    assert shown == rendered, "docs/agent-prompts.md is stale: rerun render_agent_prompts.py --evolve-examples"
    assert "### Inspiration 1 (run 0, attempt 1): speedup 1.040x" in rendered  # parent + inspirations, with speeds
    assert "### Kernel A (run 1, attempt 0): speedup 1.120x" in rendered and "Combine the two kernels" in rendered
