"""`kernelwright bench` (the agent over a whole suite: the GEAK paper's experiments) and
`kernelwright bench-report` (the metrics of a bench run, from its store, without re-running).

Exit status: 0 the run finished (whatever the accuracy), 2 usage error (or the model does not
answer: nothing started), 4 the model stopped answering mid-run (no iteration was spent on it),
130 interrupted (both: continue with --resume RUN_DIR).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from . import app
from .agent_cmds import (
    CorpusOpt,
    CostOpt,
    DebugOpt,
    DeviceOpt,
    ItersOpt,
    JsonOpt,
    KnowledgeOpt,
    OneShotOpt,
    OptimizerOpt,
    PathOpt,
    PromptsOpt,
    ReflectOpt,
    ResumeOpt,
    RunsOpt,
    TaskCostOpt,
    TaskTimeOpt,
    TaskTokensOpt,
    TempOpt,
    TimeOpt,
    TokensOpt,
    EXIT_MODEL_UNAVAILABLE,
    ForceOpt,
    _error,
    _resumed,
    outage_message,
    run_agent,
)
from .agent_runs import chosen_model, interpreter_timing, preflight_model, task_runs_in_flight
from .llm_cmds import BaseUrlOpt, ConfigOpt, ModelOpt, NoCacheOpt, OfflineOpt
from .options import (
    AGENT,
    AddressOpt,
    AgentOptions,
    Command,
    ExecutorOpt,
    GpusOpt,
    ConcurrencyOpt,
    JudgeBaseSeedOpt,
    JudgeSeedsOpt,
    LLMConcurrencyOpt,
    LLMSeedOpt,
    NoProfileOpt,
    ProfileOpt,
    SandboxOpt,
    MigrateEveryOpt,
    SearchOpt,
    ShrinkOpt,
    TasksOpt,
    shrunk_tasks,
    TimeoutScaleOpt,
    WorkersPerDeviceOpt,
)
from ..agent.run_metrics import failures, write_metrics
from .usage import plural

ModeOpt = Annotated[str, typer.Option("--mode", help="geak (the full agent) | direct | one-shot | reflexion (the paper's baselines)")]
TuneOpt = Annotated[bool, typer.Option("--tune/--no-tune", help="sweep the best kernel's launch parameters, no LLM")]
TuneVariantsOpt = Annotated[int, typer.Option("--tune-variants", min=1, help="variants the tuning pass judges per run")]
PerfCasesOpt = Annotated[Optional[int], typer.Option("--max-perf-cases", min=1, help="time at most N shapes per task")]


@app.command("bench", cls=Command, short_help="Run the agent on every task of a suite.")
def bench_command(
    ctx: typer.Context,
    suite: Annotated[str, typer.Option("--suite", "-s", help="builtin | tritonbench-revised | rocm | kernelbench | tritonbench-t")] = AGENT.suite,
    path: PathOpt = AGENT.path, tasks: TasksOpt = None, mode: ModeOpt = AGENT.mode,
    model: ModelOpt = AGENT.model, base_url: BaseUrlOpt = AGENT.base_url, no_cache: NoCacheOpt = AGENT.no_cache,
    offline: OfflineOpt = AGENT.offline, config_path: ConfigOpt = AGENT.config_path,
    llm_seed: LLMSeedOpt = AGENT.llm_seed, llm_concurrency: LLMConcurrencyOpt = AGENT.llm_concurrency,
    temperature: TempOpt = AGENT.temperature,
    runs: RunsOpt = AGENT.runs, iterations: ItersOpt = AGENT.iterations, max_debug_attempts: DebugOpt = AGENT.max_debug_attempts,
    one_shot: OneShotOpt = AGENT.one_shot, knowledge: KnowledgeOpt = AGENT.knowledge,
    optimizer: OptimizerOpt = AGENT.optimizer, reflection: ReflectOpt = AGENT.reflection,
    tune: TuneOpt = AGENT.tune, tune_variants: TuneVariantsOpt = AGENT.tune_variants,
    search: SearchOpt = AGENT.search, migrate_every: MigrateEveryOpt = AGENT.migrate_every,
    concurrency: ConcurrencyOpt = AGENT.concurrency, prompts: PromptsOpt = AGENT.prompts, corpus: CorpusOpt = AGENT.corpus,
    max_cost: CostOpt = AGENT.max_cost, max_tokens: TokensOpt = AGENT.max_tokens, time_limit: TimeOpt = AGENT.time_limit,
    task_max_cost: TaskCostOpt = AGENT.task_max_cost, task_max_tokens: TaskTokensOpt = AGENT.task_max_tokens,
    task_time_limit: TaskTimeOpt = AGENT.task_time_limit,
    device: DeviceOpt = AGENT.device, judge_seeds: JudgeSeedsOpt = AGENT.judge_seeds,
    judge_base_seed: JudgeBaseSeedOpt = AGENT.judge_base_seed,
    perf: Annotated[Optional[bool], typer.Option("--perf/--no-perf", help="time candidates (default: on GPUs)")] = AGENT.perf,
    max_perf_cases: PerfCasesOpt = AGENT.max_perf_cases, force: ForceOpt = AGENT.force,
    timeout_scale: TimeoutScaleOpt = AGENT.timeout_scale, workers_per_device: WorkersPerDeviceOpt = AGENT.workers_per_device,
    sandbox: SandboxOpt = AGENT.sandbox, profile: ProfileOpt = AGENT.profile, no_profile: NoProfileOpt = AGENT.no_profile,
    shrink: ShrinkOpt = AGENT.shrink, executor: ExecutorOpt = AGENT.executor, address: AddressOpt = AGENT.address,
    gpus: GpusOpt = AGENT.gpus,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="run directory (default kernelwright-runs/bench-<suite>-<time>)")] = AGENT.out,
    resume: ResumeOpt = AGENT.resume, as_json: JsonOpt = AGENT.as_json,
) -> None:
    """Run the agent on every task of a suite, --runs times each, with LLM calls and judging
    overlapping on every GPU. Writes a run directory with metrics per iteration and per run
    count (metrics.json); --resume continues a killed run. docs/experiments.md gives the
    command for each table and figure of the GEAK paper.

    --perf under Triton's CPU interpreter is refused (exit 2, with what it would cost) unless
    --force.

    Exit status: 0 finished, 2 usage error (or the model does not answer: nothing started), 4
    the model stopped answering mid-run, 130 interrupted (--resume RUN_DIR continues both).
    """
    from ..agent.app import open_run
    from ..agent.bench import load_tasks, unsupported_here
    from ..judge import DeviceUnavailable
    from ..scale.executor import check_executor, check_gpus_here, judge_backend
    from ..store import StoreError
    from ..suites.runner import SuiteUsageError

    opts = AgentOptions.from_context(ctx)
    try:
        check_executor(opts.executor, opts.address, opts.gpus)
        check_gpus_here(opts.executor, opts.gpus, opts.device)
        opts.check_search()
        if opts.resume is not None:
            store, spec = open_run(opts.resume, None, resume=True, command="bench")
            spec = _resumed(store, spec, opts)
        else:
            model_id = chosen_model(opts)
            backend = judge_backend(opts.executor, opts.address, opts.device)
            all_tasks = shrunk_tasks(load_tasks(opts.suite, opts.path, opts.tasks), opts.shrink)
            unsupported = {t.name: why for t in all_tasks if (why := unsupported_here(t, backend))}
            runnable = [t for t in all_tasks if t.name not in unsupported]
            spec = opts.run_spec("bench", task_refs=tuple(t.ref for t in runnable),
                                 task_names=tuple(t.name for t in runnable), model=model_id, unsupported=unsupported)
            interpreter_timing(opts, runnable, kernels=spec.settings.runs * spec.settings.iterations)  # as eval: --force
            preflight_model(model_id, opts)  # before the run directory: a dead model leaves nothing
            out_dir = opts.out or Path("kernelwright-runs") / f"bench-{opts.suite}-{time.strftime('%Y%m%d-%H%M%S')}"
            store, spec = open_run(out_dir, spec, resume=False)
    except (StoreError, SuiteUsageError, DeviceUnavailable, ValueError) as exc:
        raise _error(str(exc), opts.as_json) from None
    started = time.monotonic()
    try:
        concurrency = task_runs_in_flight(spec, opts)
    except DeviceUnavailable as exc:
        store.close()
        raise _error(str(exc), opts.as_json) from None
    run = run_agent(store, spec, opts, concurrency=concurrency,
                    in_flight=opts.concurrency)
    report = write_metrics(store, spec, judge=dict(run.judge, wall_s=round(time.monotonic() - started, 3)))
    if run.outage is not None:
        report["model_unavailable"] = run.outage
    _print(report, store, opts.as_json, run.errors)
    store.close()
    if run.outage is not None:
        verified = any(r.best is not None for r in run.results)
        Console(stderr=True).print(f"[bold red]error:[/] {escape(outage_message(store, spec, run.outage, verified))}",
                                   highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_MODEL_UNAVAILABLE)
    raise typer.Exit(0)


def _print(report: dict[str, Any], store, as_json: bool, errors: list[str]) -> None:
    from ..agent.scaling import table
    from .agent_results import print_gpu_notes

    if as_json:
        print(json.dumps(dict(report, run_dir=str(store.run_dir), errors=errors), indent=2, default=str))
        return
    console = Console()
    console.print(f"[bold]{escape(report['suite'] or report.get('command') or 'bench')}[/], mode {escape(report['mode'])}, "
                  f"{plural(report['tasks'], 'task')} × {plural(report['runs'], 'run')} × "
                  f"{plural(report['iterations'], 'iteration')} "
                  f"({len(report['unsupported'])} unsupported here, counted as failures)", highlight=False)
    if report.get("shrink") is not None:
        console.print(f"[yellow]shrunk:[/] judged at problem sizes shrunk to about {report['shrink']:g} of their bytes "
                      "(--shrink): speedups are of those sizes, not the problems' own", highlight=False)
    if report.get("untimed_why"):
        console.print(f"speed not measured ({escape(report['untimed_why'])}): no speedups, no fast_p above 0",
                      highlight=False)
    ind = report.get("independent_runs", True)
    if not ind:
        console.print(f"search evolve: {escape(report['pass_at_k'])}; the pass@k columns are best-of-k", highlight=False)
    console.print("\n[bold]sequential scaling[/] (all runs)")
    console.print(table(report["per_iteration"], "iterations", ind), markup=False, soft_wrap=True)
    console.print("\n[bold]parallel scaling[/] (all iterations)")
    console.print(table(report["per_runs"], "runs", ind), markup=False, soft_wrap=True)
    if report.get("tuned"):
        console.print("\n[bold]after the tuning pass[/]")
        console.print(table([report["tuned"]], "runs", ind), markup=False, soft_wrap=True)
    failed = failures(store, report)
    if failed:
        console.print(f"\n[bold]tasks without a verified kernel ({len(failed)})[/]")
        for name, why in failed:
            console.print(f"  {escape(name)}: {escape(why)}", highlight=False, soft_wrap=True)
    console.print(f"\nLLM calls {report['llm_calls']}, tokens {report['tokens']}, cost ${report['cost_usd']:.4f}")
    if report.get("judge"):
        j = report["judge"]
        console.print(f"judge: {j['candidates']} candidates on {j['workers']} worker(s), utilization "
                      f"{j['utilization']:.0%}, idle {j['idle_fraction']:.0%} of {j['wall_s']:.0f} s", highlight=False)
        print_gpu_notes(console, j)
    for e in errors:
        Console(stderr=True).print(f"[red]agent error:[/] {escape(e)}")
    console.print(f"run directory: {escape(str(store.run_dir))} (metrics.json, results.jsonl, best/, run.sqlite)")


@app.command("bench-report", short_help="The metrics of a bench run, from its store.")
def bench_report_command(
    run_dir: Annotated[Path, typer.Argument(help="the directory of a bench, generate or optimize run")],
    as_json: JsonOpt = False,
) -> None:
    """The metrics of an agent run (per iteration, per run count, after tuning), recomputed from
    its store without re-running anything; rewrites metrics.json. Any agent run: a `generate` or
    `optimize` run is a bench of its own tasks.

    Exit status: 0 shown, 2 not an agent run directory.
    """
    from ..agent.app import open_run
    from ..store import StoreError

    try:
        store, spec = open_run(run_dir, None, resume=True)
    except StoreError as exc:
        raise _error(str(exc), as_json) from None
    previous = {}
    try:
        previous = json.loads((store.run_dir / "metrics.json").read_text()).get("judge") or {}
    except (OSError, ValueError):
        pass
    report = write_metrics(store, spec, judge=previous or None)
    _print(report, store, as_json, [])
    store.close()
