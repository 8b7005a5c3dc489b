"""Starting and resuming an agent run (generate, optimize, bench): `--perf` under the CPU
interpreter, the model's preflight, and what a `--resume` may change.

`--perf` under Triton's CPU interpreter is refused unless `--force`, with what it would cost, as
`eval` and `judge-suite` refuse it.

A run starts only once the model has answered a one-word ping (unless `--offline`: a replay
needs no server), so a dead, failing or misconfigured endpoint is an exit status 2 in seconds,
before a run directory or an attempt exists, not a run whose every iteration waits out the
retries. `optimize` judges the user's kernel first, on the judge pool the run goes on with, and
pings only when the model will be asked something: a failing kernel without `--fix-start` is its
verdict and exit status 2 with no request at all. A resumed run pings when it has work left.

A resumed run keeps what it was started with: a flag that would change what the run is (the
model, the task, the ablation switches, the temperature, the seeds, the judge's settings,
--shrink) is refused, naming it, unless it repeats the stored value. `--iterations`, `--runs` and the budgets
extend the run: the spec is rewritten, and the task-runs that ended because the old limit was
reached are reopened. The flags of the machine (`--base-url`, `--no-cache`, `--offline`,
`--config`, the concurrencies) are read each time.
"""

from __future__ import annotations

from collections import Counter
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from ..agent.app import RunSpec
    from ..store import RunStore
    from .options import AgentOptions

# --resume may raise these (they change how much is done, not what is done)
EXTENDABLE = ("iterations", "runs", "max_cost", "max_tokens", "time_limit",
              "task_max_cost", "task_max_tokens", "task_time_limit")
BUDGETS = EXTENDABLE[2:]
# ... and these are the machine's, read on every invocation
MACHINE = ("base_url", "no_cache", "offline", "config_path", "llm_concurrency", "concurrency",
           "workers_per_device", "executor", "address", "gpus", "as_json", "resume")


def llm_flags(opts: AgentOptions, spec: Any = None) -> dict[str, Any]:
    """The LLM layer's flags; on a resume, the run's own --base-url unless another is given."""
    return {"base_url": opts.base_url or getattr(spec, "base_url", None), "no_cache": opts.no_cache,
            "offline": opts.offline, "concurrency": opts.llm_concurrency}


# -- --perf under the interpreter -------------------------------------------------------------
def interpreter_timing(opts: AgentOptions, tasks: list | None, kernels: int | None = None) -> None:
    """--perf under the CPU interpreter, as `eval` has it: refused (ValueError) without --force,
    with what it would cost (`tasks` None: per perf case, the task is not built yet); with
    --force that cost is said up front. `kernels`: timed kernels per task at most (default:
    --runs x --iterations, and optimize's own kernel)."""
    from ..judge import DeviceUnavailable, JudgeOptions

    if not opts.perf:
        return
    from ..scale.executor import judge_backend

    try:
        if judge_backend(opts.executor, opts.address, opts.device) != "cpu":
            return
    except DeviceUnavailable:
        return  # the judge pool says so, with the usual message
    blocks = JudgeOptions().perf_blocks
    kernels = kernels or opts.runs * (opts.iterations + (opts.kernel is not None))
    cost = _interpreter_cost(tasks, blocks, kernels, opts.max_perf_cases)
    if not opts.force:
        raise ValueError(f"--perf under Triton's CPU interpreter refused: {cost}. Timing the interpreter says "
                         "nothing about the kernel's speed on a GPU; run it on a GPU machine, or add --force to "
                         "time it here anyway")
    Console(stderr=True).print(f"[yellow]--force:[/] timing under the CPU interpreter: {escape(cost)}",
                               highlight=False, soft_wrap=True)


def _interpreter_cost(tasks: list | None, blocks: int, kernels: int, max_cases: int | None = None) -> str:
    """What timing `kernels` kernels of each task costs under the interpreter, in words
    (`max_cases`: --max-perf-cases)."""
    from .judge_cmds import interpreter_perf_cost, perf_cases_timed

    if tasks is None:
        per_case = 2 * (2 * blocks + 2)  # each side: the perf-size check, a warm-up, two calls per block
        return f"each perf case of the task takes at least {per_case} calls at perf sizes, per timed kernel"
    costs = [interpreter_perf_cost(t, blocks, max_cases) for t in tasks]
    calls, low, high = (sum(c[i] for c in costs) for i in range(3))
    cases = sum(perf_cases_timed(t, max_cases) for t in tasks)
    if len(tasks) == 1:
        what = f"task {tasks[0].name} has {cases} perf case(s): at least {calls} calls at perf sizes per timed kernel"
    else:
        what = (f"the {len(tasks)} tasks have {cases} perf cases: at least {calls} calls at perf sizes to time one "
                f"kernel of each")
    return (f"{what}, about {low:.0f}-{high:.0f} min each, for up to {kernels} kernels"
            f"{' per task' if len(tasks) > 1 else ''} (about {kernels * low:.0f}-{kernels * high:.0f} min)")


def chosen_model(opts: AgentOptions) -> str:
    """The model's id, after checking that it can be reached as configured (key, URL): a run
    directory is created only for a run that can start."""
    from ..llm import LLMConfigError, parse_model
    from ..llm.settings import load_llm_settings

    _, settings = load_llm_settings(opts.config_path, model=opts.model, **llm_flags(opts))
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


# -- task-runs in flight -----------------------------------------------------------------------
RUNS_PER_WORKER = 4  # task-runs in flight per judge worker (bench; any agent command on Ray)


def task_runs_in_flight(spec: RunSpec, opts: AgentOptions) -> int:
    """Task-runs in flight (--concurrency, else 4 per judge worker), so the workers have candidates
    while other task-runs wait for the model (a model answering in 4x a verdict's time keeps them
    busy); the provider's own bound (--llm-concurrency) still caps the requests in flight. With
    --executor ray the workers are the cluster's judging actors, one per GPU (bench; generate and
    optimize on Ray: their --runs spread over the cluster's GPUs)."""
    if opts.concurrency:
        return opts.concurrency
    from ..judge import detect_backend
    from ..judge.coordinator.backend import default_workers_per_device

    if opts.executor == "ray":  # one judging actor per GPU of the cluster
        from ..scale.raypool import cluster_slots, connect

        connect(opts.address)
        return max(1, RUNS_PER_WORKER * cluster_slots())
    backend, count = detect_backend(spec.device)
    count = len(opts.gpus.split(",")) if opts.gpus and backend != "cpu" else count
    workers = count if backend == "cpu" else count * (opts.workers_per_device or default_workers_per_device(count))
    return max(1, RUNS_PER_WORKER * workers)


# -- the model's preflight ---------------------------------------------------------------------
class ModelDoesNotAnswer(ValueError):
    """The preflight's ping failed: the run does not start (exit status 2)."""


def preflight_model(model: str, opts: AgentOptions, spec: Any = None) -> None:
    """Ping the model as the run will call it (ModelDoesNotAnswer, for an exit status 2, when it
    does not answer); offline, nothing: the run answers from the cache only."""
    from ..llm.preflight import check_model
    from ..llm.settings import load_llm_settings

    _, settings = load_llm_settings(opts.config_path, model=model, **llm_flags(opts, spec))
    if settings.offline:
        return
    Console(stderr=True).print(f"checking the model at {escape(_where(model, settings))}…", highlight=False,
                               soft_wrap=True)  # (a server that never answers holds this line for seconds)
    result = check_model(model, settings)
    if not result.ok:
        again = (f"kernelwright {spec.command} --resume {spec_dir(opts)}" if spec is not None
                 else "the same command")
        raise ModelDoesNotAnswer(f"the model does not answer, so the run does not start: {result.detail}. "
                                 f"Check it with `{doctor_command(model, opts, spec)}`, then run {again}"
                                 + (" (or add --offline to replay only what the run's cache holds)" if spec else ""))


def _where(model: str, settings: Any) -> str:
    """The endpoint the ping goes to: its URL, or the provider's own service."""
    from ..llm import LLMError, parse_model

    try:
        endpoint = settings.endpoint(parse_model(model))
    except LLMError:
        return model
    return endpoint.base_url or f"{endpoint.model.provider}'s API"


def doctor_command(model: str, opts: AgentOptions, spec: Any = None) -> str:
    """`kernelwright doctor` for the model as this command calls it: with the --base-url (given,
    or the resumed run's) and the --config the run reads, which doctor would not find alone."""
    import shlex

    words = ["kernelwright", "doctor", "--model", model]
    base_url = llm_flags(opts, spec)["base_url"]
    if base_url:
        words += ["--base-url", base_url]
    if opts.config_path is not None:
        words += ["--config", str(opts.config_path)]
    return shlex.join(words)


@dataclass(frozen=True)
class DeferredPing:
    """optimize's preflight, run by the session once the user's kernel is judged and only when the
    model will be asked something; `out`: the new run directory, removed when the ping fails
    (a run that cannot start leaves nothing behind)."""

    model: str
    opts: AgentOptions
    out: Path | None

    def __call__(self) -> None:
        preflight_model(self.model, self.opts)

    def discard(self) -> None:
        if self.out is not None:
            shutil.rmtree(self.out, ignore_errors=True)


def spec_dir(opts: AgentOptions) -> str:
    return str(opts.resume) if opts.resume is not None else str(opts.out)


# -- what a resume may change ------------------------------------------------------------------
@dataclass(frozen=True)
class ResumePlan:
    spec: RunSpec                          # the run's spec with the extensions applied
    changes: tuple[str, ...]               # "--iterations 3 -> 5", ...
    reopen: tuple[tuple[str, int], ...]    # ended task-runs the extensions continue
    stored: int                            # iterations stored (the model's attempts)
    to_go: int                             # iterations left at most, once reopened


def _stored_value(spec: RunSpec, name: str) -> tuple[bool, Any]:
    """(comparable, the run's value) of a flag that changes what the run is."""
    settings = {"llm_seed": "seed", "temperature": "temperature", "max_debug_attempts": "max_debug_attempts",
                "one_shot": "one_shot", "knowledge": "knowledge", "reflection": "reflection",
                "optimizer": "optimizer", "tune": "tune", "tune_variants": "tune_variants",
                "search": "search", "migrate_every": "migrate_every"}
    if name in settings:
        return True, getattr(spec.settings, settings[name])
    if name in ("profile", "no_profile"):  # (one setting of the run's: its profile level)
        return True, spec.profile if name == "profile" else spec.profile == "off"
    if name in ("device", "judge_seeds", "judge_base_seed", "perf", "timeout_scale", "sandbox",
                "max_perf_cases", "mode", "model", "shrink") or (name == "suite" and spec.command == "bench"):
        return True, getattr(spec, name)
    return False, None  # the task, its files, the prompts, the corpus: refused whenever given


def _given_value(opts: AgentOptions, name: str) -> Any:
    if name == "model" and opts.model:
        from ..llm import LLMError, parse_model

        try:
            return parse_model(opts.model).id  # "openai-compatible/m" and its spelled-out forms alike
        except LLMError:
            return opts.model
    return getattr(opts, name)


def _flag(name: str) -> str:
    return {"config_path": "--config", "as_json": "--json", "one_shot": "--one-shot/--no-one-shot",
            "knowledge": "--knowledge/--no-knowledge", "reflection": "--reflection/--no-reflection",
            "optimizer": "--optimizer/--no-optimizer", "tune": "--tune/--no-tune",
            "perf": "--perf/--no-perf", "instruction": "INSTRUCTION", "kernel": "KERNEL"
            }.get(name, "--" + name.replace("_", "-"))


def refused_flags(spec: RunSpec, opts: AgentOptions) -> list[str]:
    """The given flags a resume cannot take, each with the run's own value where it has one."""
    refused = []
    for name in sorted(opts.given - set(EXTENDABLE) - set(MACHINE)):
        if name == "out":
            refused.append("--out (the run directory is --resume's)")
            continue
        if name == "migrate_every" and spec.settings.search != "evolve":
            refused.append(f"--migrate-every (the run's search: {spec.settings.search}; only evolve has epochs)")
            continue
        comparable, stored = _stored_value(spec, name)
        if not comparable:
            refused.append(_flag(name))
        elif _given_value(opts, name) != stored:
            refused.append(f"{_flag(name)} (the run's: {stored})")
    return refused


def plan_resume(store: RunStore, spec: RunSpec, opts: AgentOptions) -> ResumePlan:
    """What resuming `spec` with these flags does (ValueError for a flag it cannot take)."""
    refused = refused_flags(spec, opts)
    if refused:
        raise ValueError(f"a resumed run keeps what it was started with; cannot change {', '.join(refused)}. "
                         f"A resume takes --iterations, --runs and the budgets (--max-cost, --max-tokens, "
                         f"--time-limit and their --task- forms) to extend the run; to change anything "
                         f"else, start a new run (another --out)")
    new_spec, changes = _extended(spec, opts)
    more_iterations = new_spec.settings.iterations > spec.settings.iterations
    budgets = bool(set(BUDGETS) & opts.given)
    reopen = tuple(sorted(key for key, end in store.ended().items()
                          if (end["reason"] == "all iterations done" and more_iterations)
                          or (budgets and _budget_reason(end["reason"]))))
    stored, to_go = _counts(store, new_spec, set(reopen))
    return ResumePlan(new_spec, tuple(changes), reopen, stored, to_go)


def _budget_reason(reason: str) -> bool:
    """A task-run ended by a budget (agent/budget.py's reasons), which a new budget may lift."""
    return "budget is spent" in reason or "time limit is reached" in reason


def _extended(spec: RunSpec, opts: AgentOptions) -> tuple[RunSpec, list[str]]:
    """The spec with the given --iterations, --runs and budgets; a count may only grow."""
    from ..agent.bench import BENCH_MODES

    settings, changes = spec.settings, []
    for name in ("iterations", "runs"):
        old, new = getattr(settings, name), getattr(opts, name)
        if name not in opts.given or new == old:
            continue
        if new < old:
            raise ValueError(f"--{name} {new}: the run has {old}; a resumed run can only be extended")
        if name in BENCH_MODES.get(spec.mode, {}):
            raise ValueError(f"--{name}: bench --mode {spec.mode} makes {old} per run; it cannot be changed")
        settings = replace(settings, **{name: new})
        changes.append(f"--{name} {old} -> {new}")
    limits = {"run_limits": spec.run_limits, "task_limits": spec.task_limits}
    for name in BUDGETS:
        if name not in opts.given:
            continue
        scope, field = ("task_limits", name[5:]) if name.startswith("task_") else ("run_limits", name)
        old = getattr(limits[scope], field)
        if getattr(opts, name) != old:
            limits[scope] = replace(limits[scope], **{field: getattr(opts, name)})  # checked positive
            changes.append(f"--{name.replace('_', '-')} {old if old is not None else 'none'} -> {getattr(opts, name)}")
    return replace(spec, settings=settings, **limits), changes


def _counts(store: RunStore, spec: RunSpec, reopened: set[tuple[str, int]]) -> tuple[int, int]:
    """(the model's attempts stored, iterations left at most) over the spec's task-runs."""
    done = Counter((a.task, a.run) for a in store.attempts() if a.mode.by_llm)
    ended = set(store.ended()) - reopened
    iterations = spec.settings.iterations
    started = [key for key in done if key not in ended]
    fresh = len(spec.task_refs) * spec.settings.runs - len(ended) - len(started)
    return sum(done.values()), sum(max(0, iterations - done[k]) for k in started) + max(0, fresh) * iterations


def _stopped_at_the_start(store: RunStore, spec: RunSpec) -> None:
    """optimize without --fix-start that stopped at the user's failing kernel: nothing to resume
    (ValueError, saying how to start the run that fixes it)."""
    from ..agent.memory import Mode

    if spec.command != "optimize" or spec.settings.fix_start:
        return
    attempts = store.attempts()
    if any(a.mode.by_llm for a in attempts) or not any(a.mode == Mode.GIVEN and not a.passed for a in attempts):
        return
    raise ValueError(f"{store.run_dir} stopped at your kernel's verdict before asking the model anything, so there "
                     "is nothing to resume: fix the kernel, or start a new run with --fix-start (another --out, "
                     "or remove this one)")


def resume(store: RunStore, spec: RunSpec, opts: AgentOptions) -> RunSpec:
    """Check the flags, ping the model when work is left, then apply the extensions and say what
    is resumed. Nothing is written before every check has passed."""
    _stopped_at_the_start(store, spec)
    plan = plan_resume(store, spec, opts)
    if plan.to_go > 0:
        preflight_model(spec.model, opts, spec)
    if plan.changes:
        store.put_meta("spec", plan.spec.to_dict())
    store.reopen_task_runs(plan.reopen)
    from .usage import plural

    what = f"{plural(plan.stored, 'attempt')} stored, {plan.to_go} to go"
    if plan.changes:
        what += f" ({', '.join(plan.changes)})"
    elif plan.to_go == 0:
        what += " (the run is complete; --iterations N extends it)"
    Console(stderr=True).print(f"resuming {escape(str(store.run_dir))}: {escape(what)}", highlight=False,
                               soft_wrap=True)  # one line: the run directory is copied from it
    return plan.spec
