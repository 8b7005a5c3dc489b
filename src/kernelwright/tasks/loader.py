"""Load and validate native task files (one Python file per task; see docs/tasks.md).

Task files are trusted code (they come with kernelwright or from the user), so they are imported.
Every problem is reported as a `TaskFileError` naming the file and what to fix.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import sys
import traceback
from pathlib import Path
from typing import Any

from .hostile import check_hostile_evidence, coverage_problems
from .model import KNOWN_DTYPES, Case, EntryPoint, Task, TaskFileError, Tolerance
from .validate import check_not_degenerate

REQUIRED = ("name", "instruction", "entry_point", "make_inputs", "reference", "visible_cases")
OPTIONAL = (
    "hidden_cases", "perf_cases", "tolerances", "cost", "triton_reference", "deterministic",
    "reference_in_float64", "difficulty", "tags", "mutable_args", "numerics",
)


_loaded: dict[Path, Task] = {}


def load_task_file(path: Path | str, check_degenerate: bool = True) -> Task:
    """Import a task file and return its validated `Task` (cached per resolved path).

    With `check_degenerate`, the reference is also run on the CPU for the smallest case(s) under
    two seeds, and a task whose outputs are constant or do not depend on the inputs is rejected.
    """
    path = Path(path).expanduser().resolve()
    if path in _loaded:
        return _loaded[path]
    if not path.is_file():
        raise TaskFileError(path, "no such file")
    if path.suffix != ".py":
        raise TaskFileError(path, "a task file must be a Python file ending in .py")
    module = _import(path)
    task = _build(path, module)
    if check_degenerate:

        check_not_degenerate(task)
        check_hostile_evidence(task)
    _loaded[path] = task
    return task


def _import(path: Path) -> Any:
    module_name = f"kernelwright_task_{abs(hash(str(path))):x}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise TaskFileError(path, "cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling need the module registered
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(module_name, None)
        raise TaskFileError(path, f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except Exception as exc:  # the task file's own import-time error
        sys.modules.pop(module_name, None)
        tb = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        raise TaskFileError(path, f"raised while importing: {tb}") from None
    return module


def _build(path: Path, module: Any) -> Task:
    def fail(problem: str) -> TaskFileError:
        return TaskFileError(path, problem)

    names = {n for n in vars(module) if not n.startswith("_")}
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        hints = []
        for name in missing:
            close = difflib.get_close_matches(name, names, n=1)
            hints.append(f"{name} (did you mean {close[0]!r}?)" if close else name)
        raise fail("missing required definition(s): " + ", ".join(hints) + "; see docs/tasks.md")
    for name in names:
        if name in REQUIRED or name in OPTIONAL:
            continue
        close = difflib.get_close_matches(name, REQUIRED + OPTIONAL, n=1, cutoff=0.85)
        if close:
            raise fail(f"unknown definition {name!r}; did you mean {close[0]!r}?")

    task_name = module.name
    if not isinstance(task_name, str) or not task_name.replace("-", "_").isidentifier():
        raise fail(f"name must be an identifier-like string, got {task_name!r}")
    if not isinstance(module.instruction, str) or not module.instruction.strip():
        raise fail("instruction must be a non-empty string")
    if not isinstance(module.entry_point, str):
        raise fail("entry_point must be a string such as 'softmax(x: torch.Tensor) -> torch.Tensor'")
    try:
        entry = EntryPoint.parse(module.entry_point)
    except ValueError as exc:
        raise fail(str(exc)) from None
    for fn_name in ("make_inputs", "reference"):
        if not callable(getattr(module, fn_name)):
            raise fail(f"{fn_name} must be a function")

    def cases(attr: str, required: bool) -> list[Case]:
        value = getattr(module, attr, [])
        if not isinstance(value, (list, tuple)) or not all(isinstance(c, Case) for c in value):
            raise fail(f"{attr} must be a list of kernelwright.tasks.Case")
        if required and not value:
            raise fail(f"{attr} must hold at least one case")
        return list(value)

    visible = cases("visible_cases", required=True)
    hidden = cases("hidden_cases", required=False)
    perf = cases("perf_cases", required=False)

    tolerances: dict[str, Tolerance] = {}
    raw_tolerances = getattr(module, "tolerances", {}) or {}
    if not isinstance(raw_tolerances, dict):
        raise fail("tolerances must be a dict {dtype: (atol, rtol)}")
    for dtype, tol in raw_tolerances.items():
        if dtype not in KNOWN_DTYPES:
            raise fail(f"tolerances: unknown dtype {dtype!r}")
        if isinstance(tol, dict):
            tol = (tol.get("atol", 0.0), tol.get("rtol", 0.0))
        try:
            atol, rtol = (float(t) for t in tol)
        except (TypeError, ValueError):
            raise fail(f"tolerances[{dtype!r}] must be (atol, rtol) or {{'atol':..,'rtol':..}}") from None
        if not (math.isfinite(atol) and math.isfinite(rtol) and atol >= 0 and rtol >= 0):
            raise fail(f"tolerances[{dtype!r}] must be finite and non-negative")
        tolerances[dtype] = Tolerance(atol, rtol)

    cost = getattr(module, "cost", None)
    if cost is not None and not callable(cost):
        raise fail("cost must be a function case -> {'flops': .., 'bytes': ..}")

    triton_ref = getattr(module, "triton_reference", None)
    triton_path = None
    if triton_ref is not None:
        triton_path = (path.parent / str(triton_ref)).resolve()
        if not triton_path.is_file():
            raise fail(f"triton_reference {triton_ref!r} does not exist (looked at {triton_path})")

    difficulty = getattr(module, "difficulty", None)
    if difficulty is not None and difficulty not in (1, 2, 3, 4, 5):
        raise fail(f"difficulty must be an integer 1-5, got {difficulty!r}")

    mutable = getattr(module, "mutable_args", ())
    if not isinstance(mutable, (tuple, list)) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in mutable):
        raise fail("mutable_args must be a tuple of argument positions")
    mutable = tuple(mutable)

    tags = getattr(module, "tags", ()) or ()
    if isinstance(tags, str) or not isinstance(tags, (tuple, list)) or not all(isinstance(t, str) for t in tags):
        raise fail("tags must be a tuple of strings")
    numerics = getattr(module, "numerics", ())
    if isinstance(numerics, str):
        numerics = (numerics,)
    if not isinstance(numerics, (tuple, list, set, frozenset)) or not all(isinstance(k, str) for k in numerics):
        raise fail('numerics must be a tuple of hostile-case kinds, e.g. ("large-magnitude", "constant-rows")')

    problems = coverage_problems(tags, sorted(numerics) if isinstance(numerics, (set, frozenset)) else numerics,
                                 visible, hidden)
    if problems:
        raise fail("; ".join(problems))

    return Task(
        name=task_name,
        instruction=module.instruction.strip(),
        entry_point=entry,
        make_inputs=module.make_inputs,
        reference=module.reference,
        visible_cases=visible,
        hidden_cases=hidden,
        perf_cases=perf,
        source_path=path,
        tolerances=tolerances,
        cost=cost,
        triton_reference=triton_path,
        deterministic=bool(getattr(module, "deterministic", False)),
        reference_in_float64=bool(getattr(module, "reference_in_float64", True)),
        difficulty=difficulty,
        tags=tuple(tags),
        mutable_args=mutable,
    )
