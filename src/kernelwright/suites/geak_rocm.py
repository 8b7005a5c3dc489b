"""GEAK-eval's ROCm suite (`geak_eval/data/ROCm/data/ROCm_v1/*.py`, 31 pytest files), read from
the user's own checkout: correctness cases are the parametrizations of the test functions (outputs
they store in `result_gold`), performance cases the parametrizations of `test_performance` (the
operation handed to the benchmarker helper). Parametrizations are read from pytest's own marks in
a forked process (see `_parametrizations_by_running`), or from the decorators' source where the
module cannot be run (on a CPU: a module-level driver or CUDA call), evaluated by `static_values`
without running any of it. A file that imports a module that is not installed (test_randn.py:
scipy, the `rocm` extra) is still a task, marked unsupported with what to install."""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import types
import warnings
from pathlib import Path
from typing import Any, Callable

from ..tasks.model import Case, EntryPoint, Task
from . import geak_compat
from .extras import EXTRA_MODULES
from .adapter import (SuiteError, cache_file, defined_names, exec_module, exec_source, flatten_results,
                      in_forked_process, json_cached, required_names, seed_everything, without_definitions)
from .static_values import Param, StaticValues
from .geak_source import ROCM_DIR, ROCM_JSON, geak_task, instructions, portable_libdevice, split_source


def _product(axes: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Stacked @parametrize decorators run every combination of their rows."""
    combos = []
    for parts in itertools.product(*axes) if axes else [()]:
        merged: dict[str, Any] = {}
        for part in parts:
            merged.update(part)
        combos.append(merged)
    return combos


def _parametrizations(fn: ast.FunctionDef, values: StaticValues) -> list[dict[str, Any]]:
    """The cartesian product of a test's @pytest.mark.parametrize decorators, read from their
    source (`static_values`: comprehensions, itertools and the module's own helpers, evaluated
    without running the file)."""
    axes = []
    for deco in fn.decorator_list:
        if not (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "parametrize"):
            continue
        names = values.value(deco.args[0])
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for v in values.value(deco.args[1]):
            v = v.values if isinstance(v, Param) else v
            rows.append(dict(zip(names, v if len(names) > 1 else (v,))))
        axes.append(rows)
    return _product(axes)  # top decorator first, as `_enumerate_marks` reads pytest's marks


def _parametrizations_by_running(path: Path, kernel_code: str, test_code: str) -> dict[str, list[dict]]:
    """Execute the test module (definitions only; nothing is called) and read pytest's own
    parametrize marks: this follows list comprehensions and helper calls that AST reading cannot.

    The module runs in a forked, short-lived process: its top-level code may initialise CUDA (a
    `DEVICE = ...` line), and a judge worker that had done so could no longer fork working
    children. Only plain data comes back (see `_plain`), and it is kept in a cache file keyed by
    the file's content: the judge's children, which have CUDA initialised and so cannot run a
    forked enumerator themselves, read the same cases the coordinator found."""
    import pytest  # noqa: F401 - the ROCm files import it; fail here with a clear ImportError

    found = json_cached(cache_file("rocm-cases", "v2", str(path), kernel_code, test_code),
                         lambda: _run_enumerator(path, kernel_code, test_code))
    return {test: [{k: _unplain(v) for k, v in params.items()} for params in combos]
            for test, combos in found.items()}


def _run_enumerator(path: Path, kernel_code: str, test_code: str) -> dict[str, list[dict]]:
    """`_enumerate_marks` in a forked process; its result as plain data."""
    return in_forked_process(_enumerate_marks, path, kernel_code, test_code)


def _enumerate_marks(path: Path, kernel_code: str, test_code: str) -> dict[str, list[dict]]:
    geak_compat.install()
    name = f"kernelwright_rocm_enum_{path.stem}"
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # custom marks (pytest.mark.interpreter) are not ours to register
        module = exec_module(name, portable_libdevice(kernel_code) + "\n" + test_code, str(path))
    found: dict[str, list[dict]] = {}
    for attr, fn in vars(module).items():
        if not (attr.startswith("test_") and callable(fn)):
            continue
        axes = []
        for mark in reversed(getattr(fn, "pytestmark", [])):
            if mark.name != "parametrize":
                continue
            names, values = mark.args[0], mark.args[1]
            names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
            rows = []
            for value in values:
                if type(value).__name__ == "ParameterSet":  # pytest.param(...)
                    value = value.values
                rows.append(dict(zip(names, value if len(names) > 1 else (value,))))
            axes.append(rows)
        found[attr] = [{k: _plain(v) for k, v in params.items()} for params in _product(axes)]
    return found


def _plain(value: Any) -> Any:
    """A parametrize value as JSON: numbers, strings, None, lists, tuples, str-keyed dicts and
    torch dtypes."""
    import torch

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, (tuple, list)):
        return {"tuple" if isinstance(value, tuple) else "list": [_plain(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: _plain(v) for k, v in value.items()}}
    raise TypeError(f"parametrize value {value!r} ({type(value).__name__}) is not plain data")


def _unplain(value: Any) -> Any:
    if isinstance(value, dict):
        if "dtype" in value:
            import torch

            return getattr(torch, value["dtype"])
        if "tuple" in value:
            return tuple(_unplain(v) for v in value["tuple"])
        if "dict" in value:
            return {k: _unplain(v) for k, v in value["dict"].items()}
        return [_unplain(v) for v in value["list"]]
    return value


# Modules GEAK's ROCm files import that kernelwright does not depend on: EXTRA_MODULES (extras.py)
# says what installs them; geak_eval's helpers are kernelwright's own stand-ins (geak_compat).
PROVIDED_MODULES = frozenset({"geak_eval"})


def missing_modules(*sources: str) -> list[str]:
    """The top-level modules that `sources` import unconditionally (at module level, outside any
    try) and that are not installed here, found without importing anything (`find_spec` of a
    top-level name only looks on the path)."""
    import importlib.util

    names: list[str] = []
    for source in sources:
        for node in ast.parse(source).body:
            if isinstance(node, ast.Import):
                names += [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.append(node.module.split(".")[0])
    return sorted({n for n in names if n not in PROVIDED_MODULES and importlib.util.find_spec(n) is None})


def needs_reason(missing: list[str]) -> str:
    """Why a task whose file imports `missing` cannot run here, and how to install them."""
    how = sorted({EXTRA_MODULES.get(m, f"pip install {m}") for m in missing})
    return f"needs the Python module(s) {', '.join(missing)}, not installed: {'; '.join(how)}"


def _case_label(test: str, params: dict) -> str:
    return f"{test}[{'-'.join(str(v) for v in params.values())}]" if params else test


def _pick_dtype(params: dict) -> str:
    text = " ".join(str(v) for v in params.values())
    for key, dtype in (("bf16", "bfloat16"), ("bfloat16", "bfloat16"), ("fp16", "float16"), ("float16", "float16"),
                       ("fp32", "float32"), ("float32", "float32"), ("fp8", "float8_e4m3fn")):
        if key in text:
            return dtype
    return "any"


class _Request:
    """The part of pytest's `request` fixture that GEAK's tests read."""

    def __init__(self, name: str) -> None:
        self.node = types.SimpleNamespace(name=name)


def _load_rocm_impl(stem: str, test_code: str, operator_names: frozenset[str] = frozenset()):
    test_code = without_definitions(test_code, operator_names)

    def load(path: str, module_name: str) -> types.ModuleType:
        kernel_code, _ = split_source(Path(path).read_text())
        geak_compat.install()
        module = exec_module(module_name, portable_libdevice(kernel_code), path)
        exec_source(test_code, f"<{stem} test code>", module.__dict__)
        return module

    return load


def _bind_rocm(module: types.ModuleType, kind: str, case: Case, gen) -> tuple[Callable, tuple]:
    import inspect

    test = module.__dict__[case.test]
    params = dict(case.params.get("args", ()))
    accepts = inspect.signature(test).parameters
    if "request" in accepts:
        params["request"] = _Request(case.label)
    seed = gen.initial_seed()
    if kind == "perf":
        seed_everything(seed)
        try:
            test(**params)
        except geak_compat.CapturedOp as captured:
            return _with_outputs(captured.op), ()
        raise RuntimeError(f"{case.label} never handed an operation to the benchmarker")

    def run_test() -> list:
        seed_everything(seed)
        gold = module.__dict__.setdefault("result_gold", {})
        gold.clear()
        test(**params)
        return flatten_results({k: v for k, v in gold.items() if k != "_CALL_SUCCESS_"})

    return run_test, ()


def _with_outputs(op: Callable[[], Any]) -> Callable[[], Any]:
    """A ROCm perf op is often `lambda: kernel[grid](x, y, out, ...)`: it returns the launch
    handle, and what it computes lands in tensors it closes over. Those tensors (the same on
    both sides: the test code is the task's) are then its outputs, for the perf-size check."""
    import torch

    held = []
    for cell in getattr(op, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        items = value if isinstance(value, (tuple, list)) else [value]
        held.extend(t for t in items if isinstance(t, torch.Tensor))

    def run() -> Any:
        result = op()
        if isinstance(result, torch.Tensor) or (
                isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result)):
            return result
        return tuple(held)

    return run


def rocm_task(root: Path, stem: str) -> Task:
    path = root / ROCM_DIR / f"{stem}.py"
    kernel_code, test_code = split_source(path.read_text())
    if test_code is None:
        raise SuiteError(f"{path}: no 146-# separator between the kernel and its tests")
    tree = ast.parse(test_code)
    values = StaticValues()
    values.module_env(ast.parse(kernel_code))  # the file runs as one module: its names come first
    values.module_env(tree)
    cases, perf_cases, notes = [], [], []
    try:
        by_running = _parametrizations_by_running(path, kernel_code, test_code)
    except Exception as exc:  # noqa: BLE001 - fall back to reading the decorators
        by_running = None
        notes.append(f"test module could not be executed to enumerate cases ({type(exc).__name__}: {exc}); "
                     "read its decorators instead")
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")):
        if fn.name in ("test_save_results", "test_save_performance_results"):
            continue
        try:
            combos = by_running[fn.name] if by_running is not None else _parametrizations(fn, values)
        except Exception as exc:  # noqa: BLE001
            notes.append(f"{fn.name}: parametrization not understood ({type(exc).__name__}: {exc})")
            continue
        target = perf_cases if fn.name == "test_performance" else cases
        for params in combos:
            args = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items())
            target.append(Case(_pick_dtype(params), label=_case_label(fn.name, params), test=fn.name, args=args))
    if not cases:
        raise SuiteError(f"{path}: no correctness test could be enumerated ({'; '.join(notes)})")
    info = instructions(str(root / ROCM_JSON)).get(path.name, {})
    # the instruction file may name several kernels, comma-separated ("matmul_kernel,mxfp_to_bf16_kernel")
    names = [n.strip() for n in str(info.get("target_kernel_name") or "").split(",") if n.strip()] \
        or required_names(kernel_code, test_code)
    missing = missing_modules(kernel_code, test_code)
    return geak_task(
        kernel_code,
        unsupported=needs_reason(missing) if missing else None,
        name=stem,
        instruction=info.get("instruction", f"Write the Triton kernel of {stem}.").strip(),
        entry_point=EntryPoint(names[0], ", ".join(names)),
        visible_cases=cases,
        perf_cases=perf_cases,
        source_path=path,
        tags=("rocm",),
        ref=f"rocm:{root}::{stem}",
        load_impl=_load_rocm_impl(stem, test_code, defined_names(kernel_code)),
        bind=_bind_rocm,
        reference_impl=path,
        suite="rocm",
        notes=notes,
    )
