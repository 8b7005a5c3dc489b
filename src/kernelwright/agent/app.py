"""Wiring for the agent commands (`generate`, `optimize`, and `bench` later): a run's spec, its
run directory, the LLM client with the run's cache, the judge pool, the knowledge and the
retriever, put together into a session.

The spec is stored in the run directory when a run starts; `--resume RUN_DIR` reads it back, so
a resumed run asks exactly what the killed one asked (same tasks, seeds, prompts, settings).
"""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, cast

from ..store import RunStore, StoreError
from .budget import Budget, Limits
from .loop import AgentSettings, RunContext
from .memory import Attempt
from .protocols import LLM, Judge
from .results import TaskResult

if TYPE_CHECKING:
    from ..llm import LLMClient
    from .session import AgentSession


@dataclass(frozen=True)
class RunSpec:
    command: str                                  # generate | optimize
    task_refs: tuple[str, ...]                    # reloadable task references (files, suite refs)
    model: str
    settings: AgentSettings
    run_limits: Limits = Limits()
    task_limits: Limits = Limits()
    start_codes: dict[str, str] = field(default_factory=dict)   # task name -> the user's kernel
    corpus: tuple[str, ...] = ()
    prompts_dir: str | None = None
    device: str = "auto"
    judge_seeds: int = 3
    perf: bool | None = None                      # None: timed on GPUs, not under the interpreter
    max_perf_cases: int | None = None             # time at most this many shapes per task (evenly spread)
    suite: str = ""                               # bench: the suite's name
    unsupported: dict[str, str] = field(default_factory=dict)   # bench: tasks that cannot run here, why
    mode: str = "geak"                            # bench: the agent or one of the paper's baselines
    base_url: str | None = None                   # --base-url of the run (a resume reuses it); never a key
    judge_base_seed: int | None = None            # the judge's base seed (None: fresh random input seeds)
    timeout_scale: float = 1.0                    # multiplies every judge time limit
    sandbox: str = "auto"                         # how the judge confines candidates (--sandbox)
    profile: str = "basic"                        # the judge's profile of passing candidates (--profile)
    # the tasks' own names, one per task_refs entry: attempts are stored under these, so the
    # metrics count by them (a ref's text need not be the name: KernelBench's level1/19_ReLU.py
    # is the task L1_19_ReLU). Empty in runs from before this field: see task_names_of.
    task_names: tuple[str, ...] = ()
    # --shrink F: the tasks were judged at sizes shrunk by F (their refs say so too:
    # "shrunk:F:..."); None: at their own sizes
    shrink: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSpec":
        data = dict(data)
        data["task_refs"] = tuple(data["task_refs"])
        data["corpus"] = tuple(data.get("corpus", ()))
        data["task_names"] = tuple(data.get("task_names", ()))
        data["settings"] = AgentSettings(**data["settings"])
        data["run_limits"] = Limits(**data.get("run_limits", {}))
        data["task_limits"] = Limits(**data.get("task_limits", {}))
        return cls(**data)


def new_seed() -> int:
    return secrets.randbelow(2**31 - 1)


def wrong_command_message(out: Path | str, started_by: str, asked: str) -> str:
    """Why `kernelwright ASKED --resume OUT` is refused: OUT is a run of another command (a
    generate run is resumed by generate, an optimize run by optimize, a bench run by bench)."""
    return (f"{out}: this run was started by `kernelwright {started_by}`, not `kernelwright {asked}`; "
            f"resume it with `kernelwright {started_by} --resume {out}`")


def open_run(out: Path, spec: RunSpec | None, resume: bool, command: str | None = None) -> tuple[RunStore, RunSpec]:
    """The store and the spec: a new run writes its spec; a resumed one reads it back (and must
    be a run of `command`, when given: each agent command resumes only its own runs)."""
    if resume:
        if not (Path(out).expanduser() / "run.sqlite").is_file() and not Path(out).expanduser().is_dir():
            raise StoreError(f"{out}: no such directory; pass the --out directory of an earlier run")
        store = RunStore(out, create=False, decode=Attempt.from_dict)
        stored = store.get_meta("spec")
        if stored is None:
            raise StoreError(f"{out} holds no run spec: it was not written by generate/optimize/bench")
        spec = RunSpec.from_dict(stored)
        if command is not None and spec.command != command:
            store.close()
            raise StoreError(wrong_command_message(out, spec.command, command))
        return store, spec
    if spec is None:
        raise ValueError("a new run needs a spec")
    store = RunStore(out, decode=Attempt.from_dict)
    if store.get_meta("spec") is not None:
        store.close()
        raise StoreError(f"{out} already holds a run: pass --resume {out} to continue it, or another --out")
    store.put_meta("spec", spec.to_dict())
    return store, spec


def make_llm(spec: RunSpec, store: RunStore, config_path: Path | None, flags: dict[str, Any]) -> LLMClient:
    """The LLM client with the run's own cache first (a resume is free) and the user's global
    cache behind it when that is on."""
    from ..llm import LLMClient, ResponseCache
    from ..llm.settings import load_llm_settings
    from .session import RunCache

    _, settings = load_llm_settings(config_path, model=spec.model, **flags)
    shared = ResponseCache(settings.cache_path) if settings.cache else None
    cache = RunCache(ResponseCache(store.run_dir / "llm-cache.sqlite"), shared)
    # the run cache is always on: offline replay of a killed run must work with --no-cache too
    # (RunCache has ResponseCache's get/put; LLMClient's parameter names the class, not a protocol)
    return LLMClient(spec.model, replace(settings, cache=True), cache=cast(ResponseCache, cache),
                     tags={"run": str(store.run_dir)})


def load_tasks(refs: tuple[str, ...]):
    from ..tasks import load_task_ref

    return [load_task_ref(ref) for ref in refs]


def knowledge_for(device_info: dict, backend: str, config_path: Path | None) -> tuple[str, str]:
    """(vendor name for the prompt, knowledge text: the Triton guide and the judged GPU's figures,
    `[gpu]` of kernelwright.toml overriding them)."""
    from .knowledge import detect_gpu, knowledge_text

    spec = detect_gpu(device_info, config_path=config_path)
    name = {"hip": "AMD", "cuda": "NVIDIA"}.get(backend, "NVIDIA and AMD")
    return name, knowledge_text("cpu" if backend == "cpu" else backend, spec)


def untimed_reason(perf: bool | None, backend: str) -> str:
    """Why the judge times nothing on this run ("": it times), as the judge decides it
    (JudgeOptions.resolved: None times on GPUs, not under the CPU interpreter)."""
    if perf is None:
        return "CPU interpreter" if backend == "cpu" else ""
    return "" if perf else "--no-perf"


def run_session(spec: RunSpec, store: RunStore, llm: LLM, judge: Judge, *, device_info: dict, backend: str,
                config_path: Path | None = None, on_event: Callable[[str, dict], None] = lambda k, d: None,
                concurrency: int | None = None, session_hook: Callable[[AgentSession], None] | None = None,
                before_calls: Callable[[], None] | None = None) -> tuple[list[TaskResult], list[str]]:
    """Every task-run of the spec. The user's starting kernels (optimize) are judged first; then
    `before_calls` (the model's ping) runs, only when some task-run will call the model: a failing
    starting kernel without fix_start sends no request at all."""
    from .prompts import PromptLibrary
    from .session import AgentSession, make_retrieve

    tasks = load_tasks(spec.task_refs)
    backend_name, knowledge = knowledge_for(device_info, backend, config_path)
    ctx = RunContext(
        llm=llm, judge=judge, store=store, prompts=PromptLibrary(spec.prompts_dir), settings=spec.settings,
        budget=Budget(store, spec.run_limits, spec.task_limits), backend_name=backend_name, knowledge=knowledge,
        retrieve=make_retrieve([Path(p) for p in spec.corpus]) if spec.settings.one_shot else None,
        on_event=on_event, untimed=untimed_reason(spec.perf, backend))
    # metrics.json (bench-report, later and elsewhere) says why nothing was timed
    store.put_meta("untimed", ctx.untimed)
    session = AgentSession(store, tasks, ctx, spec.start_codes,
                           concurrency or max(1, len(tasks) * spec.settings.runs))
    if session_hook is not None:
        session_hook(session)
    session.judge_given()
    if before_calls is not None and session.needs_model():
        before_calls()
    results = session.run()
    return results, session.errors
