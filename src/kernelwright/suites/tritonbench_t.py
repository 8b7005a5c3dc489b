"""Adapter for TritonBench-T (thunlp/TritonBench), read from the user's own checkout.

Layout (thunlp/TritonBench at commit 62f3221, README "Data" and EVAL/eval_T/*.py):
- `data/TritonBench_T_v1/<op>.py`: the PyTorch implementation of an operator (e.g. `def add(input,
  other, alpha=1, out=None)`), a separator line of 146 `#`, then test code: `def test_<op>()` that
  builds inputs on `device='cuda'` and returns a dict of results, followed by module-level
  `test_results = test_<op>()` and `print(test_results)`.
- `data/TritonBench_T_v1.jsonl` (a JSON array despite its name): per operator `name`, `file`,
  `description`, `func_inputs`, `math`, `other`, `difficulty`.
- `data/TritonBench_T_comp_alpac_v1.json` (and `_simp_`): Alpaca records whose `instruction` holds
  "Functional Description: <description>\\nWrapper Entry Information: ..."; they name no file, so
  (like TritonBench's own `0_call_acc.py`) they are matched to files through the description.

TritonBench runs "candidate + separator + golden test" and, for execution accuracy, compares the
printed result dict of the candidate's file with the golden file's text. kernelwright calls the same
test function with the candidate's code instead of the golden code and compares the results as
tensors (dtype-aware tolerances, every seed, stable reruns) against the PyTorch reference in the
same precision. The repository ships no timing inputs for TritonBench-T (its efficiency script
reads measurements from outside the repository), so the performance case replays every call the
golden test makes to the entry point, timed by kernelwright's protocol: these are the test's own
(small) sizes. On the CPU (Triton interpreter) tensors the tests place on 'cuda' are redirected to
the CPU.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..tasks.model import Case, EntryPoint, Task
from .adapter import (SuiteError, defined_names, exec_module, flatten_results, from_ref, load_each, required_names,
                      seed_everything, without_definitions)
from .geak_source import GEAK_TOLERANCES, split_source

DATA_DIR = "data/TritonBench_T_v1"
STATS_JSON = "data/TritonBench_T_v1.jsonl"
STATS_JSON_ALT = "data/TritonBench_T_v1.json"  # the name TritonBench's eval_T scripts read
INSTRUCTION_JSONS = ("data/TritonBench_T_comp_alpac_v1.json", "data/TritonBench_T_simp_alpac_v1.json")
NO_TRITON_REFERENCE = "TritonBench-T ships no Triton reference (its reference is the PyTorch operator)"


def _strip_module_calls(test_code: str, operator_names: frozenset[str] = frozenset()) -> tuple[str, str]:
    """Drop the module-level statements that run the test or print (`test_results = test_x()`,
    `print(test_results)`): the judge calls the test itself. Also drop definitions that shadow a
    name of the operator code: some test sections redefine the operator in PyTorch (relu_sqrt.py),
    which would replace the candidate's function with the golden one. Returns (test code, test name)."""
    tree = ast.parse(without_definitions(test_code, operator_names))
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]
    if not names:
        raise SuiteError("no test_* function after the separator")
    body = []
    for node in tree.body:
        call = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and (
                call.func.id in names or call.func.id == "print"):
            continue
        body.append(node)
    tree.body = body
    return ast.unparse(tree), names[0]


@contextlib.contextmanager
def on_device(device) -> Any:
    """Run benchmark code written for 'cuda' on `device`: on the CPU (the Triton interpreter),
    tensors created on or moved to 'cuda' land on the CPU instead. A no-op on GPUs."""
    import torch
    from torch.overrides import TorchFunctionMode

    if torch.device(device).type != "cpu":
        yield
        return

    def is_cuda(value: Any) -> bool:
        return (isinstance(value, str) and value.startswith("cuda")) or (
            isinstance(value, torch.device) and value.type == "cuda")

    class ToCpu(TorchFunctionMode):
        def __torch_function__(self, func, types_, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if name == "cuda":
                return args[0]
            if is_cuda(kwargs.get("device")):
                kwargs["device"] = "cpu"
            if name == "to":
                args = tuple("cpu" if is_cuda(a) else a for a in args)
            return func(*args, **kwargs)

    with ToCpu():
        yield


@dataclass
class TritonBenchTImpl:
    """An implementation (PyTorch reference or Triton candidate) with the golden test code."""

    module: types.ModuleType
    test_name: str
    entry_names: tuple[str, ...]

    def run_test(self) -> Any:
        return self.module.__dict__[self.test_name]()

    def record_calls(self) -> list[tuple[Callable, tuple, dict]]:
        """Run the test with the entry points wrapped: every call it makes to them, with copies of
        its arguments (an in-place operator must not change what a later replay receives)."""
        import torch

        def copy(value: Any) -> Any:
            return value.clone() if isinstance(value, torch.Tensor) else value

        calls: list[tuple[Callable, tuple, dict]] = []
        namespace = self.module.__dict__
        originals = {name: namespace[name] for name in self.entry_names if callable(namespace.get(name))}

        def recorder(fn: Callable) -> Callable:
            def call(*args, **kwargs):
                calls.append((fn, tuple(map(copy, args)), {k: copy(v) for k, v in kwargs.items()}))
                return fn(*args, **kwargs)
            return call

        try:
            namespace.update({name: recorder(fn) for name, fn in originals.items()})
            self.run_test()
        finally:
            namespace.update(originals)
        return calls


def _loader(test_code: str, test_name: str, entry_names: tuple[str, ...]) -> Callable[[str, str], TritonBenchTImpl]:
    def load(path: str, module_name: str) -> TritonBenchTImpl:
        code, _ = split_source(Path(path).read_text())  # a candidate's own test code is replaced
        module = exec_module(module_name, code, path)
        exec(compile(test_code, f"<{Path(path).stem} test code>", "exec"), module.__dict__)  # noqa: S102
        return TritonBenchTImpl(module, test_name, entry_names)

    return load


def _bind(impl: TritonBenchTImpl, kind: str, case: Case, gen) -> tuple[Callable, tuple]:
    seed = gen.initial_seed()
    device = gen.device
    if kind == "perf":
        seed_everything(seed)
        with on_device(device):
            calls = impl.record_calls()
        if not calls:
            raise RuntimeError(f"the test never calls {', '.join(impl.entry_names)}")

        def replay() -> list:
            with on_device(device):
                return flatten_results([fn(*args, **kwargs) for fn, args, kwargs in calls])

        return replay, ()

    def run_test() -> list:
        seed_everything(seed)
        with on_device(device):
            return flatten_results(impl.run_test())

    return run_test, ()


@lru_cache(maxsize=4)
def _stats(root: str) -> dict[str, dict]:
    path = next((Path(root) / n for n in (STATS_JSON, STATS_JSON_ALT) if (Path(root) / n).is_file()), None)
    if path is None:
        return {}
    text = path.read_text()
    try:
        items = json.loads(text)
    except ValueError:  # a real JSON-lines file
        items = [json.loads(line) for line in text.splitlines() if line.strip()]
    return {item["file"]: item for item in items if isinstance(item, dict) and "file" in item}


def _flat(text: str) -> str:
    return re.sub(r"\s+", "", text)


@lru_cache(maxsize=4)
def _instructions(root: str) -> dict[str, str]:
    """file -> the complex (else simple) Alpaca instruction, matched through the description."""
    stats = _stats(root)
    found: dict[str, str] = {}
    for name in reversed(INSTRUCTION_JSONS):  # the complex one wins
        path = Path(root) / name
        if not path.is_file():
            continue
        for item in json.loads(path.read_text()):
            text = item.get("instruction", "")
            match = re.search(r"Functional Description:(.*?)Wrapper Entry Information:", text, re.S)
            if not match:
                continue
            description = _flat(match.group(1))
            files = [f for f, info in stats.items()
                     if description and description in _flat(info.get("description", ""))]
            if len(files) == 1:
                found[files[0]] = text
    return found


def _fallback_instruction(stem: str, info: dict, names: list[str]) -> str:
    parts = [f"Write Triton kernels and a Python wrapper `{names[0]}` that reproduce the PyTorch operator {stem}."]
    for key, label in (("description", "Functional Description"), ("func_inputs", "Wrapper Entry Information"),
                       ("math", "Math"), ("other", "other")):
        if info.get(key):
            parts.append(f"{label}: {info[key]}")
    return "\n".join(parts)


def checkout_root(path: str | Path) -> Path:
    path = Path(path).expanduser().resolve()
    for candidate in (path, *path.parents):
        if (candidate / DATA_DIR).is_dir():
            return candidate
    raise SuiteError(f"{path} is not a TritonBench checkout (no {DATA_DIR} folder in it or above it)")


def tritonbench_t_task(root: Path, stem: str) -> Task:
    path = root / DATA_DIR / f"{stem}.py"
    code, test_code = split_source(path.read_text())
    if test_code is None:
        raise SuiteError(f"{path.name}: no 146-# separator between the operator and its test")
    stripped, test_name = _strip_module_calls(test_code, defined_names(code))
    names = required_names(code, stripped)
    if not names:
        raise SuiteError(f"{path.name}: defines no function for the test to call")
    info = _stats(str(root)).get(path.name, {})
    instruction = _instructions(str(root)).get(path.name) or _fallback_instruction(stem, info, names)
    difficulty = info.get("difficulty")
    return Task(
        name=stem,
        instruction=instruction.strip(),
        entry_point=EntryPoint(names[0], ", ".join(names)),
        make_inputs=lambda case, gen: (),
        reference=lambda: None,
        visible_cases=[Case("any", label=f"golden test function {test_name}()")],
        hidden_cases=[],
        perf_cases=[Case("any", label=f"every call {test_name}() makes to {names[0]}")],
        source_path=path,
        tolerances=dict(GEAK_TOLERANCES),  # PyTorch reference in the candidate's precision
        reference_in_float64=False,
        difficulty=int(difficulty) if str(difficulty).isdigit() else None,
        tags=("tritonbench-t",),
        ref=f"tritonbench-t:{root}::{stem}",
        load_impl=_loader(stripped, test_name, tuple(names)),
        bind=_bind,
        reference_impl=path,  # the judge's reference side runs the PyTorch operator
        suite="tritonbench-t",
        # (--shrink, tasks/shrink.py)
        shrink_unsupported="TritonBench-T's sizes are written in each test function's code, not data "
                           "kernelwright can scale",
        notes=[] if info else [f"{path.name} is not listed in {STATS_JSON}: generic instruction"],
    )


ADAPTER_LOADERS = {"tritonbench-t": from_ref(tritonbench_t_task)}


def load_suite(path: str | Path) -> tuple[list[Task], list[tuple[str, str]]]:
    """All TritonBench-T tasks of a checkout, and (file, reason) for every file that could not
    become a task: nothing is dropped silently."""
    root = checkout_root(path)
    return load_each(tritonbench_t_task, root, ((file.stem, file.name) for file in _task_files(root)))


def _task_files(root: Path) -> list[Path]:
    return sorted(p for p in (root / DATA_DIR).glob("*.py") if p.name != "__init__.py")


def task_names(path: str | Path) -> list[str]:
    """The suite's task names from its file names alone (`--tasks` is checked with these before
    anything loads)."""
    return [file.stem for file in _task_files(checkout_root(path))]
