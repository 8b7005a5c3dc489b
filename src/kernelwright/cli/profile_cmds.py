"""`kernelwright profile`: judge one candidate with timing on and print the judge's profile of it
and of the reference (launches, occupancy, fractions of peak, the diagnoses) instead of the eval
table. The judging is eval's (the same pool and options); only what is printed differs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from . import app
from .judge_cmds import (
    CandidateArg,
    SuitePathOpt,
    TaskOpt,
    TaskSuiteOpt,
    candidate_or_exit,
    console,
    device_usage_errors,
    judged_task_or_exit,
    verdict_exit,
)
from .options import Command, JudgeBaseSeedOpt, JudgeSeedsOpt, SandboxOpt, TimeoutScaleOpt, judge_options
from .profile_view import profile_table
from .usage import err_console, usage_error

# what the command says when the judge gave no profile under the interpreter (the judge's own
# sentence, where it makes one, is printed instead)
INTERPRETER_SKIPPED = "no profile under the interpreter (TRITON_INTERPRET=1): profiling needs a GPU"
LEVELS = ("basic", "full")


def judge_for_profile(task, candidate: Path, device: str, level: str, **judge_flags: Any):
    """The verdict of `candidate`, judged as eval judges it, with timing and the profile at
    `level` on a GPU; under the CPU interpreter nothing is timed (a profile needs a GPU) and the
    candidate is only checked. The tests replace this function with a canned verdict."""
    from ..judge import JudgePool, detect_backend

    backend, _ = detect_backend(device)
    if backend == "cpu":
        options = judge_options(perf=False, **judge_flags)
    else:
        # JudgeOptions.profile: "off" | "basic" | "full" (issue 30, the judge's side)
        options = judge_options(perf=True, profile=level, **judge_flags)
    with JudgePool(device, workers=1, options=options) as pool:
        return pool.judge(task, candidate), backend


def verdict_profile(verdict, backend: str) -> dict[str, Any]:
    """The verdict's profile; under the interpreter, the skipped sentence when the judge made none."""
    profile = getattr(verdict, "profile", None) or {}
    if not profile and backend == "cpu" and verdict.passed:
        return {"skipped": INTERPRETER_SKIPPED}
    return dict(profile)


@app.command("profile", cls=Command, short_help="Profile one candidate and the reference (launches, diagnosis).")
def profile_command(
    candidate: CandidateArg,
    task: TaskOpt,
    suite: TaskSuiteOpt = "builtin",
    path: SuitePathOpt = None,
    device: str = typer.Option("auto", help="auto | cpu (Triton interpreter: no profile) | cuda | hip"),
    level: str = typer.Option("basic", "--profile",
                              help="basic: launches, occupancy, fractions of peak (about a second); full: "
                                   "also Nsight Compute / rocprofv3 counters (tens of seconds)."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print the profile and the verdict's kind, stage and reason as JSON."),
    judge_seeds: JudgeSeedsOpt = 3,
    judge_base_seed: JudgeBaseSeedOpt = None,
    baseline: str = typer.Option("torch", help="Profile against the task's 'torch' or 'triton' reference."),
    timeout_scale: TimeoutScaleOpt = 1.0,
    sandbox: SandboxOpt = "auto",
) -> None:
    """Judge one candidate with timing on, and print the judge's profile of it and of the
    reference on one perf case: per side its time, the bytes it must move and the fraction of
    peak bandwidth (and FLOP/s), each launch of its own kernels (grid, warps, stages, registers,
    spills, shared memory, occupancy, time), and the diagnoses (memory-bound, grid too small,
    register spills, ...). What the candidate's process reports of its own launches is labelled
    so. docs/profile.md says where each number comes from.

    Exit status: 0 profiled (under the CPU interpreter: checked, with the note that a profile
    needs a GPU), 1 failed a stage (its reason is printed; a failing kernel is not profiled),
    2 usage error, 3 the judge could not decide.
    """
    candidate_or_exit(candidate)
    if level not in LEVELS:
        raise usage_error(f"--profile must be one of {', '.join(LEVELS)} (not {level!r})")
    task_obj = judged_task_or_exit(task, suite, path, baseline)
    flags = {"judge_seeds": judge_seeds, "judge_base_seed": judge_base_seed, "timeout_scale": timeout_scale,
             "baseline": baseline, "sandbox": sandbox}
    with device_usage_errors():
        if as_json:
            verdict, backend = judge_for_profile(task_obj, candidate, device, level, **flags)
        else:
            with console.status(f"judging and profiling {escape(candidate.name)} on task {escape(task_obj.name)}"):
                verdict, backend = judge_for_profile(task_obj, candidate, device, level, **flags)
    profile = verdict_profile(verdict, backend)
    if as_json:
        print(json.dumps({"task": verdict.task, "candidate": verdict.candidate, "passed": verdict.passed,
                          "kind": str(verdict.kind), "stage": verdict.stage, "reason": verdict.reason,
                          "speedup": verdict.speedup, "profile": profile}, indent=2))
    else:
        print_profile(verdict, profile, backend)
    raise verdict_exit(verdict)


def print_profile(verdict, profile: dict[str, Any], backend: str) -> None:
    """The headline (the verdict, the speedup), then the profile's tables, or why there is none."""
    device = verdict.device.get("name", "") if isinstance(verdict.device, dict) else ""
    console.print(f"[bold]{escape(verdict.task)}[/] <- {escape(verdict.candidate)}  [dim]{escape(device)}[/]",
                  highlight=False)
    if not verdict.passed:
        console.print(f"[red]verdict: failed at {escape(verdict.stage)} ({escape(str(verdict.kind))})[/] - "
                      f"{escape(verdict.reason)}", highlight=False, soft_wrap=True)
        err_console.print("[dim]a kernel that fails is not profiled: `kernelwright eval` shows the whole verdict[/]")
        return
    line = "[green]verdict: passed[/]"
    if verdict.speedup is not None:
        line += f"  speedup vs {escape(verdict.baseline)}: [bold]{verdict.speedup:.3f}x[/]"
    console.print(line, highlight=False)
    console.print(profile_table(profile))
    if backend == "cpu":
        err_console.print("[dim]note: the candidate was checked under the CPU interpreter; run the command on a "
                          "GPU machine for its profile[/]")
