"""A task from the user's own words and PyTorch code (`kernelwright generate "INSTRUCTION"
--entry "softmax(x)" --reference ref.py [--tests tests.py]`).

The user's files are copied into the run directory next to a generated task file, so the run
can be resumed (and judged again) even after the originals change or move. Inputs come from the
tests file (or the reference file): either our task format (`make_inputs(case, gen)` and
`visible_cases`, optionally `hidden_cases`, `perf_cases`, `tolerances`, `cost`) or KernelBench's
`get_inputs()`.
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from ..tasks import EntryPoint


class UserTaskError(ValueError):
    """The user's files cannot make a task; the message says what to add."""


def _top_level_names(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        raise UserTaskError(f"{path}: does not parse: {exc.msg} at line {exc.lineno}") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


_TEMPLATE = '''"""Task built by `kernelwright generate` from the user's instruction and files (copied here)."""

import importlib.util as _util
from pathlib import Path as _Path

import torch

from kernelwright.tasks import Case


def _load(file_name):
    path = _Path(__file__).with_name(file_name)
    spec = _util.spec_from_file_location("kernelwright_user_" + path.stem, path)
    module = _util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ref = _load("reference.py")
_tests = _load({tests_file!r})

name = {name!r}
instruction = {instruction!r}
entry_point = {entry!r}
reference = getattr(_ref, {entry_name!r})
{inputs}
hidden_cases = list(getattr(_tests, "hidden_cases", []))
perf_cases = list(getattr(_tests, "perf_cases", []))
tolerances = dict(getattr(_tests, "tolerances", {{}}))
if hasattr(_tests, "cost"):
    cost = _tests.cost
'''

_TASK_FORMAT_INPUTS = '''make_inputs = _tests.make_inputs
visible_cases = list(_tests.visible_cases)'''

_GET_INPUTS = '''

def make_inputs(case, gen):
    # get_inputs() draws from torch's global generator: seed it from the judge's seeded one, so
    # that the reference and the candidate processes build the same inputs
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=gen.device).item()))
    return tuple(t.to(gen.device) if isinstance(t, torch.Tensor) else t for t in _tests.get_inputs())


visible_cases = [Case("float32", label="get_inputs()")]'''


def build_user_task(instruction: str, entry: str, reference: Path, tests: Path | None, out_dir: Path,
                    name: str | None = None) -> Path:
    """Write the task into `out_dir` and return the task file's path (raises `UserTaskError`)."""
    if not instruction.strip():
        raise UserTaskError("the instruction is empty: say what the kernel must compute")
    try:
        entry_point = EntryPoint.parse(entry)
    except ValueError as exc:
        raise UserTaskError(f"--entry: {exc} (for example --entry \"softmax(x)\")") from None
    for label, path in (("--reference", reference), ("--tests", tests)):
        if path is not None and not Path(path).is_file():
            raise UserTaskError(f"{label} {path}: no such file")
    ref_names = _top_level_names(reference)
    if entry_point.name not in ref_names:
        raise UserTaskError(f"--reference {reference} defines no `{entry_point.name}`: it must define the "
                            f"PyTorch function named by --entry")
    inputs_from = Path(tests) if tests is not None else Path(reference)
    names = _top_level_names(inputs_from)
    if {"make_inputs", "visible_cases"} <= names:
        inputs = _TASK_FORMAT_INPUTS
    elif "get_inputs" in names:
        inputs = _GET_INPUTS
    else:
        raise UserTaskError(
            f"{inputs_from} says nothing about inputs: define `make_inputs(case, gen)` and `visible_cases` "
            "(the task format of docs/tasks.md) or KernelBench's `get_inputs()`, or pass --tests FILE that does")
    task_name = name or entry_point.name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", task_name):
        raise UserTaskError(f"--name {task_name!r}: use letters, digits and underscores")
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(reference, out_dir / "reference.py")
    tests_file = "reference.py"
    if tests is not None:
        shutil.copyfile(tests, out_dir / "tests.py")
        tests_file = "tests.py"
    task_file = out_dir / f"{task_name}.py"
    task_file.write_text(_TEMPLATE.format(tests_file=tests_file, name=task_name, instruction=instruction.strip(),
                                          entry=entry_point.signature, entry_name=entry_point.name, inputs=inputs))
    return task_file
