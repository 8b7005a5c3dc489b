"""Suite-level metrics over judge verdicts. Standard library and numpy only (no torch).

Every metric is a `Metric` that states its numerator and denominator. Definitions:

- call accuracy: tasks whose kernel ran without error / all tasks (GEAK "call accuracy").
- execution accuracy: tasks whose output matched the reference / all tasks (GEAK "execution
  accuracy"; KernelBench "correctness").
- GEAK speedup: arithmetic mean, over correct tasks with a measured speedup, of the per-task
  speedup (the mean over performance shapes of reference median / candidate median; GEAK).
  The denominator is those tasks only; None when there are none.
- geomean speedup: geometric mean of the same per-task speedups over the same tasks.
- fast_p: tasks that are correct AND have speedup > p / all tasks (KernelBench). A correct task
  whose speedup was not measured counts as fast for p = 0 (so fast_0 equals execution accuracy,
  as in KernelBench) and as not fast for every p > 0. When correct tasks exist but none was
  timed, fast_p for p > 0 is None (unknown, not 0), with the reason in `why`.

A metric that cannot be computed has value None and says why (`Metric.why`): no task, no correct
task, nothing timed. A caller that knows the run timed nothing (`summarize(untimed=...)`: the CPU
interpreter, --no-perf) has every speed metric None with that reason, even without a correct task.
- pass@k: the unbiased estimator 1 - C(n-c, k) / C(n, k) per task (n candidates, c of them
  passing), averaged over all tasks (Codex, Chen et al. 2021).

"All tasks" means every task in the input, including tasks that cannot run on this platform
(status "unsupported"), tasks the judge could not decide ("judge_error") and tasks without a
candidate ("missing"): all of them count as failures. Only unsupported tasks can be left out of
the denominators, and only with `exclude_unsupported=True`, which every affected note states.

Several candidates per task: call/execution accuracy, speedups and fast_p use the best of the
task's candidates (`best_of`: the task is correct if any candidate is, and its speedup is the best
among its correct candidates); pass@k is the statistic that accounts for the number of samples.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

import numpy as np

STATUSES = ("judged", "unsupported", "judge_error", "missing")
EXCLUDE_FLAG = "--exclude-unsupported"


@dataclass(frozen=True)
class TaskOutcome:
    """One candidate's result on one task, reduced to what the metrics need."""

    task: str
    call: bool
    correct: bool
    speedup: float | None
    status: str = "judged"  # "judged", "unsupported", "judge_error" or "missing"
    reason: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, not {self.status!r}")
        if self.status in ("unsupported", "judge_error") and not self.reason:
            raise ValueError(f"task {self.task!r}: status {self.status!r} needs a reason")

    @property
    def judged(self) -> bool:
        return self.status == "judged"

    @property
    def ok_call(self) -> bool:
        """Call succeeded; anything not judged is a failure."""
        return self.judged and self.call

    @property
    def ok_correct(self) -> bool:
        return self.judged and self.correct

    @classmethod
    def not_run(cls, task: str, status: str, reason: str = "") -> "TaskOutcome":
        """A task that produced no judged candidate (unsupported, judge_error or missing)."""
        if status == "judged":
            raise ValueError("not_run() is for tasks that were not judged")
        return cls(task, False, False, None, status, reason or ("no candidate" if status == "missing" else ""))

    @classmethod
    def from_verdict(cls, verdict: Any) -> "TaskOutcome":
        """From a `Verdict` (duck-typed: nothing is imported) or its `to_dict()` dict.

        A verdict at stage "judge_error" becomes status "judge_error" with the verdict's reason.
        A dict may carry an explicit "status" (e.g. "unsupported") and "reason".
        """
        get = verdict.get if isinstance(verdict, Mapping) else (lambda k, d=None: getattr(verdict, k, d))
        task, reason = str(get("task")), str(get("reason", "") or "")
        status = get("status", None) or ("judge_error" if get("stage") == "judge_error" else "judged")
        if status != "judged":
            return cls.not_run(task, status, reason or str(get("stage", "")))
        speedup = get("speedup", None)
        return cls(task, bool(get("call", False)), bool(get("correct", False)),
                   None if speedup is None else float(speedup), "judged", reason)


Outcomes = Union[Iterable[TaskOutcome], Mapping[str, Sequence[TaskOutcome]]]


def group(outcomes: Outcomes) -> dict[str, list[TaskOutcome]]:
    """Candidates per task, in first-seen order. A mapping is taken as already grouped
    (an empty list means the task has no candidate)."""
    if isinstance(outcomes, Mapping):
        return {task: list(cands) for task, cands in outcomes.items()}
    grouped: dict[str, list[TaskOutcome]] = {}
    for o in outcomes:
        grouped.setdefault(o.task, []).append(o)
    return grouped


def best_of(task: str, candidates: Sequence[TaskOutcome]) -> TaskOutcome:
    """One outcome per task: call/correct if any judged candidate is; speedup = best among the
    correct candidates. With no judged candidate, the first non-judged one stands (its reason)."""
    judged = [c for c in candidates if c.judged]
    if not judged:
        return replace(candidates[0], task=task) if candidates else TaskOutcome.not_run(task, "missing")
    speeds = [c.speedup for c in judged if c.correct and c.speedup is not None]
    return TaskOutcome(task, any(c.call for c in judged), any(c.correct for c in judged),
                       max(speeds) if speeds else None)


@dataclass(frozen=True)
class Metric:
    name: str
    value: float | None
    numerator: float | None  # count (or sum) such that value = numerator / denominator; None for geomean
    denominator: int
    denominator_note: str
    why: str | None = None   # why value is None ("no correct task was timed", ...); None when it is not


def _population(outcomes: Outcomes, exclude_unsupported: bool) -> tuple[list[TaskOutcome], str]:
    """Best-of outcome per task that is in the denominator, and the note that says what it holds."""
    tasks = [best_of(t, c) for t, c in group(outcomes).items()]
    counts = {s: sum(o.status == s for o in tasks) for s in STATUSES[1:]}
    kept = [o for o in tasks if not (exclude_unsupported and o.status == "unsupported")]
    parts = [f"{len(kept)} tasks"]
    if counts["unsupported"]:
        parts.append(f"{counts['unsupported']} unsupported "
                     + (f"excluded ({EXCLUDE_FLAG})" if exclude_unsupported else "counted as failures"))
    if counts["judge_error"]:
        parts.append(f"{counts['judge_error']} judge errors counted as failures")
    if counts["missing"]:
        parts.append(f"{counts['missing']} missing counted as failures")
    return kept, "; ".join(parts)


def _fraction(name: str, hits: int, population: list[TaskOutcome], note: str) -> Metric:
    n = len(population)
    return Metric(name, hits / n if n else None, hits, n, note, None if n else "no task")


UNTIMED = "no correct task was timed"


def _no_speed_why(pop: list[TaskOutcome]) -> str:
    return UNTIMED if any(o.ok_correct for o in pop) else "no correct task"


def call_accuracy(outcomes: Outcomes, exclude_unsupported: bool = False) -> Metric:
    pop, note = _population(outcomes, exclude_unsupported)
    return _fraction("call accuracy", sum(o.ok_call for o in pop), pop, note)


def execution_accuracy(outcomes: Outcomes, exclude_unsupported: bool = False) -> Metric:
    pop, note = _population(outcomes, exclude_unsupported)
    return _fraction("execution accuracy", sum(o.ok_correct for o in pop), pop, note)


def _timed(outcomes: Outcomes, exclude_unsupported: bool) -> tuple[list[float], str, str | None]:
    """The measured speedups of the correct tasks, the note, and why there are none (None: some)."""
    pop, note = _population(outcomes, exclude_unsupported)
    speeds = [o.speedup for o in pop if o.ok_correct and o.speedup is not None]
    untimed = sum(o.ok_correct and o.speedup is None for o in pop)
    head = f"{len(speeds)} correct tasks with a measured speedup, of {note}"
    return (speeds, head + (f"; {untimed} correct but untimed left out" if untimed else ""),
            None if speeds else _no_speed_why(pop))


def geak_speedup(outcomes: Outcomes, exclude_unsupported: bool = False) -> Metric:
    speeds, note, why = _timed(outcomes, exclude_unsupported)
    total = float(sum(speeds))
    return Metric("GEAK speedup", total / len(speeds) if speeds else None, total if speeds else None,
                  len(speeds), note, why)


def geomean_speedup(outcomes: Outcomes, exclude_unsupported: bool = False) -> Metric:
    speeds, note, why = _timed(outcomes, exclude_unsupported)
    value = float(np.exp(np.mean(np.log(speeds)))) if speeds else None
    return Metric("geomean speedup", value, None, len(speeds), note, why)


def fast_p(outcomes: Outcomes, p: float, exclude_unsupported: bool = False) -> Metric:
    """Correct and speedup > p, over all tasks. Untimed correct tasks: fast for p = 0 only; with
    correct tasks and none timed, fast_p for p > 0 is unknown (None), not 0."""
    pop, note = _population(outcomes, exclude_unsupported)
    correct = [o for o in pop if o.ok_correct]
    if p > 0 and correct and all(o.speedup is None for o in correct):
        return Metric(f"fast_{p:g}", None, None, len(pop), note, UNTIMED)
    hits = sum(o.ok_correct and (o.speedup > p if o.speedup is not None else p == 0) for o in pop)
    return _fraction(f"fast_{p:g}", hits, pop, note)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k = 1 - C(n-c, k) / C(n, k), in the Codex paper's stable product form."""
    if not (n >= 0 and 0 <= c <= n and k >= 1):
        raise ValueError(f"pass@k needs n >= 0, 0 <= c <= n and k >= 1 (got n={n}, c={c}, k={k})")
    if n < k:
        raise ValueError(f"pass@{k} needs at least k={k} candidates per task, got n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k_suite(grouped: Outcomes, k: int, criterion: str = "correct",
                    exclude_unsupported: bool = False) -> Metric:
    """Mean pass@k over tasks; every candidate is a sample, and a candidate that was not judged
    fails. A task without any candidate scores 0 (it stays in the denominator)."""
    if criterion not in ("correct", "call"):
        raise ValueError(f"criterion must be 'correct' or 'call', not {criterion!r}")
    groups = group(grouped)
    pop, note = _population(groups, exclude_unsupported)
    total = 0.0
    for o in pop:
        # a run that produced no candidate ("missing": stopped by a budget, or its task-run
        # failed) is a failed sample, not a smaller n: leaving it out would raise for n < k, or
        # score a task on its lucky runs only
        samples = groups[o.task]
        if not samples:
            continue
        passed = sum(s.ok_correct if criterion == "correct" else s.ok_call for s in samples)
        try:
            total += pass_at_k(len(samples), passed, k)
        except ValueError as e:
            raise ValueError(f"task {o.task!r}: {e}") from None
    n = len(pop)
    name = f"pass@{k}" + ("" if criterion == "correct" else " (call)")
    return Metric(name, total / n if n else None, total, n, note)


@dataclass
class Summary:
    metrics: list[Metric]
    not_judged: list[TaskOutcome] = field(default_factory=list)  # with status and reason
    exclude_unsupported: bool = False


def summarize(grouped: Outcomes, exclude_unsupported: bool = False,
              ps: Sequence[float] = (0, 1, 1.5, 2), ks: Sequence[int] = (1,), untimed: str = "") -> Summary:
    """All metrics in report order, plus every task that was not judged, with its reason.
    `untimed`: why the run timed nothing ("CPU interpreter"): when no speedup was measured, the
    speedups and fast_p (p > 0) are None with that reason, also when no task was correct (a 0
    there would read as "measured, and none fast")."""
    groups = group(grouped)
    x = exclude_unsupported
    speed = [geak_speedup(groups, x), geomean_speedup(groups, x)]
    fast = [fast_p(groups, p, x) for p in ps]
    if untimed and not speed[0].denominator:
        why = f"nothing was timed ({untimed})"
        speed = [replace(m, value=None, numerator=None, why=why) for m in speed]
        fast = [replace(m, value=None, numerator=None, why=why) if p > 0 else m for p, m in zip(ps, fast)]
    metrics = [call_accuracy(groups, x), execution_accuracy(groups, x), *speed, *fast]
    metrics += [pass_at_k_suite(groups, k, "correct", x) for k in ks]
    not_judged = [o for o in (best_of(t, c) for t, c in groups.items()) if not o.judged]
    return Summary(metrics, not_judged, exclude_unsupported)


def shrunk_note(factor: float) -> str:
    """What labels the speed metrics of a run judged at shrunk sizes (--shrink, tasks/shrink.py):
    a speedup at a smoke run's sizes is not the problem's own."""
    return f"speed at problem sizes shrunk by --shrink {factor:g}, not the problems' own"


def is_speed(name: str) -> bool:
    return "speedup" in name or name.startswith("fast_")


def label_shrunk(metrics: Sequence[Metric], factor: float | None) -> list[Metric]:
    """The metrics with every speed metric's note saying the sizes were shrunk (None: as they are)."""
    if factor is None:
        return list(metrics)
    return [replace(m, denominator_note=f"{m.denominator_note}; {shrunk_note(factor)}") if is_speed(m.name) else m
            for m in metrics]


def _fmt(v: float | None, digits: int = 4) -> str:
    if v is None:
        return "n/a"
    return str(int(v)) if float(v).is_integer() else f"{v:.{digits}g}"


def format_table(metrics: Sequence[Metric] | Summary) -> str:
    """A markdown table (metric, value, numerator/denominator, note); given a `Summary`, the tasks
    that were not judged follow, each with its status and reason."""
    rows = metrics.metrics if isinstance(metrics, Summary) else metrics
    lines = ["| metric | value | n/d | denominator |", "|---|---|---|---|"]
    for m in rows:
        frac = f"{_fmt(m.numerator)}/{m.denominator}" if m.numerator is not None else f"-/{m.denominator}"
        why = f" ({m.why})" if m.why and m.value is None else ""
        lines.append(f"| {m.name} | {_fmt(m.value)} | {frac} | {m.denominator_note}{why} |")
    if isinstance(metrics, Summary) and metrics.not_judged:
        lines.append("")
        lines.append("Tasks not judged:")
        for o in metrics.not_judged:
            excluded = metrics.exclude_unsupported and o.status == "unsupported"
            lines.append(f"- {o.task}: {o.status}" + (" (excluded)" if excluded else "")
                         + f": {o.reason}")
    return "\n".join(lines)
