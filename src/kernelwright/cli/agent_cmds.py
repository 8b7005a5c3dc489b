"""`kernelwright generate` and `kernelwright optimize`: the agent on one task.

    kernelwright generate "INSTRUCTION" --entry "softmax(x)" --reference ref.py --model M
    kernelwright generate --task softmax --model M
    kernelwright optimize my_kernel.py --task softmax --model M
    kernelwright generate --resume RUN_DIR

Both write a run directory (see docs/agent.md) and print a summary. Exit status: 0 a verified
kernel was found (optimize: one faster than yours), 1 none was found, 2 usage error, 3 the
judge could not decide (the task's own reference failed), 130 interrupted (resume with
--resume RUN_DIR).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import app
from .llm_cmds import BaseUrlOpt, ConfigOpt, ModelOpt, NoCacheOpt, OfflineOpt

EXIT_FOUND, EXIT_NONE, EXIT_USAGE, EXIT_JUDGE_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

RunsOpt = Annotated[int, typer.Option("--runs", min=1, help="independent runs (parallel scaling; pass@k over them)")]
ItersOpt = Annotated[int, typer.Option("--iterations", "-n", min=1, help="candidates per run (sequential scaling)")]
DebugOpt = Annotated[int, typer.Option("--max-debug-attempts", min=1,
                                       help="failed fixes in one line before a fresh approach (the debugging trap)")]
TempOpt = Annotated[float, typer.Option("--temperature", min=0.0, max=2.0, help="sampling temperature")]
SeedOpt = Annotated[Optional[int], typer.Option("--seed", help="base sampling seed (run r uses seed + r); default random")]
CostOpt = Annotated[Optional[float], typer.Option("--max-cost", help="USD for the whole run")]
TokensOpt = Annotated[Optional[int], typer.Option("--max-tokens", help="tokens for the whole run")]
TimeOpt = Annotated[Optional[float], typer.Option("--time-limit", help="seconds for the whole run")]
TaskCostOpt = Annotated[Optional[float], typer.Option("--task-max-cost", help="USD per task")]
TaskTokensOpt = Annotated[Optional[int], typer.Option("--task-max-tokens", help="tokens per task")]
TaskTimeOpt = Annotated[Optional[float], typer.Option("--task-time-limit", help="seconds per task")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto | cpu (Triton interpreter) | cuda | hip")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", "-o", help="run directory (default kernelwright-runs/<task>-<time>)")]
ResumeOpt = Annotated[Optional[Path], typer.Option("--resume", help="continue the run in this directory")]
PromptsOpt = Annotated[Optional[Path], typer.Option("--prompts", help="folder of .j2 templates overriding the built-in prompts")]
CorpusOpt = Annotated[Optional[list[Path]], typer.Option(
    "--corpus", help="more 1-shot examples: a folder of .py files or TritonBench's train_crawl.json (repeatable)")]
OneShotOpt = Annotated[bool, typer.Option("--one-shot/--no-one-shot", help="a similar kernel in the prompt")]
KnowledgeOpt = Annotated[bool, typer.Option("--knowledge/--no-knowledge", help="the Triton guide and GPU specs in the prompt")]
OptimizerOpt = Annotated[bool, typer.Option("--optimizer/--no-optimizer", help="optimize correct kernels")]
ReflectOpt = Annotated[bool, typer.Option("--reflection/--no-reflection", help="analyse failures before fixing")]
SeedsOpt = Annotated[int, typer.Option("--judge-seeds", min=1, max=50, help="fresh seeds per correctness case")]
TuneFlagOpt = Annotated[bool, typer.Option("--tune/--no-tune", help="after the LLM iterations, sweep the best kernel's launch parameters (no LLM)")]
PerfOpt = Annotated[Optional[bool], typer.Option("--perf/--no-perf", help="time candidates (default: on GPUs, not under the CPU interpreter)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the summary as JSON")]
TaskOpt = Annotated[Optional[str], typer.Option("--task", "-t", help="task name, task file, or a suite's task (with --suite)")]
SuiteOpt = Annotated[str, typer.Option("--suite", "-s", help="suite of --task: builtin, tritonbench-revised, rocm, kernelbench, tritonbench-t")]
PathOpt = Annotated[Optional[Path], typer.Option("--path", "-p", help="the suite's checkout (for suites other than builtin)")]


def _error(message: str, as_json: bool, code: int = EXIT_USAGE) -> typer.Exit:
    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    if as_json:
        print(json.dumps({"error": message, "exit_code": code}))
    return typer.Exit(code)


def _default_out(name: str) -> Path:
    return Path("kernelwright-runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"


@app.command("generate")
def generate_command(
    instruction: Annotated[Optional[str], typer.Argument(help="what the kernel must compute (with --entry and --reference)")] = None,
    entry: Annotated[Optional[str], typer.Option("--entry", help='the function to write, e.g. "softmax(x)"')] = None,
    reference: Annotated[Optional[Path], typer.Option("--reference", help="PyTorch file defining the --entry function")] = None,
    tests: Annotated[Optional[Path], typer.Option("--tests", help="inputs: make_inputs(case, gen) + visible_cases, or get_inputs()")] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="task name (default: the entry's name)")] = None,
    task: TaskOpt = None, suite: SuiteOpt = "builtin", path: PathOpt = None,
    model: ModelOpt = None, base_url: BaseUrlOpt = None, no_cache: NoCacheOpt = False, offline: OfflineOpt = False,
    config_path: ConfigOpt = None, runs: RunsOpt = 1, iterations: ItersOpt = 10, max_debug_attempts: DebugOpt = 5,
    temperature: TempOpt = 1.0, seed: SeedOpt = None, max_cost: CostOpt = None, max_tokens: TokensOpt = None,
    time_limit: TimeOpt = None, task_max_cost: TaskCostOpt = None, task_max_tokens: TaskTokensOpt = None,
    task_time_limit: TaskTimeOpt = None, device: DeviceOpt = "auto", out: OutOpt = None, resume: ResumeOpt = None,
    prompts: PromptsOpt = None, corpus: CorpusOpt = None, one_shot: OneShotOpt = True, knowledge: KnowledgeOpt = True,
    optimizer: OptimizerOpt = True, reflection: ReflectOpt = True, judge_seeds: SeedsOpt = 3, perf: PerfOpt = None, tune: TuneFlagOpt = False, as_json: JsonOpt = False,
) -> None:
    """Write a Triton kernel with the agent: from your instruction and PyTorch reference, or for
    an existing task (--task). Writes the best verified kernel and a run directory.

    Exit status: 0 a verified kernel was found, 1 none, 2 usage error, 3 the judge could not
    decide, 130 interrupted (continue with --resume RUN_DIR).
    """
    options = dict(locals())
    _agent_command("generate", None, options)


@app.command("optimize")
def optimize_command(
    kernel: Annotated[Optional[Path], typer.Argument(help="your working Triton kernel (a file defining the task's entry point)")] = None,
    task: TaskOpt = None, suite: SuiteOpt = "builtin", path: PathOpt = None,
    model: ModelOpt = None, base_url: BaseUrlOpt = None, no_cache: NoCacheOpt = False, offline: OfflineOpt = False,
    config_path: ConfigOpt = None, runs: RunsOpt = 1, iterations: ItersOpt = 10, max_debug_attempts: DebugOpt = 5,
    temperature: TempOpt = 1.0, seed: SeedOpt = None, max_cost: CostOpt = None, max_tokens: TokensOpt = None,
    time_limit: TimeOpt = None, task_max_cost: TaskCostOpt = None, task_max_tokens: TaskTokensOpt = None,
    task_time_limit: TaskTimeOpt = None, device: DeviceOpt = "auto", out: OutOpt = None, resume: ResumeOpt = None,
    prompts: PromptsOpt = None, corpus: CorpusOpt = None, one_shot: OneShotOpt = True, knowledge: KnowledgeOpt = True,
    reflection: ReflectOpt = True, judge_seeds: SeedsOpt = 3, perf: PerfOpt = None, tune: TuneFlagOpt = False, as_json: JsonOpt = False,
) -> None:
    """Make your working Triton kernel faster: the agent starts from it and returns a faster
    verified kernel, or says that none was found.

    Exit status: 0 a faster verified kernel was found, 1 none, 2 usage error, 3 the judge could
    not decide (your kernel's task reference failed), 130 interrupted (--resume RUN_DIR).
    """
    options = dict(locals(), optimizer=True)
    _agent_command("optimize", kernel, options)


def _agent_command(command: str, kernel: Optional[Path], o: dict[str, Any]) -> None:
    from ..agent.app import RunSpec, new_seed, open_run
    from ..agent.budget import Limits
    from ..agent.loop import AgentSettings
    from ..agent.prompts import PromptError, PromptLibrary
    from ..store import StoreError

    as_json = o["as_json"]
    try:
        if o["resume"] is not None:
            store, spec = open_run(o["resume"], None, resume=True, command=command)
        else:
            model = _model(o)  # before anything is written: a run that cannot start leaves nothing behind
            task_ref, start_code = _task_and_start(command, kernel, o)
            settings = AgentSettings(
                iterations=o["iterations"], runs=o["runs"], max_debug_attempts=o["max_debug_attempts"],
                temperature=o["temperature"], seed=o["seed"] if o["seed"] is not None else new_seed(),
                one_shot=o["one_shot"], knowledge=o["knowledge"], reflection=o["reflection"], optimizer=o["optimizer"],
                tune=o["tune"])
            if o["prompts"] is not None:
                PromptLibrary(o["prompts"])  # fail now on a bad folder, not at the first prompt
            spec = RunSpec(command, (task_ref.ref,), model, settings,
                           Limits(o["max_cost"], o["max_tokens"], o["time_limit"]),
                           Limits(o["task_max_cost"], o["task_max_tokens"], o["task_time_limit"]),
                           {task_ref.name: start_code} if start_code is not None else {},
                           tuple(str(Path(p).expanduser().resolve()) for p in (o["corpus"] or [])),
                           str(Path(o["prompts"]).resolve()) if o["prompts"] else None, o["device"], o["judge_seeds"],
                           o["perf"], base_url=o["base_url"])
            out = o["out"] or o.get("_out") or _default_out(task_ref.name)
            store, spec = open_run(out, spec, resume=False)
    except (StoreError, PromptError, ValueError) as exc:
        raise _error(str(exc), as_json) from None
    _execute(store, spec, o, as_json)


def _model(o: dict[str, Any]) -> str:
    """The model's id, after checking that it can be reached as configured (key, URL): a run
    directory is created only for a run that can start."""
    from ..llm import LLMConfigError, parse_model
    from ..llm.settings import load_llm_settings

    _, settings = load_llm_settings(o["config_path"], model=o["model"], **_llm_flags(o))
    if not settings.model:
        raise ValueError("no model chosen: pass --model provider/model (e.g. openai/gpt-4.1), set "
                         "KERNELWRIGHT_MODEL, or put model in [llm] of kernelwright.toml")
    model = parse_model(settings.model)
    if not settings.offline:
        try:
            settings.endpoint(model)
        except LLMConfigError as exc:
            raise ValueError(str(exc)) from None
    return model.id


def _task_and_start(command: str, kernel: Optional[Path], o: dict[str, Any]):
    """The task (loaded, with a reloadable ref) and the user's starting kernel (optimize)."""
    from ..agent.usertask import UserTaskError, build_user_task
    from .judge_cmds import load_task_or_exit

    if command == "optimize":
        if kernel is None or o["task"] is None:
            raise ValueError("optimize needs your kernel and its task: kernelwright optimize KERNEL.py --task NAME|TASK.py")
        if not kernel.is_file():
            raise ValueError(f"{kernel}: no such file")
        from ..judge import detect_backend

        if detect_backend(o["device"])[0] == "cpu" and not o["perf"]:
            raise ValueError("optimize needs timing, and the CPU interpreter times nothing by default: run it "
                             "on a GPU, or pass --perf to time under the interpreter (slow; interpreter times "
                             "say nothing about GPU speed)")
        return load_task_or_exit(o["task"], o["suite"], o["path"]), kernel.read_text()
    if o["task"] is not None:
        if o["instruction"] or o["entry"] or o["reference"]:
            raise ValueError("give either --task, or an INSTRUCTION with --entry and --reference, not both")
        return load_task_or_exit(o["task"], o["suite"], o["path"]), None
    if not (o["instruction"] and o["entry"] and o["reference"]):
        raise ValueError('generate needs --task NAME, or "INSTRUCTION" --entry "name(args)" --reference ref.py '
                         "[--tests tests.py]")
    from ..tasks import TaskFileError, load_task_file

    name = o["name"] or o["entry"].split("(")[0].strip()
    out = o["out"] or _default_out(name)
    o["_out"] = out
    try:
        task_file = build_user_task(o["instruction"], o["entry"], o["reference"], o["tests"], Path(out) / "task", name)
        return load_task_file(task_file), None
    except (UserTaskError, TaskFileError) as exc:
        raise ValueError(str(exc)) from None


def _llm_flags(o: dict[str, Any], spec: Any = None) -> dict[str, Any]:
    """The LLM layer's flags; on a resume, the run's own --base-url unless another is given."""
    return {"base_url": o.get("base_url") or getattr(spec, "base_url", None), "no_cache": o.get("no_cache", False), "offline": o.get("offline", False),
            "concurrency": o.get("llm_concurrency")}


def _execute(store, spec, o: dict[str, Any], as_json: bool) -> None:
    results, errors, _ = run_agent(store, spec, o, as_json)
    code = _report(store, spec, results, errors, as_json)
    store.close()
    raise typer.Exit(code)


def run_agent(store, spec, o: dict[str, Any], as_json: bool, concurrency: int | None = None,
              in_flight: int | None = None):
    """Run the spec's session with a judge pool and live progress: (results, agent errors, the
    judge meter's report). Exits 2 on a bad model or device, 130 on Ctrl-C (after writing what is
    verified so far)."""
    from ..agent.app import make_llm, run_session
    from ..agent.meter import JudgeMeter
    from ..judge import DeviceUnavailable
    from ..llm import LLMConfigError
    from .agent_progress import AgentProgress

    try:
        llm = make_llm(spec, store, o.get("config_path"), _llm_flags(o, spec))
    except LLMConfigError as exc:
        store.close()
        raise _error(str(exc), as_json) from None
    try:
        pool = _judge_pool(spec, in_flight)
    except DeviceUnavailable as exc:
        store.close()
        raise _error(str(exc), as_json) from None
    progress = AgentProgress(len(spec.task_refs), spec.settings.runs, spec.settings.iterations, quiet=as_json)
    meter = JudgeMeter(pool, pool.n_workers)
    try:
        with pool, progress:
            pool.start()
            results, errors = run_session(spec, store, llm, meter, device_info=pool.device_info, backend=pool.backend,
                                          config_path=o.get("config_path"), on_event=progress.event,
                                          concurrency=concurrency)
    except KeyboardInterrupt:
        from ..agent.results import write_outputs

        # what is verified so far, written now; the run goes on with --resume
        names = sorted({a.task for a in store.attempts()})
        write_outputs(store, names, spec.settings.runs)
        store.close()
        Console(stderr=True).print(f"[yellow]interrupted: the best kernels so far are in[/] "
                                   f"{escape(str(store.run_dir / 'best'))}[yellow]; continue with[/] kernelwright "
                                   f"{spec.command} --resume {escape(str(store.run_dir))}")
        # Task-runs still waiting for the model would hold the exit for up to the LLM timeout:
        # everything is stored (each attempt and call is committed as it happens), so leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    return results, errors, meter.report()


def _judge_pool(spec, in_flight: int | None = None):
    """A worker per task-run in flight, up to the judge's default per device: more would only
    start processes that wait."""
    from ..judge import JudgeOptions, JudgePool, detect_backend
    from ..judge.coordinator.backend import default_workers_per_device

    backend, count = detect_backend(spec.device)
    in_flight = in_flight or len(spec.task_refs) * spec.settings.runs
    options = JudgeOptions(seeds=spec.judge_seeds, perf=spec.perf, max_perf_cases=spec.max_perf_cases)
    if backend == "cpu":
        return JudgePool("cpu", workers=max(1, min(count, in_flight)), options=options)
    per_device = max(1, min(default_workers_per_device(count), -(-in_flight // count)))
    return JudgePool(spec.device, options=options, workers_per_device=per_device)


def _report(store, spec, results, errors, as_json: bool) -> int:
    if not results:
        return EXIT_NONE
    found = [x for x in results if x.best is not None]
    if spec.command == "optimize":
        code = EXIT_FOUND if any(x.improved for x in results) else EXIT_NONE
    else:
        code = EXIT_FOUND if found else EXIT_NONE
    if all(x.best is None and x.best_unverified and x.best_unverified["kind"] == "judge_error" for x in results):
        code = EXIT_JUDGE_ERROR
    if as_json:
        print(json.dumps({"run_dir": str(store.run_dir), "command": spec.command,
                          "results": [_jsonable(x) for x in results], "errors": errors, "exit_code": code},
                         indent=2, default=str))
        return code
    console = Console()
    for x in results:
        _print_result(console, store, spec, x)
    for e in errors:
        Console(stderr=True).print(f"[red]agent error:[/] {escape(e)}")
    console.print(f"run directory: {escape(str(store.run_dir))}  (results.jsonl, summary.json, best/, run.sqlite)")
    return code


def _jsonable(result) -> dict[str, Any]:
    from dataclasses import asdict

    return dict(asdict(result), improved=result.improved)


def _print_result(console: Console, store, spec, x) -> None:
    best = x.best
    head = f"[bold]{escape(x.task)}[/]: "
    if best is None:
        near = x.best_unverified
        console.print(head + "[red]no verified kernel[/]" + (f" (closest: {escape(near['kind'])} - {escape(near['reason'][:200])})"
                                                            if near else ""), highlight=False)
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
            given = [a for a in store.attempts(x.task) if a.mode == "given"]
            why = ("correct, but not timed" if given and given[0].passed else
                   f"not verified ({given[0].kind}: {given[0].reason[:160]})" if given else "not judged")
            console.print(f"your kernel: {escape(why)}; nothing to compare against", highlight=False)
        elif x.improved:
            console.print(f"faster than your kernel ({x.given_speedup:.3f}x against the reference)")
        else:
            console.print(f"[yellow]no kernel faster than yours[/] ({x.given_speedup:.3f}x against the reference) was found")
    pk = ", ".join(f"pass@{k} {v:.2f}" for k, v in x.pass_at_k.items())
    console.print(f"attempts {x.attempts} over {x.runs} run(s), {pk}; LLM calls {x.llm_calls}, tokens {x.tokens}, "
                  f"cost ${x.cost_usd:.4f}", highlight=False)
