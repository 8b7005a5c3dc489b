"""An agent run directory (bench, generate, optimize) as a report shows it. The store is opened
read-only, so a run still going can be shown; the numbers come from the same functions `bench`
writes metrics.json and results.jsonl with (agent/run_metrics.run_metrics, agent/results.task_result)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .data import RunData, TaskView, _anchor, metric_rows, read_text, timing_rows

ABLATIONS = (("one_shot", "no one-shot example"), ("knowledge", "no knowledge"),
             ("reflection", "no reflection"), ("optimizer", "no optimizer"))


def load_agent_run(path: Path, with_tasks: bool = True) -> RunData:
    from ..agent.app import RunSpec
    from ..agent.memory import Attempt
    from ..agent.run_metrics import failures, run_metrics, task_names_of
    from ..store import RunStore, StoreError

    store = RunStore(path, readonly=True, decode=Attempt.from_dict)
    try:
        stored = store.get_meta("spec")
        if stored is None:
            raise StoreError(f"{path} holds no run spec: it was not written by generate, optimize or bench")
        spec = RunSpec.from_dict(stored)
        metrics = run_metrics(store, spec, judge=_previous_judge(store.run_dir) or None)
        names = list(task_names_of(spec))
        by_task = _attempts_by_task(store, names)
        ended = store.ended()
        runs = spec.settings.runs
        in_progress = len([k for k in ended if k[0] in by_task]) < len(names) * runs
        headline = metric_rows(metrics["per_runs"][-1]["metrics"]) if metrics["per_runs"] else []
        info = run_info(spec, metrics, by_task, in_progress)
        tasks = _task_views(store, spec, names, by_task, ended, with_tasks)
        why = dict(failures(store, metrics))
    finally:
        store.close()
    for t in tasks:
        t.why = "" if t.solved else why.get(t.name, t.why)
    ci = metrics["per_runs"][-1]["geomean_ci95"] if metrics["per_runs"] else None
    label = f"{spec.command} {spec.suite or ''} {spec.mode}".replace("  ", " ").strip()
    return RunData("agent", store.run_dir, label, info, headline, tuple(ci) if ci else None, tasks, metrics,
                   in_progress)


def _previous_judge(run_dir: Path) -> dict[str, Any]:
    """The judge's statistics of the run (candidates, utilization, wall time): only bench's
    metrics.json has them, the store does not."""
    try:
        return json.loads((run_dir / "metrics.json").read_text()).get("judge") or {}
    except (OSError, ValueError, AttributeError):
        return {}


def _attempts_by_task(store: Any, names: list[str]) -> dict[str, list[Any]]:
    by_task: dict[str, list[Any]] = {n: [] for n in names}
    for a in store.attempts():
        by_task.setdefault(a.task, []).append(a)
    return by_task


def run_info(spec: Any, metrics: dict[str, Any], by_task: dict[str, list[Any]], in_progress: bool) -> list[tuple[str, str]]:
    """What the run was: suite, mode, model, ablations, GPU, judge options, cost, wall time."""
    s = spec.settings
    ablations = [label for key, label in ABLATIONS if not getattr(s, key)]
    if s.tune:
        ablations.append(f"tuning pass ({s.tune_variants} variants)")
    device = next((a.profile.get("device") for atts in by_task.values() for a in atts
                   if isinstance(a.profile, dict) and a.profile.get("device")), None)
    judge = metrics.get("judge") or {}
    wall = judge.get("wall_s")
    created = [a.created for atts in by_task.values() for a in atts if a.created]
    wall_text = (f"{wall:.1f} s" if wall is not None else
                 f"{max(created) - min(created):.1f} s (first to last stored attempt)" if created else "n/a")
    perf = {True: "timed", False: "not timed (--no-perf)", None: "timed on GPUs"}[spec.perf]
    judge_opts = (f"{spec.judge_seeds} seeds, base seed {spec.judge_base_seed if spec.judge_base_seed is not None else 'random'}, "
                  f"{perf}" + (f", at most {spec.max_perf_cases} shapes" if spec.max_perf_cases else "")
                  + f", timeout x{spec.timeout_scale:g}, sandbox {spec.sandbox}, profile {spec.profile}")
    info = [("command", spec.command), ("suite", spec.suite or "(the given tasks)"), ("mode", spec.mode),
            ("model", spec.model), ("tasks x runs x iterations", f"{metrics['tasks']} x {s.runs} x {s.iterations}"),
            ("ablations", ", ".join(ablations) or "none (the full agent)"),
            ("search", "independent runs (pass@k: the unbiased estimator)" if s.search != "evolve" else
                       f"evolve: the runs share one archive, migrating every {s.migrate_every} iterations "
                       "(pass@k is best-of-k: the runs are not independent)"),
            ("GPU", device or f"device {spec.device}" + (" (nothing timed: " + metrics["untimed_why"] + ")"
                                                          if metrics.get("untimed_why") else "")),
            ("judge options", judge_opts),
            ("cost", f"${metrics['cost_usd']:.4f}, {metrics['tokens']} tokens, {metrics['llm_calls']} LLM calls"),
            ("wall time", wall_text)]
    if judge.get("candidates") is not None:
        info.append(("judge", f"{judge['candidates']} candidates on {judge.get('workers')} worker(s), "
                              f"utilization {judge.get('utilization', 0):.0%}"))
    if spec.unsupported:
        info.append(("unsupported here", ", ".join(sorted(spec.unsupported))))
    if in_progress:
        info.append(("state", "in progress (read while running)"))
    return info


def _task_views(store: Any, spec: Any, names: list[str], by_task: dict[str, list[Any]], ended: dict,
                with_tasks: bool) -> list[TaskView]:
    from ..agent.results import fastest_verified, task_result

    calls = _calls_by_attempt(store) if with_tasks else {}
    loaded = _load_tasks(spec) if with_tasks else {}
    views = []
    for name in names:
        attempts = by_task.get(name, [])
        result = task_result(store, name, spec.settings.runs, attempts, ended, spec.settings.search)
        row = dict(asdict(result), improved=result.improved)
        best = fastest_verified(attempts)
        view = TaskView(name, "passed" if best else "failed", best=result.best, result=row,
                        speedup=best.speedup if best else None)
        if name in spec.unsupported:
            view.status, view.why = "unsupported", spec.unsupported[name]
        if with_tasks:
            _fill_task(view, spec, loaded.get(name), attempts, best, calls)
        views.append(view)
    for name, why in sorted(spec.unsupported.items()):
        if name not in names:
            views.append(TaskView(name, "unsupported", why=f"unsupported here: {why}"))
    return views


def _fill_task(view: TaskView, spec: Any, task: Any, attempts: list[Any], best: Any, calls: dict) -> None:
    """Instruction, best kernel and what it is diffed against, timings, profile, timeline."""
    if task is not None:
        view.instruction = task.instruction
    start = spec.start_codes.get(view.name)
    if start:
        view.baseline_code, view.baseline_label = start, "the starting kernel"
    elif task is not None and task.triton_reference and read_text(task.triton_reference):
        view.baseline_code, view.baseline_label = read_text(task.triton_reference), "the Triton reference"
    elif task is not None:
        view.baseline_code, view.baseline_label = read_text(task.source_path), "the task's reference file"
    shown = best or (max(attempts, key=_rank) if attempts else None)
    if shown is not None:
        view.best_code = shown.code or ""
        view.timings = timing_rows([asdict(t) for t in shown.timings])
        view.profile = shown.profile if isinstance(shown.profile, dict) else {}
    view.attempts = timeline(attempts, calls)


def _rank(a: Any) -> tuple:
    from ..agent.results import outcome_rank

    return outcome_rank(a)


def timeline(attempts: list[Any], calls: dict) -> list[dict[str, Any]]:
    """Every attempt in order (run, index), with its calls' latency and links to parent and children."""
    rows = []
    for a in sorted(attempts, key=lambda a: (a.run, a.index)):
        own = calls.get((a.task, a.run, a.index), [])
        latency = sum(c["latency_s"] or 0.0 for c in own) if own else None
        rows.append({"run": a.run, "index": a.index, "mode": str(a.mode), "kind": a.kind, "stage": a.stage,
                     "line": a.line, "reason": a.reason, "reflection": a.reflection, "strategy": a.strategy,
                     "tokens": a.tokens, "cost_usd": a.cost_usd, "latency_s": latency, "speedup": a.speedup,
                     "roles": [c["role"] for c in own], "flags": list(a.flags),
                     "anchor": _anchor(a.task, a.run, a.index),
                     "parent_anchor": _anchor(a.task, a.run, a.parent) if a.parent is not None else None,
                     "parent": a.parent, "children": []})
    by_anchor = {r["anchor"]: r for r in rows}
    for r in rows:
        if r["parent_anchor"] in by_anchor:
            by_anchor[r["parent_anchor"]]["children"].append((r["anchor"], r["index"]))
    return rows


def _calls_by_attempt(store: Any) -> dict[tuple[str, int, int], list[dict[str, Any]]]:
    out: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    for c in store.call_stats():
        out.setdefault((c["task"], c["run"], c["attempt"]), []).append(c)
    return out


def _load_tasks(spec: Any) -> dict[str, Any]:
    """The run's tasks, for their instructions and references; a task that cannot be loaded here
    (its suite's checkout moved) is shown without them."""
    from ..agent.run_metrics import task_names_of
    from ..tasks.registry import load_task_ref

    out = {}
    for name, ref in zip(task_names_of(spec), spec.task_refs):
        try:
            out[name] = load_task_ref(ref)
        except Exception:  # noqa: BLE001 - any loader failure only hides the instruction
            continue
    return out
