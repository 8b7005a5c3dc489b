"""The task model: what a kernel must compute, on which inputs, and how it is checked.

A task is plain data plus three trusted callables (input generator, PyTorch reference, optional
cost model). Everything a generator may see is in `Task.public_view()`; hidden cases never leave
the judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

# Default tolerances per output dtype, chosen against a float64 reference:
# the output's own rounding error (fp16: 2**-11, bf16: 2**-8) plus room for a different
# (but legitimate) accumulation order. Tasks override them per dtype.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-7),
    "float32": (1e-5, 1e-4),
    "float16": (1e-3, 2e-3),
    "bfloat16": (8e-3, 1.6e-2),
    "float8_e4m3fn": (6e-2, 1.3e-1),
    "float8_e5m2": (1.3e-1, 2.5e-1),
}

FLOAT_DTYPES = set(DEFAULT_TOLERANCES)
INT_DTYPES = {"int8", "uint8", "int16", "int32", "int64", "bool"}
# "any": a case whose inputs are made by benchmark code (suite adapters) in several dtypes
KNOWN_DTYPES = FLOAT_DTYPES | INT_DTYPES | {"any"}


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float

    def as_dict(self) -> dict[str, float]:
        return {"atol": self.atol, "rtol": self.rtol}


class Case:
    """One test or performance case: a dtype plus free-form parameters (shape, M/N/K, ...).

    Parameters are read as attributes (`case.shape`, `case.M`). They must be JSON-friendly so
    that verdicts can record exactly which inputs were used.
    """

    __slots__ = ("dtype", "params", "label")

    def __init__(self, dtype: str = "float32", label: str | None = None, **params: Any) -> None:
        if dtype not in KNOWN_DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(KNOWN_DTYPES)}")
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "params", {k: _freeze(v) for k, v in params.items()})
        object.__setattr__(self, "label", label or _default_label(dtype, self.params))

    def __getattr__(self, name: str) -> Any:
        params = object.__getattribute__(self, "params")
        if name in params:
            return params[name]
        raise AttributeError(f"case {object.__getattribute__(self, 'label')!r} has no parameter {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Case is immutable")

    def get(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "dtype": self.dtype, **{k: _thaw(v) for k, v in self.params.items()}}

    def __repr__(self) -> str:
        return f"Case({self.label})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Case) and (self.dtype, self.params) == (other.dtype, other.params)

    def __hash__(self) -> int:
        return hash((self.dtype, tuple(sorted(self.params.items()))))


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """JSON-friendly copy: tuples become lists, objects (e.g. a torch.dtype from a benchmark's
    parametrization) their repr."""
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def _default_label(dtype: str, params: dict[str, Any]) -> str:
    def fmt(v: Any) -> str:
        return "x".join(map(str, v)) if isinstance(v, tuple) else str(v)

    parts = [f"{k}={fmt(v)}" if k != "shape" else fmt(v) for k, v in params.items()]
    return " ".join(parts + [dtype])


@dataclass(frozen=True)
class EntryPoint:
    """The function the candidate must define, e.g. `rmsnorm(x, weight, eps=1e-6)`."""

    name: str
    signature: str

    @classmethod
    def parse(cls, text: str) -> "EntryPoint":
        match = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\(.*\))?\s*(->.*)?", text, re.S)
        if not match:
            raise ValueError(f"entry_point {text!r} is not 'name(args) -> result'")
        return cls(name=match.group(1), signature=text.strip())


@dataclass
class Task:
    """A kernel-writing task. Built by `kernelwright.tasks.loader` from a task file."""

    name: str
    instruction: str
    entry_point: EntryPoint
    make_inputs: Callable[..., Any]
    reference: Callable[..., Any]
    visible_cases: list[Case]
    hidden_cases: list[Case]
    perf_cases: list[Case]
    source_path: Path
    tolerances: dict[str, Tolerance] = field(default_factory=dict)
    cost: Callable[[Case], dict[str, float]] | None = None
    triton_reference: Path | None = None
    deterministic: bool = False
    reference_in_float64: bool = True
    difficulty: int | None = None
    tags: tuple[str, ...] = ()
    # Entry-point arguments that the kernel is allowed to write (in-place ops); all others are
    # snapshotted and any mutation fails the candidate.
    mutable_args: tuple[int, ...] = ()
    # Where any process can reload this task from: a task file's path, or an adapter reference
    # such as "tritonbench-revised:/path/to/GEAK-eval::add_value" (see tasks/registry.py).
    ref: str = ""
    # Suite adapters whose tasks are not "call entry(*make_inputs(case, gen))" plug in here:
    # `load_impl(path)` turns an implementation file (candidate or reference) into an object, and
    # `bind(impl, kind, case, gen)` returns (fn, args) to call for a "correctness" or "perf" case.
    # A task with `reference_impl` is judged against that file (a golden Triton implementation)
    # instead of `reference`.
    load_impl: Callable[[str], Any] | None = None
    bind: Callable[..., tuple[Callable, tuple]] | None = None
    reference_impl: Path | None = None
    unsupported: str | None = None  # why this task cannot run on this platform, if it cannot
    suite: str = "custom"
    requires_backend: str | None = None  # "hip" for tasks that only run on AMD GPUs
    requires_reason: str = ""
    notes: list[str] = field(default_factory=list)  # what an adapter could not use, and why
    # `sizes(impl, kind, case)`: (input bytes, output bytes) of one case, found without allocating
    # them (meta tensors), or None; the judge checks a problem fits the machine before building it
    sizes: Callable[..., tuple[int, int] | None] | None = None
    # --shrink (tasks/shrink.py): the factor this task's sizes were shrunk by (None: its own
    # sizes); an adapter's `shrinker(F)` -> (shrunk task, note), where its sizes are data; and,
    # where they are not, why (shown in the usage error)
    shrink: float | None = None
    shrinker: Callable[[float], tuple["Task", str]] | None = None
    shrink_unsupported: str = ""

    def __post_init__(self) -> None:
        if not self.ref:
            self.ref = str(self.source_path)

    def load_implementation(self, path: str, module_name: str = "candidate") -> Any:
        """Import an implementation file; by default its entry point is what gets called."""
        if self.load_impl is not None:
            return self.load_impl(path, module_name)
        import importlib.util
        import sys

        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        entry = getattr(module, self.entry_point.name, None)
        if not callable(entry):
            raise AttributeError(f"module does not define a callable `{self.entry_point.name}`")
        return entry

    def call_for(self, impl: Any, kind: str, case: "Case", gen) -> tuple[Callable, tuple]:
        """What to call for one case: (fn, args). `kind` is "correctness" or "perf"."""
        if self.bind is not None:
            return self.bind(impl, kind, case, gen)
        args = self.make_inputs(case, gen)
        return impl, tuple(args) if isinstance(args, (tuple, list)) else (args,)

    @property
    def correctness_cases(self) -> list[Case]:
        return self.visible_cases + self.hidden_cases

    def tolerance_for(self, dtype: str) -> Tolerance:
        if dtype in self.tolerances:
            return self.tolerances[dtype]
        atol, rtol = DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0))  # integers: exact
        return Tolerance(atol, rtol)

    def public_view(self) -> dict[str, Any]:
        """What a generator may see: never the hidden cases."""
        return {
            "name": self.name,
            "instruction": self.instruction,
            "entry_point": self.entry_point.signature,
            "visible_cases": [c.to_dict() for c in self.visible_cases],
            "perf_cases": [c.to_dict() for c in self.perf_cases],
            "tolerances": {k: v.as_dict() for k, v in self.tolerances.items()},
            "difficulty": self.difficulty,
        }

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "suite": self.suite,
            "ref": self.ref,
            "unsupported": self.unsupported,
            "entry_point": self.entry_point.signature,
            "path": str(self.source_path),
            "cases": {
                "visible": len(self.visible_cases),
                "hidden": len(self.hidden_cases),
                "perf": len(self.perf_cases),
            },
            "triton_reference": str(self.triton_reference) if self.triton_reference else None,
            "difficulty": self.difficulty,
            "tags": list(self.tags),
        }


class TaskFileError(ValueError):
    """A task file is missing, cannot be imported, or does not describe a valid task."""

    def __init__(self, path: Path | str, problem: str) -> None:
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")
