"""The judge's options, one dataclass per place they are decided, each with its defaults written
once, here:

- `JudgeOptions`: how a candidate is judged (seeds, time limits, timing protocol, tolerances of
  the measurement). Made by the coordinator, sent to the worker with every candidate as a plain
  dict (`to_wire`), rebuilt there (`from_wire`) and read by the worker's stages as attributes.
- `WorkerOptions`: what the coordinator tells a worker once, when it starts it.
- `ChildOptions`: what a worker gives each child it forks (handed over by the fork itself).

`from_wire` rejects a key it does not know: the two ends are one version of the code, so an
unknown key is a bug (a renamed field, a typo), and reading it silently as the default would
hide it.
"""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

_T = TypeVar("_T")

# `JudgeOptions.profile`: off; basic (Triton's metadata and the judge's timings, always available
# on a GPU); full (basic, and Nsight Compute / rocprof counters where the tool is installed)
PROFILE_LEVELS = ("off", "basic", "full")


def _from_wire(cls: type[_T], data: Mapping[str, Any]) -> _T:
    """`cls` built from the wire dict `data`: a key missing takes the field's default, a key
    `cls` has no field for raises ValueError naming it."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{cls.__name__}: expected a mapping of options, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown option(s) {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(sorted(known))}")
    return cls(**data)


@dataclass
class JudgeOptions:
    seeds: int = 3                    # fresh seeds per correctness case
    seed: int | None = None           # base seed for a reproducible run (default: fresh random seeds)
    perf: bool | None = None          # None: measure on GPUs, skip under the CPU interpreter
    baseline: str = "torch"           # what speedups are measured against: "torch" or "triton"
    # Time limits, in seconds. A child tells its worker when it compiles Triton kernels (compile
    # notices, judge/compilewatch.py), so every request's time is split: *compiling* is bounded by
    # compile_timeout per request, *running* (host code, kernels, autotuners' benchmarks) by the
    # limits below, and queueing for the GPU lock behind a timing turn counts for neither.
    # The candidate's running limit on one item (its import, the first call, each later
    # correctness call) is max(run_timeout, run_timeout_factor x the reference's own running time
    # on that item), plus tune_config_s per autotuner config it benchmarks, at most the stage's
    # cap (load_timeout, call_timeout, case_timeout): a host loop or a kernel that never ends is
    # judged a timeout after about run_timeout (30 s), a slow compile may take minutes.
    load_timeout: float = 120.0       # start a child; cap of an import's running time (run_timeout applies)
    call_timeout: float = 300.0       # cap of the first call's running time (autotuning included)
    case_timeout: float = 60.0        # cap of every later correctness call's running time
    perf_timeout: float = 300.0       # each performance request's running time (warm-up, one timing block...)
    compile_timeout: float = 600.0    # Triton compiling, per request (a legitimately slow compile takes minutes)
    run_timeout: float = 30.0         # floor of a candidate item's running limit
    run_timeout_factor: float = 50.0  # x the reference's running time on the same item, if that is longer
    tune_config_s: float = 1.0        # running time added per autotuner config benchmarked (up to the cap)
    perf_blocks: int = 10             # interleaved blocks per side and perf case
    perf_input_sets: int = 3          # rotating input sets
    block_ms: float = 40.0            # target duration of one timing block
    min_calls_per_block: int = 5
    max_calls_per_block: int = 1000
    warmup_ms: float = 25.0
    spot_samples: int = 4096          # sampled output positions checked at perf sizes
    roofline_slack: float = 1.1       # flag times below roofline / slack
    resolution: float = 0.005         # systematic timing resolution added to every interval (A/A runs)
    escape_ms: float = 0.015          # device work after the timed events beyond this (+25%) fails
    memory_fraction: float = 0.45     # of GPU memory a candidate may take (the reference needs the rest)
    max_perf_cases: int | None = None  # time at most this many perf cases, evenly spread (None: all)
    measure_memory: bool = False      # each verdict's `memory`: peak RSS (and device memory) per process
    # How candidates are confined (judge/sandbox/confinement.py): "auto" with what this machine
    # gives, "strict" refuses to judge without files, network and signals confined, "off" none
    sandbox: str = "auto"
    # what a confined candidate may write in all (its scratch and Triton cache; worker/limits.py)
    max_written_bytes: int = 2 << 30
    # the profile of a passing candidate (PROFILE_LEVELS; `worker/profiling.py`): never a verdict's decider
    profile: str = "basic"

    def __post_init__(self) -> None:
        if self.profile not in PROFILE_LEVELS:
            raise ValueError(f"profile must be one of {', '.join(PROFILE_LEVELS)}, got {self.profile!r}")

    def resolved(self, backend: str) -> JudgeOptions:
        """These options as a worker of `backend` applies them: `perf` decided (None: measure on
        GPUs, not under the CPU interpreter)."""
        return dataclasses.replace(self, perf=self.perf if self.perf is not None else backend != "cpu")

    def for_request(self, backend: str) -> dict[str, Any]:
        """The options of one judge request, as they travel (`resolved`, then `to_wire`)."""
        return self.resolved(backend).to_wire()

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> JudgeOptions:
        return _from_wire(cls, data)

    def draw_seeds(self) -> list[int]:
        if self.seed is not None:
            return [(self.seed + 1_000_003 * i) % (2**31 - 1) for i in range(self.seeds)]
        return [secrets.randbelow(2**31 - 1) for _ in range(self.seeds)]


@dataclass
class WorkerOptions:
    """What the coordinator tells a worker when it starts it (`WorkerHandle`)."""
    # the share of GPU memory a candidate process may take while the GPU is shared
    memory_fraction: float = JudgeOptions.memory_fraction
    # how many of the pool's workers share this worker's GPU (1: its children take no GPU lock)
    gpu_workers: int = 2
    cache_root: str | None = None  # where the worker makes its children's Triton caches (None: none)
    start_timeout: float = 300.0  # for the first spare child to start and describe the device
    cpu_threads: int = 1  # torch threads of each child
    sandbox: str = JudgeOptions.sandbox  # the children's confinement level (`sandbox.confinement`)
    scratch_root: str | None = None  # where each confined child gets its own directory (None: unconfined)
    max_written_bytes: int = JudgeOptions.max_written_bytes  # what a confined candidate may write in all
    task_files: tuple[str, ...] = ()  # what confined children may read from the start (`JudgePool.admit`)

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> WorkerOptions:
        return _from_wire(cls, data)


@dataclass
class ChildOptions:
    """What a worker gives each child it forks (`Worker._child_options`): set up before the
    child's harness starts serving, the same for all its requests."""
    memory_fraction: float | None = None  # a candidate's cap on GPU memory (None: no cap, the reference)
    max_reply_bytes: int | None = None  # a reference's largest reply (None: `footprint.max_reply_bytes()`)
    cpu_threads: int = 1
    max_file_bytes: int = 64 << 20  # the largest file a candidate may write (printing forever fails)
    triton_cache: str | None = None  # this side's Triton cache directory (None: Triton's default)
    # how the child confines itself (a `sandbox.confinement.ChildSandbox`; None: not at all).
    # Typed loosely here: common/ does not import the sandbox's code, and this never crosses a pipe.
    sandbox: Any = None
