"""The flags every command shares, defined once: one name per meaning, the same on every command
that has that meaning (docs/cli.md's table lists them).

    --tasks A,B            a set of a suite's tasks: repeatable and comma lists (--tasks a,b --tasks c)
    --judge-seeds N        the judge: fresh input seeds per correctness case
    --judge-base-seed S    the judge: base of those seeds, for a reproducible run (default random)
    --llm-seed S           the LLM: base sampling seed (run r uses S + r; default random)
    --concurrency N        the agent: task-runs in flight
    --llm-concurrency N    the LLM: requests in flight per provider
    --workers-per-device N the judge: worker processes per GPU (timing stays exclusive)
    --timeout-scale X      the judge: multiplies every stage's time limit
    --sandbox LEVEL        the judge: how candidates are confined (auto, strict, off)
    --shrink F             the tasks: problem sizes shrunk to about F of their bytes (smoke runs)
    --search MODE          the agent: independent runs, or an archive shared by a task's runs (evolve)
    --migrate-every N      the agent, with --search evolve: iterations per epoch (islands migrate after each)
    --executor local|ray   the judge: workers on this host, or one actor per GPU of a Ray cluster
    --address ADDRESS      the judge: the Ray cluster to join (--executor ray; default: a local Ray)
    --gpus I,J             the judge: only these GPUs of this host (--executor local)

`AgentOptions` holds every option of the agent commands (generate, optimize, bench), typed, with
its default written once here; the commands' signatures take their defaults from it. Flags that
were renamed give an error naming their new name (`RENAMED`, `Command`).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..agent.archive import DEFAULT_MIGRATE_EVERY

try:  # recent typer vendors click (typer._click); older ones sit on the click package
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import UsageError
from typer.core import TyperCommand

if TYPE_CHECKING:
    from ..agent.app import RunSpec
    from ..judge import JudgeOptions

# -- the shared flags --------------------------------------------------------------------------
TasksOpt = Annotated[list[str] | None, typer.Option(
    "--tasks", metavar="NAME[,NAME...]",
    help="only these tasks of the suite: comma-separated, repeatable (--tasks a,b --tasks c); "
         "`kernelwright tasks --suite S` lists them")]
JudgeSeedsOpt = Annotated[int, typer.Option(
    "--judge-seeds", min=1, max=50, metavar="N",
    help="the judge's seeds: fresh input seeds per correctness case")]
JudgeBaseSeedOpt = Annotated[int | None, typer.Option(
    "--judge-base-seed", metavar="S",
    help="the judge's base seed: the same input seeds every run (default: fresh random ones)")]
LLMSeedOpt = Annotated[int | None, typer.Option(
    "--llm-seed", metavar="S", help="the LLM's base sampling seed: run r samples with S + r (default random)")]
ConcurrencyOpt = Annotated[int | None, typer.Option(
    "--concurrency", min=1, metavar="N",
    help="the agent's task-runs in flight (default: every run; bench, and --executor ray: 4 per "
         "judge worker)")]
LLMConcurrencyOpt = Annotated[int | None, typer.Option(
    "--llm-concurrency", min=1, metavar="N",
    help="LLM requests in flight per provider (default: llm.max_concurrency, 4)")]
WorkersPerDeviceOpt = Annotated[int | None, typer.Option(
    "--workers-per-device", min=1, max=16, metavar="N",
    help="judge workers per GPU, checking candidates side by side (timing stays exclusive; default: "
         "one per two CPU cores of each GPU's share, at most 8, and no more than the agent's task-runs "
         "in flight; eval: 1; not used on the CPU)")]
TimeoutScaleOpt = Annotated[float, typer.Option(
    "--timeout-scale", min=0.01, metavar="X",
    help="multiply every judge time limit (0.3: give up sooner on hangs; 2: slow machines)")]

SandboxOpt = Annotated[str, typer.Option(
    "--sandbox", metavar="auto|strict|off",
    help="how candidates are confined: auto (what this machine gives; `kernelwright doctor` says "
         "what that is), strict (refuse to judge without files, network and signals confined), "
         "off (none); README: what the sandbox protects")]

ProfileOpt = Annotated[str, typer.Option(
    "--profile", metavar="off|basic|full",
    help="profile each passing candidate and its reference on the largest timed shape: basic (Triton's "
         "metadata and the judge's timings, per own kernel launch, with a diagnosis), full (also Nsight "
         "Compute / rocprof counters), off; never changes a verdict")]
SearchOpt = Annotated[str, typer.Option(
    "--search", metavar="independent|evolve",
    help="independent: the runs do not share anything (GEAK's parallel scaling); evolve: a task's "
         "runs share one archive of judge-verified kernels (islands, migration, inspirations, "
         "crossover; docs/agent.md)")]
MigrateEveryOpt = Annotated[int, typer.Option(
    "--migrate-every", min=1, metavar="N",
    help=f"with --search evolve: iterations per epoch; after every N iterations of its own, each run "
         f"(island) receives every other run's best kernel so far (default {DEFAULT_MIGRATE_EVERY}; "
         f"without --search evolve: exit 2)")]
ExecutorOpt = Annotated[str, typer.Option(
    "--executor", metavar="local|ray",
    help="where the judge's workers run: local (this host's GPUs) or ray (one actor per GPU of a Ray "
         "cluster; pip install 'kernelwright[ray]'; docs/scaling.md)")]
AddressOpt = Annotated[str | None, typer.Option(
    "--address", metavar="ADDRESS",
    help="with --executor ray: the cluster to join (host:port, ray://host:10001, or auto); default: "
         "start a local Ray")]
GpusOpt = Annotated[str | None, typer.Option(
    "--gpus", metavar="I,J",
    help="judge on these GPUs of this host only, by the indices `kernelwright doctor` lists (each worker "
         "pinned through CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES); default: every GPU")]
NoProfileOpt = Annotated[bool, typer.Option("--no-profile", help="no profile (= --profile off)")]


def _shrink_factor(value: float | None) -> float | None:
    from ..tasks.shrink import check_factor

    try:
        return check_factor(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix("--shrink must be ")) from None


ShrinkOpt = Annotated[float | None, typer.Option(
    "--shrink", metavar="F", callback=_shrink_factor,
    help="smoke runs on small machines: shrink every case's problem sizes to about F (0 < F <= 1) of "
         "their bytes; recorded in every verdict and the metrics as shrunk (docs/suites.md)")]


def shrunk_tasks(tasks: Iterable[Any], factor: float | None) -> list[Any]:
    """The tasks at sizes shrunk by --shrink (tasks/shrink.py); a task whose sizes cannot be
    scaled (a GEAK or TritonBench-T task) is a ValueError naming it, for a usage error."""
    from ..tasks.shrink import shrink_task

    return [shrink_task(task, factor) for task in tasks]


def profile_level(profile: str, no_profile: bool = False) -> str:
    """The judge's profile level from --profile and --no-profile; a usage error (exit 2) for a
    level that is not one of off, basic, full."""
    from ..judge.common.options import PROFILE_LEVELS

    if profile not in PROFILE_LEVELS:
        raise UsageError(f"--profile must be one of {', '.join(PROFILE_LEVELS)}, got {profile!r}")
    return "off" if no_profile else profile


# The judge's time limits that --timeout-scale multiplies (JudgeOptions' fields).
TIMEOUT_FIELDS = ("load_timeout", "call_timeout", "case_timeout", "perf_timeout", "compile_timeout", "run_timeout")


def judge_options(*, judge_seeds: int, judge_base_seed: int | None = None, perf: bool | None = None,
                  timeout_scale: float = 1.0, **more: Any) -> JudgeOptions:
    """The judge's options from the shared flags (and any other JudgeOptions field in `more`)."""
    from ..judge import JudgeOptions

    options = JudgeOptions(seeds=judge_seeds, seed=judge_base_seed, perf=perf, **more)
    if timeout_scale != 1.0:
        options = replace(options, **{name: getattr(options, name) * timeout_scale for name in TIMEOUT_FIELDS})
    return options


def parse_tasks(values: Iterable[str] | None) -> tuple[str, ...]:
    """--tasks as given, any number of times, each a comma list: the names in order, once each
    (empty: all tasks)."""
    names: list[str] = []
    for value in values or ():
        for name in value.split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return tuple(names)


class TasksAction(argparse.Action):
    """--tasks for the argparse scripts in benchmarks/, as on the CLI: space-separated names,
    comma lists and repeats add up (`--tasks a b,c --tasks d`); a default is replaced, not extended."""

    def __call__(self, parser, namespace, values, option_string=None):
        current = getattr(namespace, self.dest, None)
        current = [] if current is None or current is self.default else list(current)
        setattr(namespace, self.dest, list(parse_tasks([*current, *values])))


def add_tasks_argument(parser: argparse.ArgumentParser, **kwargs: Any) -> None:
    kwargs.setdefault("help", "task names: space- or comma-separated, repeatable")
    parser.add_argument("--tasks", nargs="+", action=TasksAction, metavar="NAME[,NAME...]", **kwargs)


# -- renamed flags -----------------------------------------------------------------------------
RENAMED = {
    "--seed": "the LLM's sampling seed is now --llm-seed (generate, optimize, bench), the judge's base "
              "seed --judge-base-seed (eval, judge-suite, generate, optimize, bench)",
    "--seeds": "it is now --judge-seeds (the judge's fresh input seeds per correctness case)",
    "--concurrency": "LLM requests in flight per provider is --llm-concurrency; --concurrency (the "
                     "agent's task-runs in flight) belongs to generate, optimize and bench",
}


def renamed_flag(args: Sequence[str], known: set[str]) -> str | None:
    """The first renamed flag in `args` that this command does not take, with its message."""
    for arg in args:
        if arg == "--":
            break
        name = arg.split("=", 1)[0]
        if name in RENAMED and name not in known:
            return f"no option {name}: {RENAMED[name]}"
    return None


class Command(TyperCommand):
    """A typer command that answers a renamed flag with its new name (exit status 2)."""

    def parse_args(self, ctx, args):
        known = {opt for param in self.params for opt in (*getattr(param, "opts", ()),
                                                          *getattr(param, "secondary_opts", ()))}
        message = renamed_flag(args, known)
        if message is not None:
            raise UsageError(message, ctx=ctx)
        return super().parse_args(ctx, args)


# -- the agent commands' options ---------------------------------------------------------------
@dataclass(frozen=True)
class AgentOptions:
    """Every option of generate, optimize and bench, typed; the defaults are written here only."""

    # the task (generate, optimize)
    instruction: str | None = None
    entry: str | None = None
    reference: Path | None = None
    tests: Path | None = None
    name: str | None = None
    kernel: Path | None = None                    # optimize: the user's working kernel
    fix_start: bool = False                       # optimize: fix the user's kernel when it fails
    task: str | None = None
    suite: str = "builtin"
    path: Path | None = None
    # bench
    tasks: tuple[str, ...] = ()
    mode: str = "geak"
    tune_variants: int = 12
    max_perf_cases: int | None = None
    # the model
    model: str | None = None
    base_url: str | None = None
    no_cache: bool = False
    offline: bool = False
    config_path: Path | None = None
    llm_seed: int | None = None
    llm_concurrency: int | None = None
    temperature: float = 1.0
    # the loop
    runs: int = 1
    iterations: int = 10
    max_debug_attempts: int = 5
    one_shot: bool = True
    knowledge: bool = True
    optimizer: bool = True
    reflection: bool = True
    tune: bool = False
    search: str = "independent"                   # --search: independent runs, or one archive per task
    migrate_every: int = DEFAULT_MIGRATE_EVERY    # --migrate-every: evolve's iterations per epoch
    concurrency: int | None = None
    prompts: Path | None = None
    corpus: tuple[Path, ...] = ()
    # budgets
    max_cost: float | None = None
    max_tokens: int | None = None
    time_limit: float | None = None
    task_max_cost: float | None = None
    task_max_tokens: int | None = None
    task_time_limit: float | None = None
    # the judge
    device: str = "auto"
    judge_seeds: int = 3
    judge_base_seed: int | None = None
    perf: bool | None = None
    force: bool = False                           # --perf under the CPU interpreter anyway
    timeout_scale: float = 1.0
    workers_per_device: int | None = None
    sandbox: str = "auto"
    profile: str = "basic"                        # --profile (off, basic, full)
    shrink: float | None = None                   # --shrink F (None: the problems' own sizes)
    no_profile: bool = False                      # --no-profile: --profile off (the ablation switch)
    executor: str = "local"                       # --executor: local workers, or Ray actors
    address: str | None = None                    # --address: the Ray cluster (None: a local Ray)
    gpus: str | None = None                       # --gpus 0,2: these GPUs of this host (local executor)
    # the run
    out: Path | None = None
    resume: Path | None = None
    as_json: bool = False
    # the options given on the command line, not defaulted: what a --resume is asked to change
    given: frozenset[str] = frozenset()

    @classmethod
    def from_params(cls, params: Mapping[str, Any], given: Iterable[str] = ()) -> AgentOptions:
        """From a command's parsed parameters (typer's `ctx.params`): every one must be a field,
        so an option added to a command without a field here fails at once; lists become tuples,
        --tasks is parsed (comma lists, repeatable)."""
        names = {f.name for f in fields(cls)} - {"given"}
        unknown = set(params) - names
        if unknown:
            raise TypeError(f"AgentOptions has no field for {sorted(unknown)}")
        values = dict(params)
        values["tasks"] = parse_tasks(values.get("tasks"))
        values["corpus"] = tuple(values.get("corpus") or ())
        return cls(**values, given=frozenset(given))

    @classmethod
    def from_context(cls, ctx: Any) -> AgentOptions:
        """From a command's context: its parameters, and which of them the user gave."""
        given = [name for name in ctx.params
                 if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")]
        return cls.from_params(ctx.params, given)

    def check_search(self) -> None:
        """ValueError (a usage error) for --migrate-every without --search evolve: only the evolve
        search has epochs. A resume checks it against the run's own search (agent_runs)."""
        if "migrate_every" in self.given and self.search != "evolve" and self.resume is None:
            raise ValueError(f"--migrate-every is for --search evolve (it sets how many iterations run between "
                             f"migrations of the shared archive); this run's search is {self.search}")

    def run_spec(self, command: str, *, task_refs: tuple[str, ...], model: str,
                 task_names: tuple[str, ...] = (), start_codes: dict[str, str] | None = None, unsupported: dict[str, str] | None = None
                 ) -> RunSpec:
        """The spec of a new run (`agent.app.RunSpec`) from these options: the one place where
        flags become the run's settings. A missing --llm-seed draws one now."""
        from ..agent.app import RunSpec, new_seed
        from ..agent.bench import settings_for
        from ..agent.budget import Limits

        self.check_search()
        settings = settings_for(
            self.mode, iterations=self.iterations, runs=self.runs,
            seed=self.llm_seed if self.llm_seed is not None else new_seed(),
            ablations={"one_shot": self.one_shot, "knowledge": self.knowledge,
                       "reflection": self.reflection, "optimizer": self.optimizer},
            max_debug_attempts=self.max_debug_attempts, temperature=self.temperature, tune=self.tune,
            tune_variants=self.tune_variants)
        if self.fix_start:
            settings = replace(settings, fix_start=True)
        if self.search != "independent":
            settings = replace(settings, search=self.search, migrate_every=self.migrate_every)
        return RunSpec(
            command, tuple(task_refs), model, settings,
            run_limits=Limits(self.max_cost, self.max_tokens, self.time_limit),
            task_limits=Limits(self.task_max_cost, self.task_max_tokens, self.task_time_limit),
            start_codes=dict(start_codes or {}),
            corpus=tuple(str(Path(p).expanduser().resolve()) for p in self.corpus),
            prompts_dir=str(Path(self.prompts).resolve()) if self.prompts else None,
            device=self.device, judge_seeds=self.judge_seeds, perf=self.perf,
            max_perf_cases=self.max_perf_cases, suite=self.suite if command == "bench" else "",
            unsupported=dict(unsupported or {}), mode=self.mode, base_url=self.base_url,
            judge_base_seed=self.judge_base_seed, timeout_scale=self.timeout_scale,
            sandbox=self.sandbox, profile=profile_level(self.profile, self.no_profile),
            task_names=tuple(task_names), shrink=self.shrink)


AGENT = AgentOptions()  # the defaults, for the commands' signatures
