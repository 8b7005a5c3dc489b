"""`kernelwright bench`: the agent over a whole suite, as the GEAK paper's experiments run it.

A bench run is an agent run over many tasks (one store, one spec, resumable) with a mode: the
full agent, or one of the paper's baselines on the same harness. The ablation switches act on
top of the mode. Metrics per iteration and per run count come from the store (`scaling`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from .loop import AgentSettings

# `bench --mode`: the full agent or one of the paper's baselines, as settings of the same loop
# (not an attempt's `memory.Mode`). Baselines go without knowledge injection (GEAK's addition);
# "direct" is one call from the instruction alone, "one-shot" adds the retrieved example,
# "reflexion" is one-shot plus Reflexion's debugging loop (no optimizer).
BENCH_MODES: dict[str, dict[str, Any]] = {
    "geak": {},
    "direct": dict(iterations=1, one_shot=False, knowledge=False, reflection=False, optimizer=False),
    "one-shot": dict(iterations=1, one_shot=True, knowledge=False, reflection=False, optimizer=False),
    "reflexion": dict(one_shot=True, knowledge=False, reflection=True, optimizer=False),
}


def settings_for(mode: str, *, iterations: int, runs: int, seed: int, ablations: dict[str, bool],
                 max_debug_attempts: int = 5, temperature: float = 1.0, tune: bool = False,
                 tune_variants: int = 12) -> AgentSettings:
    """The loop's settings for a bench mode; `ablations` ({"one_shot": False, ...}) switch parts off."""
    if mode not in BENCH_MODES:
        raise ValueError(f"--mode {mode!r}: one of {', '.join(BENCH_MODES)}")
    base = AgentSettings(iterations=iterations, runs=runs, seed=seed, max_debug_attempts=max_debug_attempts,
                         temperature=temperature, tune=tune, tune_variants=tune_variants)
    settings = replace(base, **BENCH_MODES[mode])
    off: dict[str, Any] = {k: False for k, on in ablations.items() if on is False}
    return replace(settings, **off)


def select_tasks(tasks: Sequence[Any], names: Sequence[str] | None, suite: str = "builtin",
                 path: Path | None = None) -> list[Any]:
    """The suite's tasks, or the named ones (an unknown name is a SuiteUsageError naming it, with
    a suggestion and the command that lists the suite's tasks)."""
    from ..suites.runner import select_tasks as select

    return select(tasks, names, suite, path)


def unsupported_here(task: Any, backend: str) -> str | None:
    """Why a task cannot be judged on this machine, or None."""
    if task.unsupported:
        return task.unsupported
    if task.requires_backend and task.requires_backend != backend:
        return f"needs {task.requires_backend}: {task.requires_reason}"
    return None


def load_tasks(suite: str, path: Path | None, names: Sequence[str] | None) -> list[Any]:
    """The suite's tasks, or the named ones; a name the suite has not is refused before any task
    loads (check_task_names), where the suite's file names tell."""
    from ..suites.runner import check_suite_source, check_task_names, load_suite_tasks
    from ..tasks import builtin_task_paths, load_task_file

    check_suite_source(suite, path)
    check_task_names(suite, path, names)
    if suite == "builtin":
        tasks = [load_task_file(p) for p in builtin_task_paths().values()]
        for t in tasks:
            t.suite = "builtin"
    else:
        tasks, _ = load_suite_tasks(suite, path)
    return select_tasks(tasks, names, suite, path)
