"""What every prompt says about the task: the instruction, the exact interface the tests call,
the PyTorch reference where the task has one, and the shapes it is checked and timed on.

The interface is the most important line: most direct-prompting failures on TritonBench are a
wrong name or signature. For suites whose tests call functions of a golden file (GEAK's
TritonBench-revised and ROCm), the signatures are read from that file, as GEAK does; the golden
code itself is never shown (it is the answer).
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..tasks import Task

MAX_REFERENCE_CHARS = 12_000


@dataclass(frozen=True)
class TaskBrief:
    name: str
    instruction: str
    entry_names: tuple[str, ...]
    interface: tuple[str, ...]          # one line per function or class the tests call
    reference_code: str                 # PyTorch reference source, "" when not shown
    visible_cases: tuple[str, ...]
    perf_cases: tuple[str, ...]
    tolerances: dict[str, Any] = field(default_factory=dict)

    def as_context(self) -> dict[str, Any]:
        return {"name": self.name, "instruction": self.instruction, "entry_names": list(self.entry_names),
                "interface": list(self.interface), "reference_code": self.reference_code,
                "visible_cases": list(self.visible_cases), "perf_cases": list(self.perf_cases),
                "tolerances": self.tolerances}


def entry_names(task: Task) -> tuple[str, ...]:
    """Every name the tests call: a suite adapter lists several, comma-separated."""
    sig = task.entry_point.signature
    if task.entry_point.name != sig and "," in sig and "(" not in sig:
        return tuple(n.strip() for n in sig.split(",") if n.strip())
    return (task.entry_point.name,)


def golden_file(task: Task) -> Path | None:
    """The file whose functions the task's tests call, when the task is defined by one."""
    if task.reference_impl is not None:
        return Path(task.reference_impl)
    if task.load_impl is not None or task.bind is not None:
        return task.source_path
    return None


def signatures_from_source(source: str, names: tuple[str, ...]) -> dict[str, str]:
    """`def name(args) -> ret` (or `class Name(bases)` with its __init__/forward) for each of
    `names` defined at the top level of `source`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            ret = f" -> {ast.unparse(node.returns)}" if node.returns else ""
            found[node.name] = f"def {node.name}({ast.unparse(node.args)}){ret}"
        elif isinstance(node, ast.ClassDef) and node.name in names:
            bases = ", ".join(ast.unparse(b) for b in node.bases)
            methods = [f"def {m.name}({ast.unparse(m.args)})" for m in node.body
                       if isinstance(m, ast.FunctionDef) and m.name in ("__init__", "forward", "__call__")]
            found[node.name] = f"class {node.name}({bases}): " + "; ".join(methods)
    return found


def interface_lines(task: Task) -> tuple[str, ...]:
    names = entry_names(task)
    golden = golden_file(task)
    if golden is not None and golden.is_file():
        try:
            found = signatures_from_source(golden.read_text(errors="replace"), names)
        except OSError:
            found = {}
        if found:
            return tuple(found.get(n, f"{n}(...)  (signature not found in the reference)") for n in names)
    return (task.entry_point.signature,)


def reference_source(task: Task) -> str:
    """The PyTorch reference of a native task file (trusted code, and the specification)."""
    if golden_file(task) is not None:
        return ""
    try:
        source = inspect.getsource(task.reference)
    except (OSError, TypeError):
        return ""
    return source if len(source) <= MAX_REFERENCE_CHARS else ""


def describe_case(case: dict[str, Any]) -> str:
    params = {k: v for k, v in case.items() if k not in ("label",)}
    return case.get("label") or ", ".join(f"{k}={v}" for k, v in params.items())


def brief_for(task: Task) -> TaskBrief:
    view = task.public_view()
    return TaskBrief(
        name=task.name, instruction=task.instruction.strip(), entry_names=entry_names(task),
        interface=interface_lines(task), reference_code=reference_source(task),
        visible_cases=tuple(describe_case(c) for c in view["visible_cases"]),
        perf_cases=tuple(describe_case(c) for c in view["perf_cases"][:12]),
        tolerances=view["tolerances"])
