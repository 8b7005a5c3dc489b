"""`kernelwright tasks` and `kernelwright eval`: list tasks, judge one candidate file."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from . import app
from .options import (
    Command,
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
from .usage import plural
from .usage import (  # noqa: F401
    EXIT_FAIL,
    EXIT_JUDGE_ERROR,
    EXIT_PASS,
    EXIT_USAGE,
    candidate_problem,
    err_console,
    usage_error,
)

console = Console()


SUITE_HELP = "builtin | tritonbench-revised | rocm | kernelbench | tritonbench-t"
PATH_HELP = ("The benchmark's checkout: GEAK-eval (tritonbench-revised, rocm), KernelBench (kernelbench) "
             "or thunlp/TritonBench (tritonbench-t).")
# what eval and profile are given: the candidate file and the task it is judged on
CandidateArg = Annotated[Path, typer.Argument(help="Candidate Python file defining the task's entry point.")]
TaskOpt = Annotated[str, typer.Option("--task", "-t",
                                      help="Task name (see `kernelwright tasks`) or path to a task file.")]
TaskSuiteOpt = Annotated[str, typer.Option("--suite", "-s", help=f"Suite of --task: {SUITE_HELP}.")]
SuitePathOpt = Annotated[Optional[Path], typer.Option("--path", "-p", help=PATH_HELP)]


def close_matches(name: str, names) -> str:
    """' (did you mean a, b?)' for a mistyped name, else ''."""
    import difflib

    near = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(near)}?)" if near else ""


def load_task_or_exit(name_or_path: str, suite: str = "builtin", path: Optional[Path] = None):
    """A built-in task or task file; with another suite, a task of the checkout at `path`."""
    from ..suites.runner import SuiteUsageError, check_suite_source, load_suite_tasks, suite_task_names
    from ..tasks import TaskFileError, TaskNotFound, resolve_task

    if suite != "builtin":
        try:
            check_suite_source(suite, path)
            known = suite_task_names(suite, path)  # a mistyped name: answered before the suite loads
            if known is not None and name_or_path not in known:
                raise usage_error(f"no task {name_or_path!r} in {suite}{close_matches(name_or_path, known)} "
                                  f"({len(known)} tasks; `kernelwright tasks --suite {suite} --path ...` lists them)")
            tasks, _ = load_suite_tasks(suite, path)
        except SuiteUsageError as exc:
            raise usage_error(str(exc)) from None
        for task in tasks:
            if task.name == name_or_path:
                return task
        raise usage_error(f"no task {name_or_path!r} in {suite}{close_matches(name_or_path, [t.name for t in tasks])} "
                          f"({len(tasks)} tasks; `kernelwright tasks --suite {suite} --path ...` lists them)")
    try:
        return resolve_task(name_or_path)
    except (TaskNotFound, TaskFileError) as exc:
        raise usage_error(str(exc)) from None


def candidate_or_exit(candidate: Path) -> None:
    """A usage error (exit 2) naming why `candidate` cannot be a candidate file (eval, profile)."""
    problem = candidate_problem(candidate)
    if problem is not None:
        raise usage_error(problem)


def judged_task_or_exit(name_or_path: str, suite: str, path: Optional[Path], baseline: str,
                        shrink: Optional[float] = None):
    """The task a candidate is judged on (eval, profile): --baseline checked, the task loaded
    (`load_task_or_exit`) and shrunk by --shrink; a usage error (exit 2) for each of them."""
    if baseline not in ("torch", "triton"):
        raise usage_error("--baseline must be 'torch' or 'triton'")
    task = load_task_or_exit(name_or_path, suite, path)
    try:
        (task,) = shrunk_tasks([task], shrink)
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if baseline == "triton" and task.triton_reference is None:
        raise usage_error(f"task {task.name} has no Triton reference; use --baseline torch")
    return task


@contextmanager
def device_usage_errors() -> Iterator[None]:
    """A device that is not there (DeviceUnavailable) as a usage error (exit 2)."""
    from ..judge import DeviceUnavailable

    try:
        yield
    except DeviceUnavailable as exc:
        raise usage_error(str(exc)) from None


def verdict_exit(verdict) -> typer.Exit:
    """The exit to raise for a verdict: 0 passed, 3 the judge could not decide, 1 failed a stage."""
    if verdict.passed:
        return typer.Exit(EXIT_PASS)
    return typer.Exit(EXIT_JUDGE_ERROR if verdict.stage == "judge_error" else EXIT_FAIL)


tasks_app = typer.Typer(invoke_without_command=True, no_args_is_help=False,
                        context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(tasks_app, name="tasks", short_help="List the tasks of a suite (tasks show NAME: one task).")


@tasks_app.callback()
def tasks_command(
    ctx: typer.Context,
    suite: str = typer.Option("builtin", "--suite", "-s", help=SUITE_HELP),
    path: SuitePathOpt = None,
    tasks: TasksOpt = None,
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
) -> None:
    """List the tasks of a suite, and every file that could not become a task, with the reason.
    `kernelwright tasks show NAME` prints one task: its instruction, entry point and cases.

    Exit status: 0 listed (files of a benchmark that could not become tasks are reported, on
    stderr and under "errors" in --json, and do not change it), 1 a built-in task file is broken,
    2 usage error.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ..suites.runner import SuiteUsageError, check_suite_source, check_task_names, describe_unreadable, load_suite_tasks
    from ..tasks import TaskFileError, builtin_task_paths
    from ..tasks.registry import load_builtin_task

    names = parse_tasks(tasks)
    try:  # a mistyped name: answered before any task loads
        check_suite_source(suite, path)
        check_task_names(suite, path, names)
    except SuiteUsageError as exc:
        raise usage_error(str(exc)) from None
    rows, problems = [], []
    if suite == "builtin":  # one by one, so that a broken task file does not hide the others
        for name, file in builtin_task_paths().items():
            try:
                rows.append(load_builtin_task(file).summary())
            except TaskFileError as exc:
                problems.append(str(exc))
    else:
        try:
            suite_tasks, unreadable = load_suite_tasks(suite, path)
        except SuiteUsageError as exc:
            raise usage_error(str(exc)) from None
        rows = [t.summary() for t in suite_tasks]
        problems = [describe_unreadable(file, reason) for file, reason in unreadable]
    if names:  # only these (an unknown name is a usage error), in the suite's order
        from types import SimpleNamespace

        from ..suites.runner import select_tasks

        try:
            chosen = {t.name for t in select_tasks([SimpleNamespace(name=r["name"]) for r in rows], names, suite, path)}
        except SuiteUsageError as exc:
            raise usage_error(str(exc)) from None
        rows = [r for r in rows if r["name"] in chosen]
    if as_json:
        print(json.dumps({"suite": suite, "tasks": rows, "errors": problems}, indent=2))
    else:
        table = Table(title=f"{escape(suite)} tasks ({len(rows)})", box=box.SIMPLE_HEAD,
                      caption="cases: visible/hidden/perf · kernelwright tasks show NAME: instruction, cases")
        widest = max((len(r["name"]) for r in rows), default=4)
        table.add_column("name", no_wrap=True, min_width=widest)  # never cut: it is what you type
        table.add_column("entry point", overflow="fold", ratio=1)
        table.add_column("cases", no_wrap=True)
        table.add_column("level", no_wrap=True, justify="right")
        table.add_column("triton ref", no_wrap=True)
        for r in rows:
            c = r["cases"]
            # "torch.Tensor" is most of a signature's width at 80 columns; `tasks show` has it whole
            entry = r["entry_point"].replace("torch.", "")
            table.add_row(escape(r["name"]), escape(entry), f"{c['visible']}/{c['hidden']}/{c['perf']}",
                          str(r["difficulty"] or "-"), "yes" if r["triton_reference"] else "-")
        console.print(table)
        cannot = [r for r in rows if r.get("unsupported")]
        if cannot:  # listed, and judged as unsupported until what they need is installed
            err_console.print(f"[yellow]{plural(len(cannot), 'task')} cannot run here:[/]")
        for r in cannot:
            err_console.print(f"[yellow]  {escape(r['name'])}: {escape(r['unsupported'])}[/]", soft_wrap=True)
        if problems:
            err_console.print(f"[yellow]{len(problems)} file(s) could not become tasks:[/]")
        for p in problems:
            err_console.print(f"[yellow]  {escape(p)}[/]", soft_wrap=True)
    if problems and suite == "builtin":
        raise typer.Exit(EXIT_FAIL)


@tasks_app.command("show")
def tasks_show_command(
    name: str = typer.Argument(..., help="Task name (see `kernelwright tasks`) or path to a task file."),
    suite: str = typer.Option("builtin", "--suite", "-s", help=SUITE_HELP),
    path: SuitePathOpt = None,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """One task: its instruction (what a candidate must do), entry point, cases and tolerances.
    Hidden correctness cases are counted, not shown.

    Exit status: 0 shown, 2 usage error (unknown task, bad task file).
    """
    task = load_task_or_exit(name, suite, path)
    # the tolerances in force for every output dtype the cases use: the task's own, else the defaults
    dtypes = sorted({c.dtype for c in task.correctness_cases + task.perf_cases if c.dtype != "any"} | set(task.tolerances))
    effective = {d: task.tolerance_for(d).as_dict() for d in dtypes}
    view = {**task.summary(), **task.public_view(), "tolerances": effective,
            "notes": list(task.notes), "requires_backend": task.requires_backend}
    if as_json:
        print(json.dumps(view, indent=2, default=str))
        return
    console.print(f"[bold]{escape(task.name)}[/]  [dim]suite {escape(task.suite)} · {escape(str(task.source_path))}[/]",
                  highlight=False, soft_wrap=True)
    console.print(f"[bold]entry point:[/] {escape(task.entry_point.signature)}", highlight=False, soft_wrap=True)
    if task.difficulty:
        console.print(f"[bold]difficulty:[/] {escape(str(task.difficulty))}", highlight=False)
    console.print("[bold]instruction:[/]")
    console.print(Text(task.instruction.strip()), soft_wrap=True)
    for title, cases in (("visible cases", task.visible_cases), ("performance cases", task.perf_cases)):
        console.print(f"[bold]{title} ({len(cases)}):[/] " + (", ".join(escape(c.label) for c in cases) or "-"),
                      highlight=False, soft_wrap=True)
    console.print(f"[bold]hidden cases:[/] {len(task.hidden_cases)} (not shown)", highlight=False)
    if effective:
        tols = ", ".join(f"{k}: atol {v['atol']:g} rtol {v['rtol']:g}" for k, v in effective.items())
        console.print(f"[bold]tolerances:[/] {escape(tols)}", highlight=False, soft_wrap=True)
    console.print(f"[bold]triton reference:[/] {escape(str(task.triton_reference or '-'))}", highlight=False,
                  soft_wrap=True)
    if task.unsupported:
        console.print(f"[yellow]cannot run here: {escape(task.unsupported)}[/]", soft_wrap=True)
    if task.requires_backend:
        console.print(f"[yellow]needs {escape(task.requires_backend)}: {escape(task.requires_reason)}[/]")
    for note in task.notes:
        console.print(f"[dim]note: {escape(note)}[/]", soft_wrap=True)


@app.command("eval", cls=Command, short_help="Judge one candidate file.")
def eval_command(
    candidate: CandidateArg,
    task: TaskOpt,
    suite: TaskSuiteOpt = "builtin",
    path: SuitePathOpt = None,
    device: str = typer.Option("auto", help="auto | cpu (Triton interpreter) | cuda | hip"),
    as_json: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    judge_seeds: JudgeSeedsOpt = 3,
    judge_base_seed: JudgeBaseSeedOpt = None,
    perf: Optional[bool] = typer.Option(None, "--perf/--no-perf",
                                        help="Measure speed (default: on GPUs, off under the interpreter)."),
    baseline: str = typer.Option("torch", help="Speedup against the task's 'torch' or 'triton' reference."),
    blocks: int = typer.Option(10, min=2, max=200, help="Interleaved timing blocks per side and perf case."),
    timeout_scale: TimeoutScaleOpt = 1.0,
    workers_per_device: WorkersPerDeviceOpt = 1,
    sandbox: SandboxOpt = "auto",
    force: bool = typer.Option(False, "--force",
                               help="With --perf under the CPU interpreter: time anyway (refused by default)."),
    profile: ProfileOpt = "basic",
    no_profile: NoProfileOpt = False,
    shrink: ShrinkOpt = None,
) -> None:
    """Judge one candidate: static -> call -> correctness -> performance.

    Exit status: 0 passed (the headline says if cases were left unchecked), 1 failed a stage,
    2 usage error (also a task file that is rejected, e.g. its reference fails on its own
    cases), 3 the judge could not decide (the reference failed while judging, a worker was lost).
    """
    from ..judge import JudgePool, detect_backend

    candidate_or_exit(candidate)
    profile = profile_level(profile, no_profile)
    task_obj = judged_task_or_exit(task, suite, path, baseline, shrink)
    options = judge_options(judge_seeds=judge_seeds, judge_base_seed=judge_base_seed, perf=perf,
                            timeout_scale=timeout_scale, baseline=baseline, perf_blocks=blocks,
                            sandbox=sandbox, profile=profile)
    with device_usage_errors():
        backend, _ = detect_backend(device)
    note = ""
    if perf and backend == "cpu":
        estimate = interpreter_perf_estimate(task_obj, blocks)
        if not force:
            raise usage_error(f"--perf under Triton's CPU interpreter refused: {estimate}. Timing the interpreter "
                              "says nothing about the kernel's speed on a GPU; run it on a GPU machine, or add "
                              "--force to time it here anyway")
        calls, low, high = interpreter_perf_cost(task_obj, blocks)
        note = f", timing >= {calls} interpreted calls, about {low:.0f}-{high:.0f} min"
        if as_json:
            err_console.print(f"[yellow]--force:[/] {escape(estimate)}", highlight=False)
    with device_usage_errors(), JudgePool(device, workers=1, options=options,
                                          workers_per_device=workers_per_device) as pool:
        if as_json:
            verdict = pool.judge(task_obj, candidate)
        else:
            verdict = judge_with_status(pool, task_obj, candidate, note)
    unchecked = unchecked_cases(verdict)
    if as_json:
        data = verdict.to_dict()
        data["unchecked"] = unchecked
        data["all_cases_checked"] = not unchecked
        print(json.dumps(data, indent=2))
    else:
        print_verdict(verdict)
    raise verdict_exit(verdict)


# What one perf case costs each side when a call is slower than a timing block (always, under the
# interpreter at perf sizes): the perf-size check, a warm-up call, and two calls per block.
INTERPRETED_CALL_S = (1.0, 30.0)  # an interpreted kernel at perf sizes: softmax 8192x8192 took 25 s
# The range is the same for every task on purpose: what a task file tells cheaply (its perf cases'
# bytes, from task.cost) does not predict an interpreted call. The interpreter's time goes with
# the candidate's grid and inner-loop trips (its own block sizes), not with bytes: on a 2-core
# CPU one call of the Triton reference took 2 s for vector_add 16777216 float32 (192 MiB), 5.6 s
# for softmax 4096x4096 float32 (128 MiB) and 373 s for matmul 2048^3 float32 (48 MiB, the
# fewest bytes of the three). Scaling by bytes would call matmul the cheapest.


def interpreter_perf_cost(task, blocks: int, max_cases: int | None = None) -> tuple[int, float, float]:
    """The least work `--perf` costs under the interpreter: (calls, minutes low, minutes high);
    `max_cases`: --max-perf-cases, the shapes timed at most."""
    calls = perf_cases_timed(task, max_cases) * 2 * (2 * blocks + 2)
    low, high = (calls * s / 60 for s in INTERPRETED_CALL_S)
    return calls, low, high


def perf_cases_timed(task, max_cases: int | None = None) -> int:
    return len(task.perf_cases) if max_cases is None else min(max_cases, len(task.perf_cases))


def interpreter_perf_estimate(task, blocks: int) -> str:
    calls, low, high = interpreter_perf_cost(task, blocks)
    return (f"task {task.name} has {len(task.perf_cases)} perf case(s): at least {calls} calls at perf sizes "
            f"({2 * blocks + 2} per side and case with --blocks {blocks}), at the {INTERPRETED_CALL_S[0]:g}-"
            f"{INTERPRETED_CALL_S[1]:g} s an interpreted call takes at these sizes about {low:.0f}-{high:.0f} min")


def judge_with_status(pool, task, candidate: Path, note: str = ""):
    """Judge with a spinner that shows the elapsed time (and what the wait is for)."""
    import threading
    import time

    started = time.monotonic()
    label = f"judging {escape(candidate.name)} on task {escape(task.name)} ({pool.backend}{escape(note)})"
    with console.status(label) as status:
        done = threading.Event()

        def tick() -> None:
            while not done.wait(1.0):
                elapsed = int(time.monotonic() - started)
                status.update(f"{label}  {elapsed // 60}:{elapsed % 60:02d}")

        ticker = threading.Thread(target=tick, daemon=True)
        ticker.start()
        try:
            return pool.judge(task, candidate)
        finally:
            done.set()


def unchecked_cases(verdict) -> list[dict]:
    """Cases the verdict left unchecked (ok is None: skipped, e.g. bfloat16 under the interpreter)."""
    return [{"kind": c.kind, "label": c.label, "reason": c.reason} for c in verdict.cases
            if c.ok is None and c.reason.startswith("skipped")]


def print_verdict(verdict) -> None:
    ok = verdict.passed
    colour = "green" if ok else "red"
    device = verdict.device.get("name", "")
    console.print(f"[bold]{escape(verdict.task)}[/] <- {escape(verdict.candidate)}  [dim]{escape(device)}[/]")
    if getattr(verdict, "shrink", None) is not None:
        console.print(f"  [yellow]shrunk:[/] judged at problem sizes shrunk to about {verdict.shrink:g} of their bytes "
                      "(--shrink); a speedup is of those sizes", highlight=False)
    stages = ["static", "call", "correctness", "performance"]
    failed_at = stages.index(verdict.stage) if verdict.stage in stages else None
    measured = any(c.kind == "performance" and c.ok for c in verdict.cases)
    marks = []
    for i, stage in enumerate(stages):
        if stage == "performance" and ok and not measured:
            marks.append(f"[dim]{stage} not measured[/]")
        elif ok or (failed_at is not None and i < failed_at):
            marks.append(f"[green]{stage} ok[/]")
        elif i == failed_at:
            marks.append(f"[red]{stage} FAILED[/]")
        else:
            marks.append(f"[dim]{stage} -[/]")
    console.print("  " + "  ".join(marks))
    unchecked = unchecked_cases(verdict)
    headline = verdict.stage
    if unchecked and ok:  # a failure's headline is the failure; the skipped cases are listed below
        kinds = sorted({c["kind"] for c in unchecked})
        total = sum(1 for c in verdict.cases if c.kind in kinds)
        headline += f", {len(unchecked)} of {total} {'/'.join(kinds)} case(s) not checked"
        colour = "yellow"
    # a plain pass says "passed" once; a reason with more to say (notes, a failure) follows the headline
    tail = "" if verdict.reason == verdict.stage else f" - {escape(verdict.reason)}"
    console.print(f"[{colour}]verdict: {escape(headline)}[/]{tail}", highlight=False)
    perf_cases = [c for c in verdict.cases if c.kind == "performance" and c.speedup is not None]
    if perf_cases:
        table = Table(title="performance (median of block medians, 95% CI)")
        for col in ("case", "reference ms", "candidate ms", "speedup", "95% CI", "roofline ms"):
            table.add_column(col, justify="right" if col != "case" else "left")
        for c in perf_cases:
            table.add_row(c.label, f"{c.ref_ms:.4f}", f"{c.cand_ms:.4f}", f"{c.speedup:.3f}x",
                          f"[{c.ci95[0]:.3f}, {c.ci95[1]:.3f}]",
                          f"{c.roofline_ms:.4f}" if c.roofline_ms else "-")
        console.print(table)
    if verdict.speedup is not None:
        lo, hi = verdict.speedup_ci95
        console.print(f"speedup vs {verdict.baseline}: [bold]{verdict.speedup:.3f}x[/] (mean over cases, "
                      f"95% CI [{lo:.3f}, {hi:.3f}]), geometric mean {verdict.speedup_geomean:.3f}x")
    print_hang_stack(verdict)
    skipped = [c for c in verdict.cases if c.ok is None]
    for c in skipped:
        console.print(f"[yellow]{c.kind} case {escape(c.label)} {escape(c.reason)}[/]")
    if verdict.detail and not ok:
        console.print(Text(verdict.detail.strip()[-1500:], style="dim"))


def print_hang_stack(verdict) -> None:
    """A timeout's stack: where the candidate was when it was stopped (its own frames; the whole
    dump is in --json's log_tail)."""
    from ..judge.common.verdict import hang_stack

    if verdict.kind != "timeout":
        return
    frames = hang_stack(verdict.log_tail, verdict.candidate)
    if frames:
        console.print("where it hung (most recent call first; --json's log_tail has every thread):", highlight=False)
        for frame in frames:
            console.print(Text(frame, style="dim"), soft_wrap=True)
