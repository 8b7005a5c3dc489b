"""Two or more runs side by side, task by task: which tasks one solved and another did not, and
how their speedups differ. The first run is the base every other is compared with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .data import RunData


@dataclass
class Comparison:
    labels: list[str]                         # one per run, base first
    metrics: list[dict[str, Any]]             # {name, values: [metric row or None per run]}
    tasks: list[dict[str, Any]]               # {task, cells: [{status, speedup} or None], verdict, ratio}
    only_base: list[str]                      # solved by the base and not by some other run
    only_other: list[str]                     # solved by some other run and not by the base


def compare(runs: list[RunData]) -> Comparison:
    labels = [f"{r.label} ({r.path})" for r in runs]
    names = list(dict.fromkeys(row["name"] for r in runs for row in r.headline))
    metrics = [{"name": n, "values": [next((row for row in r.headline if row["name"] == n), None) for r in runs]}
               for n in names]
    task_names = sorted({t.name for r in runs for t in r.tasks})
    tasks, only_base, only_other = [], [], []
    for name in task_names:
        views = [r.task(name) for r in runs]
        cells = [{"status": v.status, "speedup": v.speedup} if v else None for v in views]
        base = views[0]
        solved = [bool(v and v.solved) for v in views]
        verdict = "same"
        if solved[0] and not all(solved):
            verdict = "only the base solved it" if not any(solved[1:]) else "some runs did not solve it"
            only_base.append(name)
        elif not solved[0] and any(solved[1:]):
            verdict = "the base did not solve it"
            only_other.append(name)
        elif not any(solved):
            verdict = "unsolved"
        ratios = [(v.speedup / base.speedup) if v and v.speedup and base and base.speedup else None
                  for v in views[1:]]
        tasks.append({"task": name, "cells": cells, "verdict": verdict, "ratios": ratios})
    return Comparison(labels, metrics, tasks, only_base, only_other)
