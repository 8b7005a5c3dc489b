"""`kernelwright generate` and `kernelwright optimize`: the agent on one task.

    kernelwright generate "INSTRUCTION" --entry "softmax(x)" --reference ref.py --model M
    kernelwright generate --task softmax --model M
    kernelwright optimize my_kernel.py --task softmax --model M
    kernelwright generate --resume RUN_DIR

Both write a run directory (see docs/agent.md) and print a summary. Exit status: 0 a verified
kernel was found (optimize: one faster than yours), 1 none was found, 2 usage error (a flag a
resume cannot take, or a model that does not answer before the run starts: nothing is stored),
3 the judge could not decide (the task's own reference failed, or the problem is too large for
this machine: the run asks the model nothing more), 4 the model stopped answering
mid-run (no iteration was spent on it: --resume RUN_DIR finishes the run once it answers), 130
interrupted (resume with --resume RUN_DIR).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Annotated, Any, NamedTuple, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape

from ..agent.memory import Mode
from . import app
from .agent_runs import DeferredPing, ModelDoesNotAnswer, chosen_model, interpreter_timing, llm_flags, task_runs_in_flight
from .llm_cmds import BaseUrlOpt, ConfigOpt, ModelOpt, NoCacheOpt, OfflineOpt
from .options import (
    AGENT,
    AddressOpt,
    AgentOptions,
    Command,
    ConcurrencyOpt,
    ExecutorOpt,
    GpusOpt,
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
    TimeoutScaleOpt,
    WorkersPerDeviceOpt,
)
from .agent_results import interrupted_message, jsonable, outage_message, print_gpu_notes, print_result

EXIT_FOUND, EXIT_NONE, EXIT_USAGE, EXIT_JUDGE_ERROR, EXIT_MODEL_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130

RunsOpt = Annotated[int, typer.Option("--runs", min=1, help="runs of each task (parallel scaling): independent, pass@k over them; with --search evolve they share an archive and pass@k is best-of-k")]
ItersOpt = Annotated[int, typer.Option("--iterations", "-n", min=1, help="candidates per run (sequential scaling)")]
DebugOpt = Annotated[int, typer.Option("--max-debug-attempts", min=1,
                                       help="failed fixes in one line before a fresh approach (the debugging trap)")]
TempOpt = Annotated[float, typer.Option("--temperature", min=0.0, max=2.0, help="sampling temperature")]
CostOpt = Annotated[Optional[float], typer.Option("--max-cost", help="USD for the whole run")]
TokensOpt = Annotated[Optional[int], typer.Option("--max-tokens", help="tokens for the whole run")]
TimeOpt = Annotated[Optional[float], typer.Option("--time-limit", help="seconds for the whole run")]
TaskCostOpt = Annotated[Optional[float], typer.Option("--task-max-cost", help="USD per task")]
TaskTokensOpt = Annotated[Optional[int], typer.Option("--task-max-tokens", help="tokens per task")]
TaskTimeOpt = Annotated[Optional[float], typer.Option("--task-time-limit", help="seconds per task")]
DeviceOpt = Annotated[str, typer.Option("--device", help="auto | cpu (Triton interpreter) | cuda | hip")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", "-o", help="run directory (default kernelwright-runs/<task>-<time>)")]
ResumeOpt = Annotated[Optional[Path], typer.Option(
    "--resume", help="continue the run in this directory (--iterations, --runs and budgets extend it)")]
PromptsOpt = Annotated[Optional[Path], typer.Option("--prompts", help="folder of .j2 templates overriding the built-in prompts")]
CorpusOpt = Annotated[Optional[list[Path]], typer.Option(
    "--corpus", help="more 1-shot examples: a folder of .py files or TritonBench's train_crawl.json (repeatable)")]
OneShotOpt = Annotated[bool, typer.Option("--one-shot/--no-one-shot", help="a similar kernel in the prompt")]
KnowledgeOpt = Annotated[bool, typer.Option("--knowledge/--no-knowledge", help="the Triton guide and GPU specs in the prompt")]
OptimizerOpt = Annotated[bool, typer.Option("--optimizer/--no-optimizer", help="optimize correct kernels")]
ReflectOpt = Annotated[bool, typer.Option("--reflection/--no-reflection", help="analyse failures before fixing")]
TuneFlagOpt = Annotated[bool, typer.Option("--tune/--no-tune", help="after the LLM iterations, sweep the best kernel's launch parameters (no LLM)")]
PerfOpt = Annotated[Optional[bool], typer.Option("--perf/--no-perf", help="time candidates (default: on GPUs, not under the CPU interpreter)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the summary as JSON")]
ForceOpt = Annotated[bool, typer.Option("--force", help="with --perf under the CPU interpreter: time anyway (refused by default: slow, and it says nothing about GPU speed)")]
FixStartOpt = Annotated[bool, typer.Option("--fix-start", help="if your kernel fails the judge, have the agent fix it (default: stop with its verdict, exit 2, before any LLM call)")]
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


@app.command("generate", cls=Command, short_help="Write a Triton kernel with the agent.")
def generate_command(
    ctx: typer.Context,
    instruction: Annotated[Optional[str], typer.Argument(help="what the kernel must compute (with --entry and --reference)")] = AGENT.instruction,
    entry: Annotated[Optional[str], typer.Option("--entry", help='the function to write, e.g. "softmax(x)"')] = AGENT.entry,
    reference: Annotated[Optional[Path], typer.Option("--reference", help="PyTorch file defining the --entry function")] = AGENT.reference,
    tests: Annotated[Optional[Path], typer.Option("--tests", help="inputs: make_inputs(case, gen) + visible_cases, or get_inputs()")] = AGENT.tests,
    name: Annotated[Optional[str], typer.Option("--name", help="task name (default: the entry's name)")] = AGENT.name,
    task: TaskOpt = AGENT.task, suite: SuiteOpt = AGENT.suite, path: PathOpt = AGENT.path,
    model: ModelOpt = AGENT.model, base_url: BaseUrlOpt = AGENT.base_url, no_cache: NoCacheOpt = AGENT.no_cache,
    offline: OfflineOpt = AGENT.offline, config_path: ConfigOpt = AGENT.config_path,
    llm_seed: LLMSeedOpt = AGENT.llm_seed, llm_concurrency: LLMConcurrencyOpt = AGENT.llm_concurrency,
    temperature: TempOpt = AGENT.temperature,
    runs: RunsOpt = AGENT.runs, iterations: ItersOpt = AGENT.iterations, max_debug_attempts: DebugOpt = AGENT.max_debug_attempts,
    one_shot: OneShotOpt = AGENT.one_shot, knowledge: KnowledgeOpt = AGENT.knowledge,
    optimizer: OptimizerOpt = AGENT.optimizer, reflection: ReflectOpt = AGENT.reflection, tune: TuneFlagOpt = AGENT.tune,
    search: SearchOpt = AGENT.search, migrate_every: MigrateEveryOpt = AGENT.migrate_every,
    concurrency: ConcurrencyOpt = AGENT.concurrency, prompts: PromptsOpt = AGENT.prompts, corpus: CorpusOpt = AGENT.corpus,
    max_cost: CostOpt = AGENT.max_cost, max_tokens: TokensOpt = AGENT.max_tokens, time_limit: TimeOpt = AGENT.time_limit,
    task_max_cost: TaskCostOpt = AGENT.task_max_cost, task_max_tokens: TaskTokensOpt = AGENT.task_max_tokens,
    task_time_limit: TaskTimeOpt = AGENT.task_time_limit,
    device: DeviceOpt = AGENT.device, judge_seeds: JudgeSeedsOpt = AGENT.judge_seeds,
    judge_base_seed: JudgeBaseSeedOpt = AGENT.judge_base_seed, perf: PerfOpt = AGENT.perf, force: ForceOpt = AGENT.force,
    timeout_scale: TimeoutScaleOpt = AGENT.timeout_scale, workers_per_device: WorkersPerDeviceOpt = AGENT.workers_per_device,
    sandbox: SandboxOpt = AGENT.sandbox, profile: ProfileOpt = AGENT.profile, no_profile: NoProfileOpt = AGENT.no_profile,
    shrink: ShrinkOpt = AGENT.shrink, executor: ExecutorOpt = AGENT.executor, address: AddressOpt = AGENT.address,
    gpus: GpusOpt = AGENT.gpus,
    out: OutOpt = AGENT.out, resume: ResumeOpt = AGENT.resume, as_json: JsonOpt = AGENT.as_json,
) -> None:
    """Write a Triton kernel with the agent: from your instruction and PyTorch reference, or for
    an existing task (--task). Writes the best verified kernel and a run directory.

    --executor ray judges the candidates of the --runs on a Ray cluster's GPUs; the agent's
    loops and the run directory stay on this host (docs/scaling.md).

    Exit status: 0 a verified kernel was found, 1 none, 2 usage error (or the model does not
    answer: nothing started), 3 the judge could not decide (a broken reference, a problem too
    large for this machine: no further model call), 4 the model stopped answering mid-run, 130
    interrupted (both: continue with --resume RUN_DIR).
    """
    _agent_command("generate", AgentOptions.from_context(ctx))


@app.command("optimize", cls=Command, short_help="Make your working Triton kernel faster.")
def optimize_command(
    ctx: typer.Context,
    kernel: Annotated[Optional[Path], typer.Argument(help="your working Triton kernel (a file defining the task's entry point)")] = AGENT.kernel,
    fix_start: FixStartOpt = AGENT.fix_start,
    task: TaskOpt = AGENT.task, suite: SuiteOpt = AGENT.suite, path: PathOpt = AGENT.path,
    model: ModelOpt = AGENT.model, base_url: BaseUrlOpt = AGENT.base_url, no_cache: NoCacheOpt = AGENT.no_cache,
    offline: OfflineOpt = AGENT.offline, config_path: ConfigOpt = AGENT.config_path,
    llm_seed: LLMSeedOpt = AGENT.llm_seed, llm_concurrency: LLMConcurrencyOpt = AGENT.llm_concurrency,
    temperature: TempOpt = AGENT.temperature,
    runs: RunsOpt = AGENT.runs, iterations: ItersOpt = AGENT.iterations, max_debug_attempts: DebugOpt = AGENT.max_debug_attempts,
    one_shot: OneShotOpt = AGENT.one_shot, knowledge: KnowledgeOpt = AGENT.knowledge,
    reflection: ReflectOpt = AGENT.reflection, tune: TuneFlagOpt = AGENT.tune,
    search: SearchOpt = AGENT.search, migrate_every: MigrateEveryOpt = AGENT.migrate_every,
    concurrency: ConcurrencyOpt = AGENT.concurrency, prompts: PromptsOpt = AGENT.prompts, corpus: CorpusOpt = AGENT.corpus,
    max_cost: CostOpt = AGENT.max_cost, max_tokens: TokensOpt = AGENT.max_tokens, time_limit: TimeOpt = AGENT.time_limit,
    task_max_cost: TaskCostOpt = AGENT.task_max_cost, task_max_tokens: TaskTokensOpt = AGENT.task_max_tokens,
    task_time_limit: TaskTimeOpt = AGENT.task_time_limit,
    device: DeviceOpt = AGENT.device, judge_seeds: JudgeSeedsOpt = AGENT.judge_seeds,
    judge_base_seed: JudgeBaseSeedOpt = AGENT.judge_base_seed, perf: PerfOpt = AGENT.perf, force: ForceOpt = AGENT.force,
    timeout_scale: TimeoutScaleOpt = AGENT.timeout_scale, workers_per_device: WorkersPerDeviceOpt = AGENT.workers_per_device,
    sandbox: SandboxOpt = AGENT.sandbox, profile: ProfileOpt = AGENT.profile, no_profile: NoProfileOpt = AGENT.no_profile,
    shrink: ShrinkOpt = AGENT.shrink, executor: ExecutorOpt = AGENT.executor, address: AddressOpt = AGENT.address,
    gpus: GpusOpt = AGENT.gpus,
    out: OutOpt = AGENT.out, resume: ResumeOpt = AGENT.resume, as_json: JsonOpt = AGENT.as_json,
) -> None:
    """Make your working Triton kernel faster: the agent starts from it and returns a faster
    verified kernel, or says that none was found.

    Your kernel is judged first: if it fails, the run stops with its verdict (exit 2) before any
    LLM call, unless --fix-start asks the agent to fix it. Optimizing needs timing: under the CPU
    interpreter pass --perf --force (slow; the estimate is printed). --executor ray judges the
    candidates of the --runs on a Ray cluster's GPUs; the agent's loops and the run directory stay
    on this host (docs/scaling.md).

    Exit status: 0 a faster verified kernel was found, 1 none, 2 usage error (also: your kernel
    fails, without --fix-start), 3 the judge could not decide (your kernel's task reference
    failed), 4 the model stopped answering mid-run, 130 interrupted (both: --resume RUN_DIR).
    """
    _agent_command("optimize", AgentOptions.from_context(ctx))  # no --optimizer: always on


def _agent_command(command: str, opts: AgentOptions) -> None:
    from ..agent.app import open_run
    from ..agent.prompts import PromptError
    from ..judge import DeviceUnavailable
    from ..scale.executor import check_executor, check_gpus_here
    from ..store import StoreError

    ping = None
    try:
        opts.check_search()  # a usage error before anything is loaded or asked
        check_executor(opts.executor, opts.address, opts.gpus)
        check_gpus_here(opts.executor, opts.gpus, opts.device)
        if opts.resume is not None:
            store, spec = open_run(opts.resume, None, resume=True, command=command)
            spec = _resumed(store, spec, opts)
        else:
            store, spec, ping = _new_run(command, opts)
    except (StoreError, PromptError, DeviceUnavailable, ValueError) as exc:
        raise _error(str(exc), opts.as_json) from None
    _execute(store, spec, opts, ping)


def _resumed(store, spec, opts: AgentOptions):
    """The resumed run's spec, once its flags are checked and the model answers (agent_runs)."""
    from .agent_runs import resume

    try:
        return resume(store, spec, opts)
    except BaseException:
        store.close()
        raise


def _new_run(command: str, opts: AgentOptions):
    """A new run's store and spec, once the task is loaded and the model has answered its ping:
    a run that cannot start leaves no run directory behind (not even generate's task files).
    optimize pings later (the DeferredPing returned): after the user's kernel is judged, and only
    when the model is to be asked something."""
    from ..agent.app import open_run
    from ..agent.prompts import PromptLibrary
    from .agent_runs import preflight_model

    from ..scale.executor import judge_backend

    model = chosen_model(opts)  # before anything is written
    backend = judge_backend(opts.executor, opts.address, opts.device)  # this host's, or the Ray cluster's
    task_ref, start_code, out, fresh = _task_and_start(command, opts, backend)
    try:
        if opts.prompts is not None:
            PromptLibrary(opts.prompts)  # fail now on a bad folder, not at the first prompt
        ping = DeferredPing(model, opts, Path(out) if fresh else None) if command == "optimize" else None
        if ping is None:
            preflight_model(model, opts)
        spec = opts.run_spec(command, task_refs=(task_ref.ref,), model=model, task_names=(task_ref.name,),
                             start_codes={task_ref.name: start_code} if start_code is not None else {})
        return (*open_run(out, spec, resume=False), ping)
    except BaseException:
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        raise


def _task_and_start(command: str, opts: AgentOptions, backend: str):
    """The task (loaded, with a reloadable ref), the user's starting kernel (optimize), the run
    directory, and whether that did not exist before this command (its to remove if the run
    cannot start). `backend`: where candidates are judged (cpu, cuda, hip)."""
    from ..agent.usertask import UserTaskError, build_user_task
    from ..tasks.shrink import shrink_task
    from .judge_cmds import load_task_or_exit

    if command == "optimize":
        kernel = opts.kernel
        if kernel is None or opts.task is None:
            raise ValueError("optimize needs your kernel and its task: kernelwright optimize KERNEL.py --task NAME|TASK.py")
        from .usage import read_candidate

        start_code = read_candidate(kernel)  # a directory, a binary file: named, as eval names them
        if opts.perf is False or (backend == "cpu" and not opts.perf):
            raise ValueError("optimize needs timing, and " + ("--no-perf times nothing" if opts.perf is False else
                             "the CPU interpreter times nothing by default") + ": run it on a GPU, or pass --perf "
                             "--force to time under the interpreter (slow; interpreter times say nothing about "
                             "GPU speed)")
        task = shrink_task(load_task_or_exit(opts.task, opts.suite, opts.path), opts.shrink)
        interpreter_timing(opts, [task])
        out = opts.out or _default_out(task.name)
        return task, start_code, out, not Path(out).exists()
    if opts.task is not None:
        if opts.instruction or opts.entry or opts.reference:
            raise ValueError("give either --task, or an INSTRUCTION with --entry and --reference, not both")
        task = shrink_task(load_task_or_exit(opts.task, opts.suite, opts.path), opts.shrink)
        interpreter_timing(opts, [task])
        out = opts.out or _default_out(task.name)
        return task, None, out, not Path(out).exists()
    if not (opts.instruction and opts.entry and opts.reference):
        raise ValueError('generate needs --task NAME, or "INSTRUCTION" --entry "name(args)" --reference ref.py '
                         "[--tests tests.py]")
    interpreter_timing(opts, None)  # before the task files are written: a refused run leaves nothing
    from ..tasks import TaskFileError, load_task_file

    name = opts.name or opts.entry.split("(")[0].strip()
    out = opts.out or _default_out(name)
    fresh = not Path(out).exists()
    try:
        task_file = build_user_task(opts.instruction, opts.entry, opts.reference, opts.tests, Path(out) / "task", name)
        return shrink_task(load_task_file(task_file), opts.shrink), None, out, fresh
    except (UserTaskError, TaskFileError) as exc:
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
        raise ValueError(str(exc)) from None


def _execute(store, spec, opts: AgentOptions, ping: DeferredPing | None = None) -> None:
    from ..judge import DeviceUnavailable

    concurrency = opts.concurrency  # locally: every run in flight, unless --concurrency
    if opts.executor == "ray":  # on Ray, as bench: 4 per judging actor of the cluster
        try:
            concurrency = task_runs_in_flight(spec, opts)
        except DeviceUnavailable as exc:
            store.close()
            raise _error(str(exc), opts.as_json) from None
    try:
        run = run_agent(store, spec, opts, concurrency=concurrency, in_flight=opts.concurrency,
                        before_calls=ping)
    except ModelDoesNotAnswer as exc:  # optimize's ping, once its kernel was judged
        store.close()
        if ping is not None:
            ping.discard()
        raise _error(str(exc), opts.as_json) from None
    # optimize's kernel failed and nothing was asked: the run directory this command made goes,
    # so that the suggested re-run (--fix-start, same --out) starts afresh
    discard = ping is not None and ping.out is not None and _start_failure(store, spec) is not None \
        and not store.calls()
    code = _report(store, spec, run, opts.as_json, kept=not discard)
    store.close()
    if discard:
        ping.discard()
    raise typer.Exit(code)


class AgentRun(NamedTuple):
    results: list                  # agent.results.TaskResult, one per task
    errors: list[str]              # the agent's own errors (bugs), one per task-run that hit one
    judge: dict[str, Any]          # the judge meter's report
    outage: str | None             # why the model stopped answering mid-run (the run is incomplete)


def run_agent(store, spec, opts: AgentOptions, concurrency: int | None = None,
              in_flight: int | None = None, before_calls=None) -> AgentRun:
    """Run the spec's session with a judge pool and live progress. Exits 2 on a bad model or
    device, 130 on Ctrl-C (after writing what is verified so far). `before_calls` (optimize's
    ping) runs once the starting kernels are judged, if the model is to be asked anything."""
    from ..agent.app import make_llm, run_session
    from ..agent.meter import JudgeMeter
    from ..judge import DeviceUnavailable
    from ..llm import LLMConfigError
    from .agent_progress import AgentProgress

    as_json = opts.as_json
    try:
        llm = make_llm(spec, store, opts.config_path, llm_flags(opts, spec))
    except LLMConfigError as exc:
        store.close()
        raise _error(str(exc), as_json) from None
    try:
        pool = _judge_pool(spec, in_flight, opts.workers_per_device, opts.executor, opts.address, opts.gpus)
    except DeviceUnavailable as exc:
        store.close()
        raise _error(str(exc), as_json) from None
    from ..agent.app import untimed_reason

    untimed = untimed_reason(spec.perf, pool.backend)
    if untimed:  # said up front: the run ends sooner than --iterations suggests
        where = "under the CPU interpreter" if untimed == "CPU interpreter" else f"({untimed})"
        also = (" (so --search evolve has no archive to build on: nothing migrates)"
                if spec.settings.search == "evolve" else "")
        Console(stderr=True).print(f"speed is not measured {where}: the run stops at the first verified kernel{also}",
                                   highlight=False, soft_wrap=True)
    stored = sum(1 for a in store.attempts() if Mode(a.mode).by_llm)  # a resumed run's iterations
    progress = AgentProgress(len(spec.task_refs), spec.settings.runs, spec.settings.iterations, quiet=as_json,
                             done=stored)
    sessions: list = []

    def on_retry(tags, notice) -> None:
        progress.retrying(tags, notice)  # the progress line says what a call waits for
        if sessions and sessions[0].ctx.outage.reason is not None:
            raise notice.error  # another call found the model down: give up now, not after the retries

    llm.on_retry = on_retry
    llm.on_send = progress.sending  # (a call the cache answers is not waited for)
    meter = JudgeMeter(pool, pool.n_workers)
    try:
        with pool, progress:
            pool.start()
            results, errors = run_session(spec, store, llm, meter, device_info=pool.device_info, backend=pool.backend,
                                          config_path=opts.config_path, on_event=progress.event,
                                          concurrency=concurrency, session_hook=sessions.append,
                                          before_calls=before_calls)
    except KeyboardInterrupt:
        _interrupted(store, spec)
    return AgentRun(results, errors, meter.report(), sessions[0].ctx.outage.reason if sessions else None)


def _interrupted(store, spec) -> NoReturn:
    """Ctrl-C: what is verified so far, written now; the run goes on with --resume."""
    from ..agent.results import write_outputs

    names = sorted({a.task for a in store.attempts()})
    verified = any(r.best is not None for r in write_outputs(store, names, spec.settings.runs, spec.settings.search))
    store.close()
    Console(stderr=True).print(interrupted_message(spec.command, store.run_dir, verified), highlight=False)
    # Task-runs still waiting for the model would hold the exit for up to the LLM timeout:
    # everything is stored (each attempt and call is committed as it happens), so leave now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def _judge_pool(spec, in_flight: int | None = None, workers_per_device: int | None = None,
                executor: str = "local", address: str | None = None, gpus: str | None = None):
    """A worker per task-run in flight, up to the judge's default per device (more would only
    start processes that wait), or --workers-per-device on GPUs when given; with --executor ray,
    one actor per GPU of the cluster."""
    from ..judge import JudgePool, detect_backend
    from ..judge.coordinator.backend import default_workers_per_device
    from .options import judge_options

    options = judge_options(judge_seeds=spec.judge_seeds, judge_base_seed=spec.judge_base_seed, perf=spec.perf,
                            timeout_scale=spec.timeout_scale, max_perf_cases=spec.max_perf_cases,
                            sandbox=spec.sandbox, profile=spec.profile)
    from ..scale.executor import check_executor, open_pool

    if executor != "local":
        return open_pool(executor, address, spec.device, options)
    ids = check_executor(executor, address, gpus)
    chosen = {"gpus": ids} if ids else {}  # (only when given: the tests' stubbed pools take no gpus)
    backend, count = detect_backend(spec.device)
    count = len(ids) if ids and backend != "cpu" else count
    in_flight = in_flight or len(spec.task_refs) * spec.settings.runs
    if backend == "cpu":
        return JudgePool("cpu", workers=max(1, min(count, in_flight)), options=options, **chosen)
    per_device = workers_per_device or max(1, min(default_workers_per_device(count), -(-in_flight // count)))
    return JudgePool(spec.device, options=options, workers_per_device=per_device, **chosen)


def _report(store, spec, run: AgentRun, as_json: bool, kept: bool = True) -> int:
    """Print the run's results (or its error) and return the exit status; `kept`: False when the
    run directory is removed (optimize's failing kernel, nothing asked)."""
    from ..agent.results import judge_undecided, record_judge

    results, errors = run.results, run.errors
    if not results:
        return EXIT_NONE
    found = [x for x in results if x.best is not None]
    if spec.command == "optimize":
        # --fix-start: a verified kernel from a failing one of yours is found too
        fixed = {a.task for a in store.attempts() if a.mode == Mode.GIVEN and not a.passed}
        code = EXIT_FOUND if any(x.improved or (x.best and x.task in fixed) for x in results) else EXIT_NONE
    else:
        code = EXIT_FOUND if found else EXIT_NONE
    if not found and judge_undecided(store):
        code = EXIT_JUDGE_ERROR
    failed_start = _start_failure(store, spec)
    if failed_start is not None:
        message, code = failed_start
    if run.outage is not None:  # whatever was found: the run is not finished
        code = EXIT_MODEL_UNAVAILABLE
        Console(stderr=True).print(f"[bold red]error:[/] {escape(outage_message(store, spec, run.outage, bool(found)))}",
                                   highlight=False, soft_wrap=True)
    if kept:
        record_judge(store.run_dir, run.judge)
    if as_json:
        print(json.dumps({"run_dir": str(store.run_dir), "command": spec.command,
                          "results": [jsonable(x) for x in results], "errors": errors,
                          "model_unavailable": run.outage, "exit_code": code, "judge": run.judge,
                          **({"error": message} if failed_start else {}),
                          **({} if kept else {"run_dir_removed": True})}, indent=2, default=str))
        return code
    console = Console()
    if failed_start is not None:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False)
        if kept:
            console.print(f"run directory: {escape(str(store.run_dir))}  (your kernel's verdict in run.sqlite)")
        return code
    for x in results:
        print_result(console, store, spec, x)
    for e in errors:
        Console(stderr=True).print(f"[red]agent error:[/] {escape(e)}")
    print_gpu_notes(Console(stderr=True), run.judge)
    console.print(f"run directory: {escape(str(store.run_dir))}  (results.jsonl, summary.json, best/, run.sqlite)")
    return code



def _start_failure(store, spec) -> tuple[str, int] | None:
    """optimize without --fix-start, when the user's kernel failed: (the error with its verdict,
    the exit status: 2, or 3 when the judge could not decide). The run stopped before any call."""
    if spec.command != "optimize" or spec.settings.fix_start:
        return None
    failed = {a.task: a for a in reversed(store.attempts()) if a.mode == Mode.GIVEN and not a.passed}
    if not failed:
        return None
    verdicts = "; ".join(f"task {t}: {a.kind} - {a.reason[:400]}" for t, a in sorted(failed.items()))
    message = (f"your kernel fails the judge ({verdicts}). Nothing was asked of the model: fix it, or pass "
               "--fix-start to have the agent fix it")
    judge_error = all(a.kind == "judge_error" for a in failed.values())
    return message, EXIT_JUDGE_ERROR if judge_error else EXIT_USAGE
