"""What a report shows, read from a run: an agent run directory (its store, read-only) or a
`judge-suite` results file (JSONL of verdicts). Nothing here computes a metric of its own: the
agent's numbers come from `run_metrics` (what `bench` writes to metrics.json) and
`agent.results.task_result` (results.jsonl), the suite's from `metrics.summarize` as
`judge-suite` prints them; this module only puts them side by side with the attempts."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..store import StoreError


class ReportError(RuntimeError):
    """A path that is neither an agent run directory nor a judge-suite results file."""


@dataclass
class TaskView:
    """One task as every renderer shows it (agent run or judge-suite record alike)."""

    name: str
    status: str                                # passed | failed | unsupported | missing | judge_error
    instruction: str = ""
    best_code: str = ""
    baseline_code: str = ""
    baseline_label: str = ""                   # what best_code is diffed against
    speedup: float | None = None
    best: dict[str, Any] | None = None         # the best attempt's summary (results.jsonl's "best")
    why: str = ""                              # why it failed: the closest attempt's kind and reason
    timings: list[dict[str, Any]] = field(default_factory=list)
    profile: dict[str, Any] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)   # results.jsonl's row (agent runs)

    @property
    def solved(self) -> bool:
        return self.status == "passed"


@dataclass
class RunData:
    kind: str                                  # "agent" or "suite"
    path: Path
    label: str
    info: list[tuple[str, str]]                # what the run was, in display order
    headline: list[dict[str, Any]]             # metric rows: name, value, numerator, denominator, note, why
    geomean_ci95: tuple[float, float] | None
    tasks: list[TaskView]
    metrics: dict[str, Any] | None = None      # metrics.json's content (agent runs)
    in_progress: bool = False

    def task(self, name: str) -> TaskView | None:
        return next((t for t in self.tasks if t.name == name), None)


def metric_rows(metrics: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """metrics.json's {name: {value, numerator, denominator, note, why}} as ordered rows."""
    return [{"name": name, **m} for name, m in metrics.items()]


def read_text(path: Any) -> str:
    try:
        return Path(path).read_text() if path else ""
    except (OSError, UnicodeDecodeError, ValueError):
        return ""


def timing_rows(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per timed shape: both medians, the speedup and its 95% interval, and each side's range over
    its timed blocks (agent attempts keep it as `ref_range`/`cand_range`; judge-suite verdicts as
    the block times themselves; None in records from before)."""
    rows = []
    for c in cases:
        if c.get("cand_ms") is None:
            continue
        timing = c.get("timing") or {}
        rows.append({"label": c.get("label", ""), "ref_ms": c.get("ref_ms"), "cand_ms": c.get("cand_ms"),
                     "speedup": c.get("speedup"), "ci95": c.get("ci95"), "roofline_ms": c.get("roofline_ms"),
                     "ref_range": c.get("ref_range") or _span(timing.get("ref_block_ms")),
                     "cand_range": c.get("cand_range") or _span(timing.get("cand_block_ms"))})
    return rows


def _span(values: Any) -> tuple[float, float] | None:
    vals = [v for v in values or () if isinstance(v, (int, float))]
    return (min(vals), max(vals)) if vals else None


# -- judge-suite results -------------------------------------------------------------------------

def load_suite_results(path: Path) -> RunData:
    """A judge-suite results file: one verdict per task, metrics as `judge-suite` prints them."""
    from ..agent.scaling import geomean_ci
    from ..metrics import summarize
    from ..suites.runner import ResultStore

    store = ResultStore(path)
    if not store.records:
        raise ReportError(f"{path} holds no judge-suite record (one JSON verdict per line)")
    records = sorted(store.records.values(), key=lambda r: r.task)
    summary = summarize({r.task: [r.outcome()] for r in records})
    rows = [asdict(m) for m in summary.metrics]
    for row in rows:
        row["note"] = row.pop("denominator_note")
    speeds = [o.speedup for r in records if (o := r.outcome()).ok_correct and o.speedup is not None]
    tasks = [_suite_task(r) for r in records]
    judged = [r for r in records if r.verdict]
    info = [("kind", "judge-suite results"), ("file", str(path.resolve())), ("tasks", str(len(records))),
            ("timed tasks", str(sum(1 for t in tasks if t.timings)))]
    if judged:
        info.append(("judge options", judged[0].judge_options or "n/a"))
        device = next((r.verdict.get("device") for r in judged if r.verdict.get("device")), None)
        if device:
            info.append(("device", str(device)))
    return RunData("suite", path, path.stem, info, rows, geomean_ci(speeds), tasks)


def _suite_task(record: Any) -> TaskView:
    verdict = record.verdict or {}
    passed = record.status == "judged" and verdict.get("stage") == "passed"
    status = "passed" if passed else ("failed" if record.status == "judged" else record.status)
    reason = (record.reason or verdict.get("reason") or "").strip()
    kind = verdict.get("kind") or record.status
    attempt = {"run": 0, "index": 0, "mode": "judged", "kind": kind, "stage": verdict.get("stage", ""),
               "reason": reason[:2000], "speedup": verdict.get("speedup"), "anchor": _anchor(record.task, 0, 0),
               "parent_anchor": None, "children": [], "tokens": 0, "cost_usd": 0.0, "latency_s": None,
               "reflection": "", "strategy": "", "flags": verdict.get("flags") or []}
    return TaskView(record.task, status, best_code=read_text(record.candidate) if passed else "",
                    speedup=verdict.get("speedup") if passed else None,
                    why="" if passed else f"{kind}: {reason.splitlines()[0] if reason else ''}",
                    timings=timing_rows(verdict.get("cases") or []), profile=verdict.get("profile") or {},
                    attempts=[attempt])


def _anchor(task: str, run: int, index: int) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in task)
    return f"t-{safe}-r{run}-a{index}"


def task_anchor(task: str) -> str:
    return "task-" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in task)


def as_json(value: Any) -> str:
    return json.dumps(value, default=str)


__all__ = ["ReportError", "RunData", "StoreError", "TaskView", "metric_rows", "task_anchor"]
