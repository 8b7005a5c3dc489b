"""Judge a whole suite: pair tasks with candidate files, judge them on every GPU, keep every result.

Results go to an append-only JSONL file, one line per task, flushed and fsynced as each verdict
arrives; a rerun with the same output file skips every task already recorded, so an interrupted
run (Ctrl-C, kill, lost machine) resumes without re-judging or losing anything.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..tasks import Task, list_builtin_tasks

SUITES = ("builtin", "tritonbench-revised", "rocm", "kernelbench", "tritonbench-t")
REFERENCE = "reference"
# Suites whose reference is PyTorch code, not a Triton implementation: a `--candidates reference`
# run has nothing to judge for them (judging PyTorch against itself would count as a pass).
NO_TRITON_REFERENCE = {
    "kernelbench": "KernelBench ships no Triton reference (its reference is the PyTorch Model)",
    "tritonbench-t": "TritonBench-T ships no Triton reference (its reference is the PyTorch operator)",
}
CHECKOUTS = {"tritonbench-revised": "your GEAK-eval checkout: pass --path /path/to/GEAK-eval",
             "rocm": "your GEAK-eval checkout: pass --path /path/to/GEAK-eval",
             "kernelbench": "your KernelBench checkout: pass --path /path/to/KernelBench",
             "tritonbench-t": "your TritonBench checkout: pass --path /path/to/TritonBench"}


def reference_cannot_run(reason: str) -> bool:
    """Is this judge_error the platform's fault (the suite's own reference fails here)?"""
    return (reason.startswith(("the task's reference failed", "the reference process failed",
                               "the reference failed to load"))
            or "cannot run on this platform" in reason or "no correctness case can run on this device" in reason)


def describe_unreadable(file: str, reason: str) -> str:
    """'file: reason', without the file named twice when the reason (e.g. a TaskFileError's
    "TaskFileError: /path/to/file.py: problem") names it again."""
    import re

    name = Path(file).name
    text = re.sub(rf"(^|\s)\S*{re.escape(name)}: ", r"\1", reason, count=1)
    return f"{file}: {text}"


class SuiteUsageError(ValueError):
    """Bad suite name, missing checkout, bad candidates folder: what the user must fix."""


def check_suite_source(suite: str, path: str | Path | None) -> None:
    """Fail fast (SuiteUsageError) on an unknown suite or a path that is not its checkout,
    without loading any task: loading a large suite takes seconds."""
    if suite == "builtin":
        return
    if suite not in CHECKOUTS:
        raise SuiteUsageError(f"unknown suite {suite!r}; available: {', '.join(SUITES)}")
    if path is None:
        raise SuiteUsageError(f"--suite {suite} reads {CHECKOUTS[suite]}")
    from . import geak, kernelbench, tritonbench_t

    root_of = {"kernelbench": kernelbench.data_root, "tritonbench-t": tritonbench_t.checkout_root}
    try:
        root_of.get(suite, geak.checkout_root)(path)
    except geak.SuiteError as exc:
        raise SuiteUsageError(str(exc)) from None


def load_suite_tasks(suite: str, path: str | Path | None) -> tuple[list[Task], list[tuple[str, str]]]:
    """(tasks, [(file, reason) for files that could not become tasks])."""
    check_suite_source(suite, path)  # a known suite, and for a checkout suite, its checkout
    if suite == "builtin":
        return list_builtin_tasks(), []
    from . import geak, kernelbench, tritonbench_t

    try:
        if suite == "kernelbench":
            return kernelbench.load_suite(path)
        if suite == "tritonbench-t":
            return tritonbench_t.load_suite(path)
        return geak.load_suite(suite, path)
    except geak.SuiteError as exc:
        raise SuiteUsageError(str(exc)) from None


def candidate_for(task: Task, candidates: str) -> Path | None:
    """The file judged for `task`: `<dir>/<task>.py`, or the suite's own reference (None for suites
    whose reference is not a Triton implementation)."""
    if candidates == REFERENCE:
        if task.suite in NO_TRITON_REFERENCE:
            return None
        return task.reference_impl or task.triton_reference
    path = Path(candidates) / f"{task.name}.py"
    return path if path.is_file() else None


@dataclass
class Record:
    task: str
    status: str                     # judged | unsupported | missing | judge_error
    candidate: str | None
    reason: str = ""
    verdict: dict[str, Any] | None = None
    finished_at: float = field(default_factory=time.time)

    def outcome(self):
        from ..metrics import TaskOutcome

        if self.status == "judged":
            return TaskOutcome.from_verdict(self.verdict)
        return TaskOutcome.not_run(self.task, self.status, self.reason or self.status)


class ResultStore:
    """The run's JSONL file. A torn last line (the process died mid-write) is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: dict[str, Record] = {}
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    data = json.loads(line)
                    self.records[data["task"]] = Record(**data)
                except (ValueError, KeyError, TypeError):
                    continue

    def add(self, record: Record) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record.__dict__, default=str)
        with open(self.path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.records[record.task] = record


@dataclass
class SuitePlan:
    to_judge: list[tuple[Task, Path]]
    not_run: list[Record]
    already_done: int


def expected_items(task: Task, max_perf_cases: int | None = None) -> int:
    """A task's size as known before judging it: its test items plus the perf cases to be timed."""
    from ..judge.worker import perf_subset  # the judge's own choice of what is timed

    return len(task.correctness_cases) + len(perf_subset(len(task.perf_cases), max_perf_cases))


def expected_cost(task: Task, path: Path, max_perf_cases: int | None = None) -> float:
    """How long a task will keep a worker, in test items, as read before judging it: its items,
    plus half an item per autotuning config its files declare (each one is compiled before it
    is tried; a config compiles in about 1 s, an item takes about 2)."""
    from ..judge.static import autotune_configs

    configs = 0
    for source in {path, task.reference_impl} - {None}:
        try:
            configs += autotune_configs(Path(source).read_text(errors="replace"))
        except OSError:
            pass  # the judge reports an unreadable file; the order need not
    return expected_items(task, max_perf_cases) + configs / 2


def plan(tasks: Iterable[Task], candidates: str, store: ResultStore, backend: str,
         only: set[str] | None = None, max_perf_cases: int | None = None) -> SuitePlan:
    """What to judge, largest tasks first: a suite's wall time is set by its last task, and one
    with 56 parametrized cases started last ran minutes after every other had finished (ROCm's
    rmsnorm_fwd), as did one that compiles 401 autotuning configs (TritonBench's
    int8_dequant_matmul). Ties keep the suite's order."""
    to_judge, not_run, done = [], [], 0
    for task in tasks:
        if only and task.name not in only:
            continue
        if task.name in store.records:
            done += 1
            continue
        path = candidate_for(task, candidates)
        if task.requires_backend and task.requires_backend != backend:
            not_run.append(Record(task.name, "unsupported", str(path) if path else None,
                                  f"needs {task.requires_backend}: {task.requires_reason}"))
        elif path is None:
            if candidates != REFERENCE:
                reason = f"no {task.name}.py in {candidates}"
            else:
                reason = NO_TRITON_REFERENCE.get(task.suite, "the suite has no reference file for it")
            not_run.append(Record(task.name, "missing", None, reason))
        else:
            to_judge.append((task, path))
    to_judge.sort(key=lambda job: -expected_cost(job[0], job[1], max_perf_cases))
    return SuitePlan(to_judge, not_run, done)


def run_suite(plan_: SuitePlan, store: ResultStore, pool, on_record: Callable[[Record], None] | None = None,
              options=None) -> None:
    """Judge everything planned; every record is stored the moment it exists."""
    for record in plan_.not_run:
        store.add(record)
        if on_record:
            on_record(record)
    if not plan_.to_judge:
        return

    def done(index: int, verdict) -> None:
        task, path = plan_.to_judge[index]
        status = "judged"
        if verdict.stage == "judge_error":
            # a reference that fails here means the task cannot run on this platform; anything
            # else (a lost worker...) is the judge's own failure
            status = "unsupported" if reference_cannot_run(verdict.reason) else "judge_error"
        record = Record(task.name, status, str(path), verdict.reason, verdict.to_dict())
        store.add(record)
        if on_record:
            on_record(record)

    pool.judge_many(plan_.to_judge, on_verdict=done, options=options)


def summarize(store: ResultStore, tasks: list[Task], exclude_unsupported: bool):
    from ..metrics import summarize as summarize_metrics

    names = {t.name for t in tasks}
    grouped = {name: [rec.outcome()] for name, rec in store.records.items() if name in names}
    for name in names - set(grouped):
        grouped[name] = []  # never reached (interrupted): counted as missing
    return summarize_metrics(grouped, exclude_unsupported=exclude_unsupported)
