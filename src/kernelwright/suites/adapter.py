"""What every benchmark adapter shares (GEAK's TritonBench-revised and ROCm, TritonBench-T,
KernelBench): running a benchmark's source as a module, seeding, flattening a test's results into
the outputs the judge compares, reading the names a test needs, a result cached by content for
every process of the machine, a short-lived forked process for code that may initialise CUDA,
and the registry hooks that turn a task's `ref` back into the task in a judge's child."""

from __future__ import annotations

import ast
import hashlib
import json
import linecache
import os
import random
import sys
import tempfile
import types
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

from ..tasks.model import Task
from ..tasks.files import cache_root


class SuiteError(ValueError):
    """A checkout that does not hold the expected benchmark files."""


def exec_module(name: str, source: str, filename: str, namespace: dict | None = None) -> types.ModuleType:
    """Execute source as module `name` (registered in sys.modules, compiled with `filename` so that
    tracebacks and the judge's launch counter attribute kernels to the right file)."""
    module = types.ModuleType(name)
    module.__file__ = filename
    if namespace:
        module.__dict__.update(namespace)
    sys.modules[name] = module
    exec_source(source, filename, module.__dict__)
    return module


def exec_source(source: str, filename: str, namespace: dict) -> None:
    """exec() `source` as `filename`, with exactly this text in linecache under that name: Triton
    reads a @jit function's source through inspect, which otherwise finds nothing for a pseudo
    file name ("@jit functions should be defined in a Python file", GEAK test sections define
    kernels too) or, for a real path, the file on disk instead of the portable-libdevice rewrite."""
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - benchmark/candidate code, in the judge's child


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)  # CPU and every GPU


class NamedOutputs(list):
    """The flattened results, plus `names`: where each came from in the test's result (the dict
    key, e.g. `test_case_1`, with `[i]` for the i-th tensor of a tuple), so that a failure can
    name the result the benchmark's own test calls it by rather than its position."""

    names: list[str]


def flatten_results(obj: Any) -> NamedOutputs:
    """A result dict/list/tuple of tensors and numbers, flattened in order (dict insertion order)."""
    import torch

    out = NamedOutputs()
    out.names = []

    def walk(value: Any, name: str) -> None:
        if isinstance(value, torch.Tensor):
            out.append(value)
            out.names.append(name or "output")
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{name}.{k}" if name else str(k))
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{name}[{i}]" if name else f"output {i}")
        elif isinstance(value, (bool, int, float)):
            out.append(torch.tensor(value, dtype=torch.float64))
            out.names.append(name or "output")
        # None, strings and other objects carry no numbers to compare

    walk(obj, "")
    return out


def defined_names(code: str) -> frozenset[str]:
    return frozenset(n.name for n in ast.parse(code).body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))


def without_definitions(code: str, names: frozenset[str]) -> str:
    """`code` minus its top-level functions and classes named in `names` (test functions kept): a
    test section that redefines the kernel or wrapper it tests would otherwise replace the
    candidate's code with the golden's in the candidate's own module."""
    if not names:
        return code
    tree = ast.parse(code)
    kept = [n for n in tree.body if not (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                                         and n.name in names and not n.name.startswith("test"))]
    if len(kept) == len(tree.body):
        return code
    tree.body = kept
    return ast.unparse(tree)


def required_names(kernel_code: str, test_code: str) -> list[str]:
    """Top-level functions/classes of the golden code that the test code uses: what a candidate
    must define (the first one is the entry point of the static stage)."""
    defined = [n.name for n in ast.parse(kernel_code).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    used = {n.id for n in ast.walk(ast.parse(test_code)) if isinstance(n, ast.Name)}
    return [name for name in defined if name in used] or defined[-1:]


def cache_file(kind: str, *key: str) -> Path:
    """Where a result computed from `key` (file contents, a format version) is kept for every
    process of the machine: the coordinator computes it, the judge's children read it."""
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:32]
    return cache_root() / kind / f"{digest}.json"


def store_json(cache: Path, value: Any) -> None:
    """Best effort: a process that may not write there (a confined judge child) just keeps none."""
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(value))
        os.replace(partial, cache)
    except OSError:
        pass


def json_cached(cache: Path, compute: Callable[[], Any]) -> Any:
    """The JSON in `cache`, or compute() stored there."""
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        value = compute()
        store_json(cache, value)
        return value


def in_forked_process(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) run in a forked, short-lived process (suite code may initialise CUDA at import,
    after which a judge process could not fork working children); its JSON-able result."""
    return collect_forked(*fork_json(fn, *args))


def fork_json(fn: Callable[..., Any], *args: Any) -> tuple[int, int]:
    """Start fn(*args) in a forked process that writes its result as JSON to a pipe; returns
    (pid, read end). Several can run at once; `collect_forked` waits for one."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process; never returns
        code = 1
        try:
            os.close(read_end)
            payload = json.dumps({"ok": True, "found": fn(*args)})
        except BaseException as exc:  # noqa: BLE001
            payload = json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        try:
            with os.fdopen(write_end, "w") as out:
                out.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def collect_forked(pid: int, read_end: int) -> Any:
    with os.fdopen(read_end) as inp:
        text = inp.read()
    os.waitpid(pid, 0)
    if not text:
        raise RuntimeError("the enumerating process died before reporting")
    result = json.loads(text)
    if not result["ok"]:
        raise RuntimeError(result["error"])
    return result["found"]


def from_ref(factory: Callable[[Path, str], Task]) -> Callable[[str], Task]:
    def load(rest: str) -> Task:
        root, _, stem = rest.rpartition("::")
        return _cached(factory, root, stem)

    return load


@lru_cache(maxsize=None)
def _cached(factory: Callable[[Path, str], Task], root: str, stem: str) -> Task:
    return factory(Path(root), stem)


def load_each(factory: Callable[[Path, str], Task], root: Path,
               files: Iterable[tuple[str, str]]) -> tuple[list[Task], list[tuple[str, str]]]:
    """Tasks for every (key, shown name) of `files`, and (shown name, reason) for each that could
    not become a task: one bad file must not hide the others, and none is dropped silently.
    Shared by every adapter (KernelBench and TritonBench-T too)."""
    tasks, problems = [], []
    for key, shown in files:
        try:
            tasks.append(_cached(factory, str(root), key))
        except Exception as exc:  # noqa: BLE001 - reported with the file, never fatal
            problems.append((shown, f"{type(exc).__name__}: {exc}"))
    return tasks, problems
