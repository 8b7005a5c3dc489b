"""Which reader a path needs: an agent run directory (`agent_data`) or a judge-suite results file
(`data`). Apart from both so that neither imports the other back."""

from __future__ import annotations

from pathlib import Path

from .agent_data import load_agent_run
from ..store import DB_NAME
from .data import ReportError, RunData, load_suite_results


def load_run(path: Path | str, with_tasks: bool = True) -> RunData:
    """An agent run directory or a judge-suite JSONL file. `with_tasks=False` skips what only the
    per-task pages need (instructions, code, attempts' timelines): `show` is a headline only."""
    path = Path(path).expanduser()
    if path.is_dir() and (path / DB_NAME).is_file():
        return load_agent_run(path, with_tasks)
    if path.is_file() and path.suffix == ".jsonl":
        return load_suite_results(path)
    if path.is_dir():
        raise ReportError(f"{path} is not a kernelwright run directory (no {DB_NAME}); pass the --out "
                          "directory of a bench, generate or optimize run, or a judge-suite results .jsonl")
    raise ReportError(f"{path}: no such run directory or judge-suite results file (.jsonl)")
