"""Find tasks by name (built-in suite) or by path (a user's own task file)."""

from __future__ import annotations

import os
from pathlib import Path

from .loader import TaskFileError, load_task_file
from .model import Task

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "suites" / "builtin"


class TaskNotFound(LookupError):
    pass


def builtin_task_paths() -> dict[str, Path]:
    """Task name -> file, for every task file of the built-in suite (file stem = task name)."""
    return {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.py")) if not p.name.startswith("_")}


def list_builtin_tasks() -> list[Task]:
    return [load_task_file(p) for p in builtin_task_paths().values()]


def resolve_task(name_or_path: str | Path) -> Task:
    """A built-in task name, or a path to a task file."""
    text = str(name_or_path)
    path = Path(text).expanduser()
    paths = builtin_task_paths()
    looks_like_path = text.endswith(".py") or "/" in text or os.sep in text
    if looks_like_path or (text not in paths and path.is_file()):
        if not path.is_file():
            raise TaskNotFound(f"task file {text!r} does not exist")
        return load_task_file(path)
    if text not in paths:
        known = ", ".join(sorted(paths)) or "(none)"
        raise TaskNotFound(f"unknown task {text!r}; known tasks: {known}. Pass a path to use your own task file.")
    return load_task_file(paths[text])


__all__ = ["TaskFileError", "TaskNotFound", "builtin_task_paths", "list_builtin_tasks", "resolve_task"]
