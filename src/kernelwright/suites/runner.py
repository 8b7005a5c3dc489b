"""Judge a whole suite: pair tasks with candidate files, judge them on every GPU, keep every result.

Results go to an append-only JSONL file, one line per task, flushed and fsynced as each verdict
arrives; a rerun with the same output file skips every task already recorded for the same
candidate content (sha256) and judge options, so an interrupted run (Ctrl-C, kill, lost machine)
resumes without re-judging or losing anything, and an edited candidate is judged again.

Before a task is judged, a line in `<results>.judging` says its judging started (its
candidate's hash and the options), and after its record another that it ended. A rerun judges a
task whose judging started once without a verdict (the run died while it was judged) again, alone,
before the others, so that if the run dies again it was this task; one whose judging started
twice without a verdict is not judged again: it is recorded as a judge_error ("judging this
candidate killed the judge twice (...); not judged again").
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judge.common.verdict import (
    MAX_JUDGE_STARTS,
    judge_error_verdict,
    killed_judge_reason,
)
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


def _unknown_tasks(unknown: Sequence[str], known: Sequence[str], suite: str,
                   path: str | Path | None) -> SuiteUsageError:
    """The error for --tasks names the suite has not: each with its close matches (difflib) and
    the command that lists the suite's tasks."""
    import difflib

    def hint(name: str) -> str:
        near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
        return f"{name!r} (did you mean {', '.join(near)}?)" if near else repr(name)

    where = f" --path {path}" if path is not None and suite != "builtin" else ""
    return SuiteUsageError(f"unknown task(s) in --tasks: {'; '.join(hint(n) for n in unknown)}; "
                           f"`kernelwright tasks --suite {suite}{where}` lists the {len(known)} tasks of {suite}")


def select_tasks(tasks: Sequence[Task], names: Sequence[str] | None, suite: str,
                 path: str | Path | None = None) -> list[Task]:
    """The named tasks, in the order named (no names: every task). Unknown names raise
    SuiteUsageError naming each one (with close matches) and the command that lists them."""
    if not names:
        return list(tasks)
    by_name = {t.name: t for t in tasks}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise _unknown_tasks(unknown, list(by_name), suite, path)
    return [by_name[n] for n in names]


def suite_task_names(suite: str, path: str | Path | None) -> list[str] | None:
    """The names of the suite's tasks from its file names alone, without reading a task (loading
    a checkout suite takes 5-30 s: each file is parsed, its perf inputs enumerated): one name per
    file that can become a task, so every task that loads is among them. None where a suite
    cannot tell its names that way. The suite's source must have passed check_suite_source."""
    from ..tasks import builtin_task_paths

    if suite == "builtin":
        return list(builtin_task_paths())
    from . import geak, kernelbench, tritonbench_t
    from .geak_source import rocm_files, tritonbench_files

    try:
        if suite in ("tritonbench-revised", "rocm"):
            files = tritonbench_files if suite == "tritonbench-revised" else rocm_files
            return [f.stem for f in files(geak.checkout_root(path))]
        if suite == "kernelbench":
            return [kernelbench.task_name(r) for r in kernelbench.benchmark_files(kernelbench.data_root(path))[0]]
        if suite == "tritonbench-t":
            return tritonbench_t.task_names(path)
    except geak.SuiteError as exc:
        raise SuiteUsageError(str(exc)) from None
    return None


def check_task_names(suite: str, path: str | Path | None, names: Sequence[str] | None) -> None:
    """Fail fast (SuiteUsageError, as select_tasks would after loading) on a --tasks name the
    suite has not, from its file names: a typo is answered in about a second, not after the
    whole suite has loaded. A name it cannot rule out this way is left for select_tasks."""
    if not names:
        return
    known = suite_task_names(suite, path)
    if known is None:
        return
    unknown = [n for n in names if n not in set(known)]
    if unknown:
        raise _unknown_tasks(unknown, known, suite, path)


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


def file_sha256(path: str | Path | None) -> str | None:
    """The content hash a stored verdict is tied to (None: no file, or unreadable)."""
    if path is None:
        return None
    import hashlib

    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def options_key(options: Any, backend: str, shrink: float | None = None) -> str:
    """A short, stable digest of the judge options that decide a verdict (and the backend, and
    --shrink: a verdict at shrunk sizes is not one at the problem's own).
    `resolution` is left out: it follows the number of workers sharing a GPU, not the user."""
    import hashlib
    from dataclasses import asdict, is_dataclass

    if hasattr(options, "for_request"):
        data = options.for_request(backend)  # perf=None resolved: the same run as --no-perf on a CPU
    else:
        data = asdict(options) if is_dataclass(options) else dict(options or {})
    data.pop("resolution", None)
    data["backend"] = backend
    if shrink is not None:
        data["shrink"] = shrink
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class Record:
    task: str
    status: str                     # judged | unsupported | missing | judge_error
    candidate: str | None
    reason: str = ""
    verdict: dict[str, Any] | None = None
    finished_at: float = field(default_factory=time.time)
    candidate_sha256: str | None = None  # what was judged: a rerun reuses this record only if it
    judge_options: str | None = None     # is the same file content under the same options

    def outcome(self):
        from ..metrics import TaskOutcome

        if self.status == "judged":
            return TaskOutcome.from_verdict(self.verdict)
        return TaskOutcome.not_run(self.task, self.status, self.reason or self.status)


class ResultStore:
    """The run's JSONL file, one record per task. A torn last line (the process died mid-write)
    is ignored.

    Beside it, `<file>.judging` says which judgings started and which ended: a line
    `{"task", "started", "candidate_sha256", "judge_options"}` is written (and synced) before a task
    is judged, `{"task", "ended"}` after its record. A start with no end after it, when the files are
    read again, is a judging that never gave a verdict (the run died while it judged). The side file
    belongs to the results file: when that is gone (`--fresh`), it goes too."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.judging_path = path.with_name(path.name + ".judging")
        self.records: dict[str, Record] = {}
        self.starts: dict[str, list[dict[str, Any]]] = {}  # per task, the judgings started and not ended
        self._lock = threading.Lock()
        if not path.exists():
            self.judging_path.unlink(missing_ok=True)  # left by a results file that was removed
            return
        for line in path.read_text().splitlines():
            try:
                data = json.loads(line)
                self.records[data["task"]] = Record(**data)
            except (ValueError, KeyError, TypeError):
                continue
        if self.judging_path.exists():
            for line in self.judging_path.read_text().splitlines():
                try:
                    data = json.loads(line)
                    if "started" in data:
                        self.starts.setdefault(data["task"], []).append(data)
                    elif "ended" in data:
                        self.starts.pop(data["task"], None)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue

    def _append(self, path: Path, data: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(data, default=str)
        with self._lock, open(path, "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def add(self, record: Record) -> None:
        self._append(self.path, record.__dict__)
        self.records[record.task] = record
        if self.starts.pop(record.task, None):
            self._append(self.judging_path, {"task": record.task, "ended": time.time()})

    def add_start(self, task: str, sha: str | None, key: str | None) -> None:
        """`task`'s judging starts now (written and synced before the judge sees it)."""
        data = {"task": task, "started": time.time(), "candidate_sha256": sha, "judge_options": key}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()  # the side file lives only as long as the results file
        self._append(self.judging_path, data)
        self.starts.setdefault(task, []).append(data)

    def abandon(self, task: str) -> None:
        """`task`'s judging ended without a verdict while the run lived (interrupted): forget it."""
        if self.starts.pop(task, None):
            self._append(self.judging_path, {"task": task, "ended": time.time(), "interrupted": True})

    def unfinished_starts(self, task: str, sha: str | None, key: str | None) -> list[float]:
        """When judging this candidate of `task` (under these options) started without a verdict."""
        return [float(s["started"]) for s in self.starts.get(task, [])
                if s.get("candidate_sha256") == sha and s.get("judge_options") == key]


@dataclass
class SuitePlan:
    to_judge: list[tuple[Task, Path]]
    not_run: list[Record]
    already_done: int
    rejudged: list[tuple[str, str]] = field(default_factory=list)  # (task, why its stored verdict is not reused)
    fingerprints: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    # tasks whose judging started before without a verdict: judged one at a time, before the others
    alone: set[str] = field(default_factory=set)


def stale_reason(record: Record, sha: str | None, key: str | None) -> str | None:
    """Why a stored record cannot stand for this run (None: it can)."""
    if record.candidate_sha256 is None and record.judge_options is None and (sha or key):
        return "stored without a candidate hash (an older kernelwright)"
    if record.candidate_sha256 != sha:
        if sha is None:
            return "its candidate file is gone"
        return "a candidate file appeared" if record.candidate_sha256 is None else "the candidate file changed"
    if key is not None and record.judge_options != key:
        return "the judge options changed"
    return None


def expected_items(task: Task, max_perf_cases: int | None = None) -> int:
    """A task's size as known before judging it: its test items plus the perf cases to be timed."""
    from ..judge.worker.timing import perf_subset  # the judge's own choice of what is timed

    return len(task.correctness_cases) + len(perf_subset(len(task.perf_cases), max_perf_cases))


def expected_cost(task: Task, path: Path, max_perf_cases: int | None = None) -> float:
    """How long a task will keep a worker, in test items, as read before judging it: its items,
    plus half an item per autotuning config its files declare (each one is compiled before it
    is tried; a config compiles in about 1 s, an item takes about 2)."""
    from ..judge.coordinator.static import autotune_configs

    configs = 0
    for source in {path, task.reference_impl} - {None}:
        try:
            configs += autotune_configs(Path(source).read_text(errors="replace"))
        except OSError:
            pass  # the judge reports an unreadable file; the order need not
    return expected_items(task, max_perf_cases) + configs / 2


def plan(tasks: Iterable[Task], candidates: str, store: ResultStore, backend: str,
         only: set[str] | None = None, max_perf_cases: int | None = None, options: Any = None,
         shrink: float | None = None) -> SuitePlan:
    """What to judge, largest tasks first: a suite's wall time is set by its last task, and one
    with 56 parametrized cases started last ran minutes after every other had finished (ROCm's
    rmsnorm_fwd), as did one that compiles 401 autotuning configs (TritonBench's
    int8_dequant_matmul). Ties keep the suite's order.

    A task already in `store` is skipped only if its record was made from the same candidate
    content (sha256 of the file) and, when `options` are given, the same judge options and
    backend; otherwise it is judged again and listed in `rejudged` with the reason. A task whose
    judging started MAX_JUDGE_STARTS times without a verdict is a judge_error record, not judged;
    one whose judging started once without a verdict is judged alone (`alone`)."""
    to_judge, not_run, done, rejudged, prints, alone = [], [], 0, [], {}, set()
    key = options_key(options, backend, shrink) if options is not None else None
    for task in tasks:
        if only and task.name not in only:
            continue
        path = candidate_for(task, candidates)
        sha = file_sha256(path)
        prints[task.name] = (sha, key)
        if task.name in store.records:
            why = stale_reason(store.records[task.name], sha, key)
            if why is None:
                done += 1
                continue
            rejudged.append((task.name, why))
        if task.unsupported or task.requires_backend and task.requires_backend != backend:
            not_run.append(Record(task.name, "unsupported", str(path) if path else None,
                                  task.unsupported or f"needs {task.requires_backend}: {task.requires_reason}",
                                  candidate_sha256=sha, judge_options=key))
        elif path is None:
            if candidates != REFERENCE:
                reason = f"no {task.name}.py in {candidates}"
            else:
                reason = NO_TRITON_REFERENCE.get(task.suite, "the suite has no reference file for it")
            not_run.append(Record(task.name, "missing", None, reason, candidate_sha256=None, judge_options=key))
        elif len(started := store.unfinished_starts(task.name, sha, key)) >= MAX_JUDGE_STARTS:
            reason = killed_judge_reason(started)
            not_run.append(Record(task.name, "judge_error", str(path), reason,
                                  judge_error_verdict(task.name, str(path), reason).to_dict(),
                                  candidate_sha256=sha, judge_options=key))
        else:
            to_judge.append((task, path))
            if started:
                alone.add(task.name)
    to_judge.sort(key=lambda job: -expected_cost(job[0], job[1], max_perf_cases))
    return SuitePlan(to_judge, not_run, done, rejudged, prints, alone)


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
        sha, key = fingerprint(index)
        record = Record(task.name, status, str(path), verdict.reason, verdict.to_dict(),
                        candidate_sha256=sha, judge_options=key)
        store.add(record)
        if on_record:
            on_record(record)

    def fingerprint(index: int) -> tuple[str | None, str | None]:
        task, path = plan_.to_judge[index]
        sha, key = plan_.fingerprints.get(task.name, (None, None))
        return (sha if sha is not None else file_sha256(path)), key

    in_flight: set[int] = set()

    def started(index: int) -> None:
        task = plan_.to_judge[index][0]
        store.add_start(task.name, *plan_.fingerprints.get(task.name, (None, None)))  # as `plan` will look it up
        in_flight.add(index)

    def judged(index: int, verdict) -> None:
        in_flight.discard(index)
        done(index, verdict)

    # the suspects first, one at a time: if the run dies now, it was this task
    order = [i for i, (task, _) in enumerate(plan_.to_judge) if task.name in plan_.alone]
    rest = [i for i in range(len(plan_.to_judge)) if i not in set(order)]
    try:
        for i in order:
            pool.judge_many([plan_.to_judge[i]], on_verdict=lambda _, v, i=i: judged(i, v), options=options,
                            on_start=lambda _, i=i: started(i))
        pool.judge_many([plan_.to_judge[i] for i in rest], on_verdict=lambda j, v: judged(rest[j], v),
                        options=options, on_start=lambda j: started(rest[j]))
    except BaseException as exc:
        from ..judge import PoolClosed

        if isinstance(exc, (PoolClosed, KeyboardInterrupt)):
            # interrupted (Ctrl-C): what was being judged did not kill the run, and a task
            # interrupted twice must not be taken for one that did
            for i in list(in_flight):
                store.abandon(plan_.to_judge[i][0].name)
        raise


def summarize(store: ResultStore, tasks: list[Task], exclude_unsupported: bool):
    from ..metrics import summarize as summarize_metrics

    names = {t.name for t in tasks}
    grouped = {name: [rec.outcome()] for name, rec in store.records.items() if name in names}
    for name in names - set(grouped):
        grouped[name] = []  # never reached (interrupted): counted as missing
    return summarize_metrics(grouped, exclude_unsupported=exclude_unsupported)
