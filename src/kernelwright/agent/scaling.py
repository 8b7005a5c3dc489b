"""Sequential and parallel scaling curves from the recorded attempts, without re-running anything.

For every iteration budget t ≤ T and every run count n ≤ N, each task-run is cut to its first t
LLM attempts (the user's own kernel, when given, is not an iteration; tuning attempts count only in
the "tuned" row) and reduced to one outcome: it ran if any attempt ran, it is correct if any passed,
its speedup is the best verified one. Over the first n runs of each task:

- call / execution accuracy, GEAK's speedup, the geometric mean (with a 95% bootstrap interval
  over tasks) and fast_p use the best run of each task (`metrics.best_of`), as GEAK's parallel
  scaling does (a task counts if any run solved it);
- pass@k, for every k ≤ n, treats each run as one sample (the unbiased estimator). Under
  `--search evolve` the runs share an archive, so they are not independent samples: pass@k is
  then best-of-k (a task counts if any of its first k runs solved it), and the report says so
  (`independent_runs: false`, and each pass@k's note).

Tasks that cannot run here (`unsupported`) stay in every denominator as failures, like
`judge-suite` counts them; every metric carries its denominator, and a metric that cannot be
computed is None with the reason (`why`: in a run that timed nothing, every speed metric).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..metrics import TaskOutcome, summarize
from .memory import Attempt, Mode, undecided

FAST_PS = (0.0, 1.0, 1.5, 2.0)
BOOTSTRAP_SAMPLES = 2000


def run_outcome(task: str, attempts: Iterable[Attempt], iterations: int | None, tuned: bool = False) -> TaskOutcome:
    """One task-run cut to its first `iterations` LLM attempts (all with None)."""
    kept, n = [], 0
    for a in sorted(attempts, key=lambda a: a.index):
        if a.mode == Mode.TUNE:
            if tuned:
                kept.append(a)
            continue
        if a.mode != Mode.GIVEN:
            n += 1
            if iterations is not None and n > iterations:
                continue
        kept.append(a)
    if not kept:
        return TaskOutcome(task, False, False, None, status="missing", reason="no attempt recorded")
    if all(undecided(a) for a in kept):  # the judge's or the machine's limit: said so in the notes
        return TaskOutcome(task, False, False, None, status="judge_error", reason=kept[-1].reason)
    speeds = [a.speedup for a in kept if a.passed and a.speedup is not None]
    return TaskOutcome(task, any(a.call for a in kept), any(a.passed for a in kept), max(speeds) if speeds else None)


def geomean_ci(speeds: Sequence[float], seed: int = 0) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the geometric mean over tasks (seeded: reproducible)."""
    if len(speeds) < 2:
        return None
    logs = np.log(np.asarray(speeds, dtype=float))
    rng = np.random.default_rng(seed)
    means = logs[rng.integers(0, len(logs), size=(BOOTSTRAP_SAMPLES, len(logs)))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(np.exp(lo)), float(np.exp(hi))


@dataclass(frozen=True)
class Point:
    iterations: int | None        # None: the whole run (every attempt)
    runs: int
    tuned: bool
    metrics: dict[str, dict[str, Any]]   # name -> {value, numerator, denominator, note}
    geomean_ci95: tuple[float, float] | None


UNBIASED, BEST_OF_K = "unbiased", "best_of_k"   # what a pass@k value is (metrics.json's pass_at_k_kind)
UNBIASED_NOTE = "unbiased estimator over independent runs"
BEST_OF_NOTE = ("best-of-{k}: the runs shared one archive (--search evolve), so they are not independent "
                "samples and the unbiased pass@k estimator does not apply")


def pass_at_k_kind(search: str) -> str:
    """What pass@k is for a run of this --search: the unbiased estimator over independent runs, or
    best-of-k when the runs share an archive (evolve)."""
    return BEST_OF_K if search == "evolve" else UNBIASED


def point(by_task: dict[str, dict[int, list[Attempt]]], unsupported: dict[str, str], iterations: int | None,
          runs: int, tuned: bool = False, untimed: str = "", independent: bool = True) -> Point:
    grouped: dict[str, list[TaskOutcome]] = {}
    for task, per_run in by_task.items():
        if task in unsupported:
            grouped[task] = [TaskOutcome(task, False, False, None, status="unsupported", reason=unsupported[task])]
            continue
        grouped[task] = [run_outcome(task, per_run.get(r, []), iterations, tuned) for r in range(runs)]
    summary = summarize(grouped, ps=FAST_PS, ks=tuple(range(1, runs + 1)), untimed=untimed)
    metrics = {m.name: {"value": m.value, "numerator": m.numerator, "denominator": m.denominator,
                        "note": m.denominator_note, "why": m.why} for m in summary.metrics}
    if not independent:
        for k in range(1, runs + 1):
            solved = sum(any(o.ok_correct for o in outs[:k]) for outs in grouped.values())
            n = len(grouped)
            metrics[f"pass@{k}"] = {"value": solved / n if n else None, "numerator": solved, "denominator": n,
                                    "note": BEST_OF_NOTE.format(k=k), "why": None if n else "no task"}
    best = [max((o.speedup for o in outs if o.correct and o.speedup is not None), default=None)
            for outs in grouped.values()]
    return Point(iterations, runs, tuned, metrics, geomean_ci([s for s in best if s is not None]))


def scaling(attempts: Iterable[Attempt], tasks: Sequence[str], runs: int, iterations: int,
            unsupported: dict[str, str] | None = None, untimed: str = "", search: str = "independent") -> dict[str, Any]:
    """Every point of both curves: per iteration t (with all N runs), per run count n (with all
    iterations), and the final point after the tuning pass. `untimed`: why the run timed nothing
    ("" when it timed), which its speed metrics give as the reason they are None. `search`: the
    run's --search (evolve: the runs are not independent; pass@k is best-of-k)."""
    unsupported = unsupported or {}
    ind = search != "evolve"
    by_task: dict[str, dict[int, list[Attempt]]] = {t: {} for t in tasks}
    for a in attempts:
        if a.task in by_task:
            by_task[a.task].setdefault(a.run, []).append(a)
    per_iteration = [point(by_task, unsupported, t, runs, untimed=untimed, independent=ind)
                     for t in range(1, iterations + 1)]
    per_runs = [point(by_task, unsupported, iterations, n, untimed=untimed, independent=ind) for n in range(1, runs + 1)]
    has_tuning = any(a.mode == Mode.TUNE for per_run in by_task.values() for a_list in per_run.values() for a in a_list)
    tuned = point(by_task, unsupported, iterations, runs, tuned=True, untimed=untimed, independent=ind) \
        if has_tuning else None
    return {"tasks": len(tasks), "runs": runs, "iterations": iterations, "search": search, "independent_runs": ind,
            "pass_at_k": UNBIASED_NOTE if ind else BEST_OF_NOTE.format(k="k"),
            "pass_at_k_kind": pass_at_k_kind(search),
            "per_iteration": [asdict(p) for p in per_iteration], "per_runs": [asdict(p) for p in per_runs],
            "tuned": asdict(tuned) if tuned else None}


def table(points: Sequence[dict[str, Any]], key: str, independent: bool = True) -> str:
    """A markdown table of the main metrics along one curve (key: "iterations" or "runs");
    `independent` False (--search evolve, metrics.json's independent_runs): its pass@k columns
    are headed best-of-k, which is what they hold."""
    pk = ("pass@1 | pass@k (k = runs)" if independent else "best-of-1 | best-of-k (k = runs; not pass@k: --search evolve)")
    rows = ["| " + key + " | call acc | exec acc | GEAK speedup | geomean [95% CI] | fast_1 | " + pk + " |",
            "|---|---|---|---|---|---|---|---|"]
    for p in points:
        m = p["metrics"]
        runs = p["runs"]
        ci = p["geomean_ci95"]
        geo = m["geomean speedup"]["value"]
        geo_s = "-" if geo is None else f"{geo:.3f}" + (f" [{ci[0]:.3f}-{ci[1]:.3f}]" if ci else "")
        rows.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            p[key], _frac(m["call accuracy"]), _frac(m["execution accuracy"]), _num(m["GEAK speedup"]["value"]),
            geo_s, _frac(m["fast_1"]), _num(m["pass@1"]["value"]), _num(m[f"pass@{runs}"]["value"])))
    return "\n".join(rows)


def _frac(m: dict[str, Any]) -> str:
    return "-" if m["value"] is None else f"{m['value']:.3f} ({m['numerator']:g}/{m['denominator']})"


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"
