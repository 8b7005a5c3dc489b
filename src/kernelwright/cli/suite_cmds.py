"""`kernelwright judge-suite`: judge a folder of candidates (or a suite's own references)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from . import app
from .agent_progress import clock
from .progress_line import Field, ProgressLine
from .usage import plural
from .judge_cmds import EXIT_USAGE, usage_error
from .options import (
    AddressOpt,
    Command,
    ExecutorOpt,
    GpusOpt,
    ShrinkOpt,
    shrunk_tasks,
    JudgeBaseSeedOpt,
    JudgeSeedsOpt,
    NoProfileOpt,
    ProfileOpt,
    SandboxOpt,
    TasksOpt,
    TimeoutScaleOpt,
    WorkersPerDeviceOpt,
    judge_options,
    profile_level,
    parse_tasks,
)

EXIT_INTERRUPTED = 130
console = Console()

# TritonBench-revised, references against themselves, 8 workers per H200: with the default 0.5%
# term, 95% intervals covered 1.0 in 72 of 117 tasks (those whose autotuners agreed); covering 95%
# of them needed 2.9% more.
SHARED_GPU_RESOLUTION = 0.03

# Suites time hundreds of shapes: fewer, shorter blocks than a single `eval` (same protocol).
TIMING_PROFILES = {
    "standard": {"perf_blocks": 10, "block_ms": 40.0, "warmup_ms": 25.0},
    "quick": {"perf_blocks": 4, "block_ms": 10.0, "warmup_ms": 10.0, "spot_samples": 1024},
}


@app.command("judge-suite", cls=Command, short_help="Judge every task of a suite.")
def judge_suite_command(
    suite: str = typer.Option(..., "--suite", "-s", help="builtin | tritonbench-revised | rocm | kernelbench | tritonbench-t"),
    candidates: str = typer.Option(..., "--candidates", "-c",
                                   help="Folder of <task>.py candidate files, or 'reference' to judge the "
                                        "suite's own reference implementations (the sanity run)."),
    path: Optional[Path] = typer.Option(None, "--path", "-p", help="The benchmark's checkout: GEAK-eval (tritonbench-revised, "
                                                                  "rocm), KernelBench, or thunlp/TritonBench "
                                                                  "(tritonbench-t)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o",
                                       help="Results file (JSONL, one line per task). Rerunning with the same "
                                            "file resumes. Default: <suite>-<candidates>.jsonl in kernelwright-results/"),
    as_json: bool = typer.Option(False, "--json", help="Print the metrics and per-task results as JSON."),
    device: str = typer.Option("auto", help="auto | cpu | cuda | hip"),
    workers_per_device: WorkersPerDeviceOpt = None,
    tasks: TasksOpt = None,
    perf: Optional[bool] = typer.Option(None, "--perf/--no-perf", help="Measure speed (default: on GPUs)."),
    timing: str = typer.Option("quick", help="Timing profile: quick (4 blocks of 10 ms) or standard (10 of 40 ms)."),
    judge_seeds: JudgeSeedsOpt = 2,
    judge_base_seed: JudgeBaseSeedOpt = None,
    exclude_unsupported: bool = typer.Option(False, "--exclude-unsupported",
                                             help="Leave tasks that cannot run on this platform out of the "
                                                  "denominators (the table says so)."),
    fresh: bool = typer.Option(False, "--fresh", help="Ignore earlier results in --out and start over."),
    max_perf_cases: Optional[int] = typer.Option(None, "--max-perf-cases", min=1,
                                                 help="Time at most N shapes per task, spread evenly from the "
                                                      "smallest to the largest (default: every shape)."),
    timeout_scale: TimeoutScaleOpt = 1.0,
    force: bool = typer.Option(False, "--force",
                               help="With --perf under the CPU interpreter: time anyway (refused by default)."),
    sandbox: SandboxOpt = "auto",
    profile: ProfileOpt = "basic",
    no_profile: NoProfileOpt = False,
    shrink: ShrinkOpt = None,
    executor: ExecutorOpt = "local",
    address: AddressOpt = None,
    gpus: GpusOpt = None,
) -> None:
    """Judge every task of a suite and report call/execution accuracy, speedups, fast_p.

    Exit status: 0 the run finished, 2 usage error, 130 interrupted (rerun the same command to resume).
    """
    from ..judge import DeviceUnavailable
    from ..scale.executor import check_executor, judge_backend, open_pool
    from ..suites.runner import (
        REFERENCE,
        ResultStore,
        SuiteUsageError,
        check_suite_source,
        check_task_names,
        describe_unreadable,
        load_suite_tasks,
        plan,
        run_suite,
        select_tasks,
    )

    profile = profile_level(profile, no_profile)
    if timing not in TIMING_PROFILES:
        raise usage_error(f"--timing must be one of {', '.join(TIMING_PROFILES)}")
    try:
        check_executor(executor, address, gpus)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if candidates != REFERENCE and not Path(candidates).is_dir():
        raise usage_error(f"--candidates {candidates!r} is not a folder (or 'reference')")
    names = parse_tasks(tasks)
    try:
        check_suite_source(suite, path)
        check_task_names(suite, path, names)  # a mistyped name: answered before the suite loads
    except SuiteUsageError as exc:
        raise usage_error(str(exc)) from None
    if perf and not force:
        try:
            backend = judge_backend(executor, address, device)
        except DeviceUnavailable as exc:
            raise usage_error(str(exc)) from None
        if backend == "cpu":
            raise usage_error("--perf under Triton's CPU interpreter refused: every perf case needs at least "
                              f"{2 * (2 * TIMING_PROFILES[timing]['perf_blocks'] + 2)} calls at perf sizes, and an "
                              "interpreted call there takes 1-30 s (`kernelwright eval --perf` estimates one task); "
                              "the times say nothing about a GPU. Run it on a GPU machine, or add --force")
    label = "reference" if candidates == REFERENCE else Path(candidates).resolve().name
    out = out or Path("kernelwright-results") / f"{suite}-{label}.jsonl"
    if fresh and out.exists():
        out.unlink()
    store = ResultStore(out)
    options = judge_options(judge_seeds=judge_seeds, judge_base_seed=judge_base_seed, perf=perf,
                            timeout_scale=timeout_scale, max_perf_cases=max_perf_cases, sandbox=sandbox,
                            profile=profile, **TIMING_PROFILES[timing])
    err = Console(stderr=True, soft_wrap=True)  # paths and reasons stay on one line
    interrupted = False
    started = time.monotonic()
    suite_tasks: list = []
    problems: list[tuple[str, str]] = []
    only: set[str] | None = None
    work = None
    try:
        with open_pool(executor, address, device, options, workers_per_device, gpus=gpus) as pool:
            # With other workers on the GPU between timing turns (and compiling on the CPU during
            # them), two processes timing the same kernel differ more than on a quiet machine:
            # intervals carry the systematic term measured by reference-against-itself suite runs
            # (docs/benchmarks.md). Set before any request is sent: every one reads these options.
            if pool.n_workers > pool.n_devices:
                options.resolution = SHARED_GPU_RESOLUTION
            # The workers start (importing torch, initialising the GPU) while the suite loads:
            # TritonBench-revised takes ~10 s to load, a worker ~5 s to start.
            pool.start(wait=False)
            try:
                suite_tasks, problems = load_suite_tasks(suite, path)
                only = {t.name for t in select_tasks(suite_tasks, names, suite, path)} if names else None
                # (only the selected tasks: fitting a KernelBench problem's sizes runs its file)
                suite_tasks = shrunk_tasks([t for t in suite_tasks if not only or t.name in only], shrink)
            except (SuiteUsageError, ValueError) as exc:
                raise usage_error(str(exc)) from None
            for file, reason in problems:
                err.print(f"[yellow]not a task:[/] {escape(describe_unreadable(file, reason))}")
            work = plan([t for t in suite_tasks if not only or t.name in only], candidates, store, pool.backend,
                        max_perf_cases=max_perf_cases, options=options, shrink=shrink)
            if work.already_done:
                err.print(f"resuming {out}: {plural(work.already_done, 'task')} already judged (same candidate file and "
                          "judge options: not judged again)")
            for name, why in work.rejudged:
                err.print(f"[yellow]judging {escape(name)} again:[/] {escape(why)} since its stored verdict")
            progress = SuiteProgress(f"{suite} ({pool.backend})", len(work.to_judge) + len(work.not_run))
            with ProgressLine(err, progress.fields, enabled=not as_json):
                run_suite(work, store, pool, progress.on_record)
    except DeviceUnavailable as exc:
        raise usage_error(str(exc)) from None
    except KeyboardInterrupt:
        interrupted = True
    wall = time.monotonic() - started
    selected = [t for t in suite_tasks if not only or t.name in only]
    report_suite(suite, candidates, store, out, selected, exclude_unsupported, wall, interrupted, as_json,
                 work.rejudged if work else [], problems, shrink)
    if interrupted:
        err.print(f"[yellow]interrupted[/]: every finished task is saved in {out}; rerun the same command to resume")
        raise typer.Exit(EXIT_INTERRUPTED)


class SuiteProgress:
    """judge-suite's live line: tasks done of the total, the elapsed time, passed/failed/not run,
    the bar and the suite's name; on a narrow terminal the name goes first, then the bar."""

    def __init__(self, title: str, total: int) -> None:
        self.title, self.total, self.done = title, total, 0
        self.counts = {"passed": 0, "failed": 0, "not run": 0}
        self.started = time.monotonic()

    def on_record(self, record) -> None:
        key = ("passed" if record.verdict and record.verdict["stage"] == "passed"
               else "failed" if record.status == "judged" else "not run")
        self.counts[key] += 1
        self.done += 1

    def fields(self) -> list[Field]:
        counts = "  ".join(f"{k}: {v}" for k, v in self.counts.items())
        return [Field(self.title, 5, style="bold"), Field.bar(self.done, self.total, 4),
                Field(f"{self.done}/{self.total} tasks", 1, " ", style="progress.download"),
                Field(counts, 3, "  "), Field(clock(time.monotonic() - self.started), 2, " ", style="progress.elapsed")]


def report_suite(suite: str, candidates: str, store, out: Path, selected: list, exclude_unsupported: bool,
                 wall: float, interrupted: bool, as_json: bool, rejudged: list, problems: list,
                 shrink: float | None = None) -> None:
    """The metrics of a suite run, and its failures grouped by kind (or all of it as JSON); a
    shrunk run (--shrink) says so, and labels its speed metrics."""
    from ..metrics import format_table, label_shrunk
    from ..suites.runner import summarize

    summary = summarize(store, selected, exclude_unsupported)
    summary.metrics = label_shrunk(summary.metrics, shrink)
    names = {t.name for t in selected}
    records = [r for r in store.records.values() if r.task in names]
    timed = sum(1 for r in records if r.verdict and r.verdict.get("speedup") is not None)
    failures = failure_groups(records)
    if as_json:
        print(json.dumps({"suite": suite, "candidates": candidates, "results_file": str(out), "wall_s": wall,
                          "interrupted": interrupted, "timed_tasks": timed, "shrink": shrink,
                          "metrics": [m.__dict__ for m in summary.metrics],
                          "not_judged": [o.__dict__ for o in summary.not_judged],
                          "failures": {kind: [{"task": t, "reason": r, **({"hung_at": h} if h else {})}
                                              for t, r, h in items]
                                       for kind, items in failures.items()},
                          "rejudged": [{"task": t, "why": w} for t, w in rejudged],
                          "results": [r.__dict__ for r in store.records.values()],
                          "unreadable_files": problems}, indent=2, default=str))
    else:
        if not timed:  # fast_p of untimed tasks is execution accuracy again (fast_0) or 0: noise
            summary.metrics = [m for m in summary.metrics if not m.name.startswith("fast_")]
        if shrink is not None:
            console.print(f"shrunk: judged at problem sizes shrunk to about {shrink:g} of their bytes (--shrink); "
                          "speedups are of those sizes", markup=False, highlight=False)
        console.print(format_table(summary), markup=False, highlight=False, soft_wrap=True)
        if not timed:
            console.print("nothing was timed (--no-perf, or the CPU interpreter): no speedups, no fast_p")
        print_failures(failures)
        console.print(f"results: {out}  ({len(store.records)} tasks recorded, {wall:.0f} s)")


def failure_groups(records) -> dict[str, list[tuple[str, str, list[str]]]]:
    """{failure kind: [(task, first line of the reason, where it hung)]} for every task that did
    not pass, judged or not (missing, unsupported): the kind is the verdict's own; where it hung
    (a timeout's innermost frames in the candidate's file) is [] for the other kinds."""
    from ..judge.common.verdict import hang_stack

    groups: dict[str, list[tuple[str, str, list[str]]]] = {}
    for r in sorted(records, key=lambda r: r.task):
        verdict = r.verdict or {}
        if r.status == "judged" and verdict.get("stage") == "passed":
            continue
        if r.status == "judged":
            kind = verdict["kind"]
        else:
            kind = r.status
        reason = (r.reason or verdict.get("reason") or "").strip().splitlines()
        hung = (hang_stack(verdict.get("log_tail") or "", verdict.get("candidate") or "", max_frames=3)
                if kind == "timeout" else [])
        groups.setdefault(kind, []).append((r.task, reason[0] if reason else "", hung))
    return dict(sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])))


def print_failures(groups: dict[str, list[tuple[str, str, list[str]]]], limit: int = 200) -> None:
    if not groups:
        return
    total = sum(len(v) for v in groups.values())
    console.print(f"\nfailures ({plural(total, 'task')}, by kind; full reasons in the results file):", highlight=False)
    for kind, items in groups.items():
        console.print(f"  {kind} ({len(items)}):", highlight=False)
        for task, reason, hung in items[:limit]:
            console.print(f"    {task}: {reason[:300]}", markup=False, highlight=False, soft_wrap=True)
            for frame in hung:  # where a timed-out candidate was stopped, innermost first
                console.print(f"      hung at {frame.strip()}", markup=False, highlight=False, soft_wrap=True)
        if len(items) > limit:
            console.print(f"    ... and {len(items) - limit} more", highlight=False)


__all__ = ["judge_suite_command", "EXIT_USAGE"]
