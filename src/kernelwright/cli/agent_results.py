"""What a finished (or stopped) agent run prints: each task's result with its timings, why its
runs stopped, and the sentences of a run stopped by the model's outage or by Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..agent.memory import Mode
from ..agent.scaling import BEST_OF_K
from .usage import clip, plural


def print_gpu_notes(console: Console, judge: dict) -> None:
    """The GPUs the judge took out of the run, and the last one it kept though a check failed
    there (the judge report's `out_of_service` and `suspect_gpus`: judge/coordinator/health.py)."""
    for gone in judge.get("out_of_service", ()):
        console.print(f"[yellow]out of service:[/] {escape(gone['device'])}: {escape(gone['why'])}", soft_wrap=True)
    for kept in judge.get("suspect_gpus", ()):
        console.print(f"[yellow]suspect GPU (the last one, kept):[/] {escape(kept['device'])}: "
                      f"{escape(kept['why'])}", soft_wrap=True)


def outage_message(store, spec, outage: str, verified: bool) -> str:
    """What a run that the model stopped answering did, and how to finish it."""
    when = ("To call the model for what the cache does not hold, finish the run without --offline"
            if "LLMCacheMissError" in outage else "Once the model answers again, finish the run")
    return (f"the model stopped answering ({outage[:300]}); the task-runs waiting for it stopped without "
            f"spending their remaining iterations, and {verified_so_far(store.run_dir, verified)}. "
            f"{when} with: kernelwright {spec.command} --resume {store.run_dir}")


def verified_so_far(run_dir: Path, verified: bool) -> str:
    """Where a stopped run's verified kernels are, or that there are none yet (best/ is empty)."""
    return f"the best kernels so far are in {run_dir / 'best'}" if verified else "nothing was verified yet"


def interrupted_message(command: str, run_dir: Path, verified: bool) -> str:
    """What Ctrl-C leaves: where the verified kernels are, or that there are none yet, and how to
    continue."""
    return (f"[yellow]interrupted:[/] {escape(verified_so_far(run_dir, verified))}; continue with kernelwright "
            f"{command} --resume {escape(str(run_dir))}")


def jsonable(result) -> dict[str, Any]:
    from dataclasses import asdict

    return dict(asdict(result), improved=result.improved)


def print_result(console: Console, store, spec, x) -> None:
    best = x.best
    head = f"[bold]{escape(x.task)}[/]: "
    if best is None:
        near = x.best_unverified
        # a verdict the judge could not decide is shown whole: it says what the machine lacks
        why = (near["reason"] if near.get("stage") == "judge_error" else clip(near["reason"])) if near else ""
        console.print(head + "[red]no verified kernel[/]" + (f" (closest: {escape(near['kind'])} - {escape(why)})"
                                                            if near else ""), highlight=False, soft_wrap=True)
    else:
        sp = best.get("speedup")
        ci = best.get("speedup_ci95")
        speed = (f"speedup {sp:.3f}x" + (f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else "")) if sp is not None \
            else "speed not measured (CPU interpreter)"
        console.print(head + f"[green]passed[/], {speed}, attempt {best['index']} of run {best['run']} ({best['mode']})",
                      highlight=False)
        if best.get("timings"):
            table = Table("shape", "reference ms", "kernel ms", "speedup", "95% CI")
            for t in best["timings"]:
                ci_t = t.get("ci95")
                table.add_row(escape(t["label"]), f"{t['ref_ms']:.4g}" if t["ref_ms"] else "-",
                              f"{t['cand_ms']:.4g}" if t["cand_ms"] else "-",
                              f"{t['speedup']:.3f}" if t["speedup"] else "-",
                              f"{ci_t[0]:.3f}-{ci_t[1]:.3f}" if ci_t else "-")
            console.print(table)
        console.print(f"best kernel: {escape(str(store.run_dir / 'best' / (x.task + '.py')))}")
    if spec.command == "optimize":
        if x.given_speedup is None:
            given = [a for a in store.attempts(x.task) if a.mode == Mode.GIVEN]
            why = ("correct, but not timed" if given and given[0].passed else
                   f"not verified ({given[0].kind}: {given[0].reason[:160]})" if given else "not judged")
            fixed = best is not None and given and not given[0].passed
            console.print(f"your kernel: {escape(why)}; " + ("the kernel above is a verified fix (--fix-start)"
                                                             if fixed else "nothing to compare against"),
                          highlight=False)
        elif x.improved:
            console.print(f"faster than your kernel ({x.given_speedup:.3f}x against the reference)")
        else:
            console.print(f"[yellow]no kernel faster than yours[/] ({x.given_speedup:.3f}x against the reference) was found")
    for reason in sorted(set(x.ended.values())):  # why the run stopped (before --iterations, often)
        runs = sorted(r for r, why in x.ended.items() if why == reason)
        console.print(f"stopped: {escape(reason)}" + (f" (runs {', '.join(runs)})" if x.runs > 1 else ""),
                      highlight=False)
    best_of = x.pass_at_k_kind == BEST_OF_K  # --search evolve: the runs are not independent samples
    pk = ", ".join(f"{'best-of-' if best_of else 'pass@'}{k} {v:.2f}" for k, v in x.pass_at_k.items())
    if best_of:
        pk += " (--search evolve: the runs share an archive, so best-of-k, not pass@k)"
    console.print(f"{plural(x.attempts, 'attempt')} over {plural(x.runs, 'run')}, {pk}; LLM calls {x.llm_calls}, tokens {x.tokens}, "
                  f"cost ${x.cost_usd:.4f}", highlight=False)
