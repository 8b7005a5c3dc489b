"""The metrics of a stored agent run (what `bench` writes to metrics.json), the names its
attempts are stored under, and why each unsolved task failed: computed from the run store alone,
so `bench`, `bench-report`, `show` and `report` agree (the report imports this, never the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def clip(text: str, limit: int = 200) -> str:
    """`text` cut at a word before `limit` characters, with an ellipsis: a cut reason must not
    read as a whole one ("need about 66.00 GiB of")."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def write_metrics(store, spec, judge: dict[str, Any] | None = None) -> dict[str, Any]:
    """metrics.json of a bench run, from the store alone."""
    report = run_metrics(store, spec, judge)
    (store.run_dir / "metrics.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def run_metrics(store, spec, judge: dict[str, Any] | None = None) -> dict[str, Any]:
    """What metrics.json holds, computed from the store without writing anything (`kernelwright
    show` and `report` read a run still going, through a read-only store)."""
    from .scaling import scaling

    names = sorted(set(task_names_of(spec)) | set(spec.unsupported))
    # why nothing was timed, as the run recorded it (a run from before that record: known for --no-perf only)
    recorded = store.get_meta("untimed")
    untimed = recorded if recorded is not None else ("--no-perf" if spec.perf is False else "")
    timed = not untimed if recorded is not None or untimed else None
    report = scaling(store.attempts(), names, spec.settings.runs, spec.settings.iterations, spec.unsupported,
                     untimed, spec.settings.search)
    cost, tokens = store.spend()
    report.update({"command": spec.command, "suite": spec.suite, "mode": spec.mode, "model": spec.model, "settings": spec.to_dict()["settings"],
                   "unsupported": spec.unsupported, "tokens": tokens, "cost_usd": cost,
                   "llm_calls": store.call_count(), "timed": timed, "untimed_why": untimed or None})
    if judge is not None:
        report["judge"] = judge
    _label_shrunk(report, spec.shrink)
    return report


def _label_shrunk(report: dict[str, Any], factor: float | None) -> None:
    """metrics.json says whether the run was judged at shrunk sizes (--shrink, with F), and each
    speed metric of a shrunk run says so in its note."""
    from ..metrics import is_speed, shrunk_note

    report["shrink"] = factor
    if factor is None:
        return
    points = [*report.get("per_iteration", ()), *report.get("per_runs", ())]
    points += [report["tuned"]] if report.get("tuned") else []
    for point in points:
        for name, metric in point.get("metrics", {}).items():
            if is_speed(name):
                metric["note"] = f"{metric.get('note') or ''}; {shrunk_note(factor)}".lstrip("; ")


def task_names_of(spec) -> tuple[str, ...]:
    """The names the run's attempts are stored under: as the spec recorded them, or, for a run
    from before that record, as each ref implies them."""
    return spec.task_names or tuple(ref_name(r) for r in spec.task_refs)


def ref_name(ref: str) -> str:
    """A task's name from its reference (a file path, or SUITE:ROOT::KEY), for runs whose spec
    did not record the names. The key is the name for every adapter but KernelBench's, whose key
    is the problem's path (level1/19_ReLU.py names L1_19_ReLU)."""
    from ..tasks.shrink import split_ref

    ref = split_ref(ref)[1]  # (a shrunk task's ref: "shrunk:F:<ref>")
    if "::" not in ref:
        return Path(ref).stem
    key = ref.rsplit("::", 1)[-1]
    if ref.startswith("kernelbench:"):
        from ..suites.kernelbench import task_name

        return task_name(key)
    return key


def failures(store, report: dict[str, Any]) -> list[tuple[str, str]]:
    """(task, why) for every task without a verified kernel: its closest attempt's kind and
    reason, or why it could not run here."""
    from .results import outcome_rank

    out = [(name, f"unsupported here: {why}") for name, why in sorted(report["unsupported"].items())]
    by_task: dict[str, list] = {}
    for a in store.attempts():
        by_task.setdefault(a.task, []).append(a)
    for name, attempts in sorted(by_task.items()):
        if not any(a.passed for a in attempts):
            near = max(attempts, key=outcome_rank)
            why = near.reason if near.stage == "judge_error" else clip(near.reason)
            out.append((name, f"{near.kind} (attempt {near.index} of run {near.run}): {why}"))
    return out
