"""Find tasks by name (built-in suite) or by path (a user's own task file)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from .loader import TaskFileError, load_task_file
from .model import Task

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "suites" / "builtin"


class TaskNotFound(LookupError):
    pass


def builtin_task_paths() -> dict[str, Path]:
    """Task name -> file, for every task file of the built-in suite (file stem = task name)."""
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.py")) if not p.name.startswith("_")}


def _builtin(task: Task) -> Task:
    task.suite = "builtin"  # a task file's default is "custom"; these come with kernelwright
    return task


def load_builtin_task(path: Path) -> Task:
    return _builtin(load_task_file(path))


def list_builtin_tasks() -> list[Task]:
    return [load_builtin_task(p) for p in builtin_task_paths().values()]


# Adapters register a loader for their reference prefix ("tritonbench-revised:...").
ADAPTERS: dict[str, "Callable[[str], Task]"] = {}


def load_task_ref(ref: str) -> Task:
    """Reload a task from its `Task.ref`: a task file's path, or "<adapter>:<adapter's own ref>";
    either one behind "shrunk:F:" (--shrink, tasks/shrink.py) is that task at its shrunk sizes."""
    from .shrink import PREFIX, load_shrunk

    if ref.startswith(PREFIX + ":"):
        return load_shrunk(ref, load_task_ref)
    prefix, sep, rest = ref.partition(":")
    if sep and prefix in _adapters():
        return _adapters()[prefix](rest)
    # whoever made the ref loaded (and validated) the task already: judge processes only reload it
    return load_task_file(ref, check_degenerate=False)


def _adapters() -> dict:
    if not ADAPTERS:
        from ..suites import register_adapters

        register_adapters(ADAPTERS)
    return ADAPTERS


def resolve_task(name_or_path: str | Path) -> Task:
    """A built-in task name, or a path to a task file."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    paths = builtin_task_paths()
    looks_like_path = text.endswith(".py") or "/" in text or os.sep in text
    if looks_like_path or (text not in paths and path.is_file()):
        if not path.is_file():
            raise TaskNotFound(f"task file {text!r} does not exist")
        task = load_task_file(path)
        return _builtin(task) if path.resolve().parent == BUILTIN_DIR else task
    if text not in paths:
        import difflib

        near = difflib.get_close_matches(text, list(paths), n=3, cutoff=0.6)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        known = ", ".join(sorted(paths)) or "(none)"
        raise TaskNotFound(f"unknown task {text!r}; known tasks: {known}.{hint} Pass a path to use your own "
                           "task file.")
    return load_builtin_task(paths[text])


__all__ = ["TaskFileError", "TaskNotFound", "builtin_task_paths", "list_builtin_tasks", "load_task_ref",
           "resolve_task"]
