"""The static stage: inspect the candidate's source without running a line of it."""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass
from pathlib import Path

MAX_SOURCE_BYTES = 2 << 20
# One parse at a time: CPython 3.11 keeps the AST converter's recursion depth per interpreter, and
# two threads parsing at once (a pool judges from one thread per worker) raised "SystemError: AST
# constructor recursion depth mismatch" in CI, killing that judging thread.
_PARSE_LOCK = threading.Lock()


@dataclass
class StaticResult:
    ok: bool
    reason: str
    kernels: list[str]
    kind: str = ""  # a verdict.FailureKind value when not ok


def _is_jit_decorator(node: ast.expr) -> bool:
    """`@triton.jit`, `@jit`, `@triton.jit(...)`, and autotune/heuristics wrappers around them."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr == "jit"
    if isinstance(node, ast.Name):
        return node.id == "jit"
    return False


def read_source(path: Path) -> tuple[str, StaticResult | None]:
    """The candidate's source text, or why it cannot be one (unreadable, too large, not UTF-8):
    the static stage's first check, and what `optimize` reads the user's kernel with."""
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        return "", StaticResult(False, "candidate is a directory; expected a .py file", [], "judge_error")
    except OSError as exc:
        return "", StaticResult(False, f"cannot read candidate file: {exc.strerror}", [], "judge_error")
    if len(raw) > MAX_SOURCE_BYTES:
        return "", StaticResult(False, f"candidate file is {len(raw)} bytes; the limit is {MAX_SOURCE_BYTES}", [],
                                "too_large")
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return "", StaticResult(False, f"candidate file is not UTF-8 text (byte {exc.start}: a binary file, "
                                       "not Python source?)", [], "syntax_error")


def check_source(path: Path, entry_name: str) -> StaticResult:
    source, problem = read_source(path)
    if problem is not None:
        return problem
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        line = (exc.text or "").strip()
        return StaticResult(False, f"does not parse: {exc.msg} at line {exc.lineno}: {line}", [], "syntax_error")
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes; nesting too deep for the parser
        return StaticResult(False, f"does not parse: {type(exc).__name__}: {str(exc)[:200]}", [], "syntax_error")

    kernels = [
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and any(_is_jit_decorator(d) for d in node.decorator_list)
    ]
    defines_entry = False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == entry_name:
            defines_entry = True
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == entry_name for t in node.targets
        ):
            defines_entry = True
        elif (isinstance(node, ast.AnnAssign) and node.value is not None
              and isinstance(node.target, ast.Name) and node.target.id == entry_name):
            defines_entry = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name) == entry_name for a in node.names
        ):
            defines_entry = True
    if not defines_entry:
        return StaticResult(False, f"does not define the entry point `{entry_name}` at module level", kernels,
                            "missing_entry_point")
    if not kernels:
        return StaticResult(False, "defines no @triton.jit kernel", kernels, "no_triton_kernel")
    return StaticResult(True, "ok", kernels)


def _literal_length(node: ast.expr) -> int | None:
    """How many items a loop over `node` yields, where the source says so: a list, tuple or set
    display, or range() of integer literals."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return len(node.elts)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and 1 <= len(node.args) <= 3 and not node.keywords
            and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args)):
        return len(range(*(a.value for a in node.args)))
    return None


def autotune_configs(source: str) -> int:
    """An estimate of how many autotuning configs a file declares: each `Config(...)` written in
    it, times the lengths of the literal loops around it (`for s in [2, 3, 4]`, comprehensions
    alike; a loop over anything else counts once). Every config is compiled before it can be
    tried: GEAK's int8_dequant_matmul declares 401 and spends minutes compiling them, and a
    scheduler that starts such a file last finishes the suite minutes after everything else.
    0 for a file that does not parse."""
    try:
        with _PARSE_LOCK:
            tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return 0
    total = 0

    def visit(node: ast.AST, factor: int) -> None:
        nonlocal total
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "Config":
                total += factor
        if isinstance(node, (ast.For, ast.AsyncFor)):
            visit(node.iter, factor)
            inner = factor * max(_literal_length(node.iter) or 1, 1)
            for child in [node.target, *node.body]:
                visit(child, inner)
            for child in node.orelse:
                visit(child, factor)
            return
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = factor
            for gen in node.generators:
                visit(gen.iter, inner)
                inner *= max(_literal_length(gen.iter) or 1, 1)
                for cond in gen.ifs:
                    visit(cond, inner)
            for child in ([node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]):
                visit(child, inner)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, factor)

    visit(tree, 1)
    return total
