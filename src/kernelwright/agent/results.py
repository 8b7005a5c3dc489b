"""What a run produced, read from the store only: per task the best verified kernel over its
runs (best-of-N by verdict, then speedup), pass@k over the runs, attempts, tokens and cost; and
the run directory's files (best kernels, results.jsonl, summary.json).

pass@k is the unbiased estimator over the runs when they are independent; under `--search evolve`
the runs share one archive, so it is best-of-k instead (1 if any of the task's first k runs
passed), and every record says which (`search`, `pass_at_k_kind`), as metrics.json does
(agent/scaling.py)."""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..metrics import pass_at_k
from ..store import RunStore, write_jsonl
from .memory import Attempt, Mode, TaskMemory, performance_key, undecided
from .scaling import BEST_OF_K, BEST_OF_NOTE, UNBIASED, UNBIASED_NOTE, pass_at_k_kind

def pass_at_k_values(passed: list[bool], search: str = "independent") -> dict[int, float]:
    """pass@k for k = 1..len(passed), `passed[r]`: whether run r passed."""
    n = len(passed)
    if pass_at_k_kind(search) == BEST_OF_K:
        return {k: float(any(passed[:k])) for k in range(1, n + 1)}
    return {k: pass_at_k(n, sum(passed), k) for k in range(1, n + 1)}


# Ranking of an attempt's outcome, best last: passed > ran but wrong > did not run > no code.
def outcome_rank(a: Attempt) -> tuple:
    return (a.passed, a.correct, a.call, a.code is not None, performance_key(a) if a.passed else (0, 0))


@dataclass
class TaskResult:
    task: str
    runs: int
    attempts: int
    passed_runs: int
    best: dict[str, Any] | None              # the best verified attempt (no unverified kernel ever)
    best_unverified: dict[str, Any] | None   # the closest attempt when none passed, for the report
    pass_at_k: dict[int, float] = field(default_factory=dict)
    tokens: int = 0
    cost_usd: float = 0.0
    llm_calls: int = 0
    ended: dict[str, str] = field(default_factory=dict)   # run -> why it ended
    given_speedup: float | None = None                    # the user's own kernel (optimize)
    search: str = "independent"                           # the run's --search
    pass_at_k_kind: str = UNBIASED                        # what pass_at_k holds (pass_at_k_kind)

    @property
    def improved(self) -> bool | None:
        """For optimize: whether a generated kernel beats the user's (None: nothing to compare)."""
        if self.best is None or self.given_speedup is None or self.best.get("speedup") is None:
            return None
        return self.best["mode"] != Mode.GIVEN and self.best["speedup"] > self.given_speedup


def _summary(a: Attempt) -> dict[str, Any]:
    return {"run": a.run, "index": a.index, "mode": a.mode.value, "kind": a.kind, "stage": a.stage,
            "speedup": a.speedup, "speedup_geomean": a.speedup_geomean, "speedup_ci95": a.speedup_ci95,
            "candidate_id": a.candidate_id, "reason": a.reason,
            "timings": [asdict(t) for t in a.timings],
            **({"shrink": a.shrink} if a.shrink is not None else {})}  # (--shrink: judged at shrunk sizes)


def fastest_verified(attempts: Iterable[Attempt]) -> Attempt | None:
    """The fastest verified attempt (never an unverified one), as `TaskMemory.best` picks it."""
    return TaskMemory(tuple(attempts)).best()


def task_result(store: RunStore, task: str, runs: int, attempts: list[Attempt] | None = None,
                ended: dict | None = None, search: str = "independent") -> TaskResult:
    """One task's result; `attempts` and `ended` (as the store gives them) spare re-reading them;
    `search`: the run's --search (evolve: pass@k is best-of-k)."""
    attempts = store.attempts(task) if attempts is None else attempts
    ended = store.ended() if ended is None else ended
    best = fastest_verified(attempts)
    passed = [any(a.passed and a.run == r for a in attempts) for r in range(runs)]
    cost, tokens = store.spend(task)
    closest = max(attempts, key=outcome_rank) if attempts and best is None else None
    given = [a.speedup for a in attempts if a.mode == Mode.GIVEN and a.passed and a.speedup is not None]
    return TaskResult(task, runs, len(attempts), sum(passed), _summary(best) if best else None,
                      _summary(closest) if closest else None,
                      pass_at_k_values(passed, search), tokens, cost, store.call_count(task),
                      {str(r): v["reason"] for (t, r), v in ended.items() if t == task},
                      max(given) if given else None, search, pass_at_k_kind(search))


def write_outputs(store: RunStore, tasks: list[str], runs: int, search: str = "independent") -> list[TaskResult]:
    """best/<task>.py, results.jsonl and summary.json in the run directory; `search`: the run's
    --search (evolve: pass@k is best-of-k, and both files say so)."""
    by_task: dict[str, list[Attempt]] = {t: [] for t in tasks}
    for a in store.attempts():
        by_task.setdefault(a.task, []).append(a)
    ended = store.ended()
    results = [task_result(store, t, runs, by_task[t], ended, search) for t in tasks]
    best_dir = store.run_dir / "best"
    best_dir.mkdir(exist_ok=True)
    for r in results:
        best = fastest_verified(by_task[r.task])
        path = best_dir / f"{r.task}.py"
        if best is not None and best.code:
            path.write_text(best.code)
        elif path.exists():
            path.unlink()
    write_jsonl(store.run_dir / "results.jsonl", (dict(asdict(r), improved=r.improved) for r in results))
    total_cost, total_tokens = store.spend()
    summary = {
        "tasks": len(results), "runs": runs,
        "passed_tasks": sum(1 for r in results if r.best is not None),
        "pass_at_k": {k: _mean([r.pass_at_k.get(k) for r in results]) for k in range(1, runs + 1)},
        **pass_at_k_label(search),
        "speedup_mean": _mean([r.best["speedup"] for r in results if r.best and r.best["speedup"] is not None]),
        "tokens": total_tokens, "cost_usd": total_cost, "llm_calls": sum(r.llm_calls for r in results),
        # why the task-runs stopped (a budget, the first verified kernel when nothing is timed...), counted
        "ended": dict(Counter(v["reason"] for (t, _), v in sorted(ended.items()) if t in by_task)),
    }
    (store.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return results


def pass_at_k_label(search: str) -> dict[str, Any]:
    """What a summary's pass@k is, in metrics.json's words (agent/scaling.py): the run's --search,
    whether its runs are independent, the kind of value and its note."""
    kind = pass_at_k_kind(search)
    return {"search": search, "independent_runs": kind == UNBIASED, "pass_at_k_kind": kind,
            "pass_at_k_note": UNBIASED_NOTE if kind == UNBIASED else BEST_OF_NOTE.format(k="k")}


def _mean(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


def judge_undecided(store: RunStore) -> bool:
    """Whether every task-run ended on a verdict the judge could not decide (judge_error,
    problem_too_large): such a run asks the model nothing more (agent/loop.py), and its exit
    status is 3, not 1, since no kernel was shown wrong."""
    last: dict[tuple[str, int], Attempt] = {}
    for a in store.attempts():
        if (a.task, a.run) not in last or a.index > last[a.task, a.run].index:
            last[a.task, a.run] = a
    return bool(last) and all(undecided(a) for a in last.values())


def record_judge(run_dir: Path, judge: dict) -> None:
    """The judge's report of this invocation (candidates, utilization, GPUs out of service) in
    summary.json, as bench keeps it in metrics.json: known only once the session's judge pool
    is done, after `write_outputs` wrote the rest."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    summary["judge"] = judge
    path.write_text(json.dumps(summary, indent=2) + "\n")
