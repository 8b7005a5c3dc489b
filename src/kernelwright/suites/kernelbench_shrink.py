"""--shrink for KernelBench (tasks/shrink.py): a problem file's sizes are its module-level
globals (`batch_size = 4096`, `dim = 393216`, `input_shape = (4000,)`), read by `get_inputs()` and
`get_init_inputs()` when they are called. Every global assigned a constant int (or tuple of ints)
expression is a size; the file is executed with those assignments replaced by scaled values, so
sizes derived from them (`dim2 = dim * 2`, `in_features = dim`) follow. The factor is fitted
against the bytes the file's inputs and outputs take at each trial, measured with meta tensors in
a forked process (a file may touch CUDA) and cached for every process of the machine: the judge's
children read the sizes the coordinator fitted."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any, Callable

from ..tasks.shrink import MIN_DIM, fit_factor, scale_value
from .adapter import cache_file, in_forked_process, json_cached

FORMAT = "kernelbench-shrink-1"  # the cache's format: bump when the fitting changes
_CONSTANT = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List, ast.operator, ast.unaryop, ast.Load)


def _constant_value(node: ast.expr) -> Any:
    """The value of an expression of constants only (`2048 * 2`, `(16, 256)`), else None."""
    if not all(isinstance(n, _CONSTANT) for n in ast.walk(node)):
        return None
    try:
        return eval(compile(ast.Expression(node), "<size>", "eval"), {"__builtins__": {}})  # noqa: S307 - constants only
    except Exception:  # noqa: BLE001
        return None


def size_globals(tree: ast.Module) -> dict[str, Any]:
    """name -> value of each module-level size: an int, or a tuple/list of ints, with at least one
    dimension of MIN_DIM or more (smaller ones, kernel sizes and strides, are never scaled)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _constant_value(node.value)
            dims = (value,) if isinstance(value, int) else value if isinstance(value, (tuple, list)) else ()
            if (dims and all(isinstance(d, int) and not isinstance(d, bool) for d in dims)
                    and max(dims) >= MIN_DIM):
                found[node.targets[0].id] = value
    return found


def sized_code(path: Path, sizes: dict[str, Any] | None):
    """The problem file compiled with its size assignments replaced by `sizes` (None: as it is)."""
    source = path.read_text()
    if not sizes:
        return compile(source, str(path), "exec")
    tree = ast.parse(source, filename=str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in sizes:
            value = sizes[node.targets[0].id]
            original = _constant_value(node.value)
            if isinstance(value, list) and isinstance(original, tuple):
                value = tuple(value)  # (JSON keeps no tuples)
            node.value = ast.copy_location(ast.parse(repr(value), mode="eval").body, node.value)
    return compile(ast.fix_missing_locations(tree), str(path), "exec")


def _namespace(path: Path, sizes: dict[str, Any] | None) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "kernelwright_kernelbench_inputs", "__file__": str(path)}
    exec(sized_code(path, sizes), namespace)  # noqa: S102 - benchmark code
    return namespace


def _fit(path: str, factor: float, input_bytes: Callable[[dict[str, Any]], int | None]) -> dict[str, Any]:
    """In a forked process: {"sizes": the scaled globals, "ratio": the bytes kept} ({} sizes: none).
    `input_bytes(namespace)`: the bytes of the problem's inputs as the executed file defines them
    (given by kernelbench.py, which imports this module: no circle)."""
    file = Path(path)
    sizes = size_globals(ast.parse(file.read_text()))
    if not sizes:
        return {"sizes": {}, "ratio": 1.0}

    def at(f: float) -> dict[str, Any]:
        return {k: scale_value(v, f) for k, v in sizes.items()}

    def measure(f: float) -> int | None:
        return input_bytes(_namespace(file, at(f)))

    dims = sum(1 for v in sizes.values() for d in (v if isinstance(v, (tuple, list)) else (v,)) if d >= MIN_DIM)
    f = fit_factor(factor, measure) or factor ** (1 / dims)
    full, kept = measure(1.0), measure(f)
    return {"sizes": at(f), "ratio": kept / full if full and kept else math.nan}


def shrunk_sizes(path: Path, factor: float, input_bytes: Callable[[dict[str, Any]], int | None]) -> dict[str, Any]:
    """{"sizes", "ratio"} for the problem file at `path` shrunk by `factor` (cached by content)."""
    import torch  # noqa: F401 - once here, not in every forked fitting process (it does not touch CUDA)

    cache = cache_file("kernelbench-shrink", FORMAT, path.read_text(), repr(factor))
    return json_cached(cache, lambda: in_forked_process(_fit, str(path), factor, input_bytes))
