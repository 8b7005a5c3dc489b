"""Tasks: the model, the native task-file loader and the registry of known tasks."""

from .loader import TaskFileError, load_task_file
from .model import DEFAULT_TOLERANCES, Case, EntryPoint, Task, Tolerance
from .registry import (
    TaskNotFound,
    builtin_task_paths,
    list_builtin_tasks,
    load_task_ref,
    resolve_task,
)

__all__ = [
    "DEFAULT_TOLERANCES", "Case", "EntryPoint", "Task", "TaskFileError", "TaskNotFound", "Tolerance",
    "builtin_task_paths", "list_builtin_tasks", "load_task_file", "load_task_ref", "resolve_task",
]
