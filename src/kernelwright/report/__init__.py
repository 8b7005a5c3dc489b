"""Reports of a run: one self-contained HTML file (plots, a page per task, comparisons), a
Markdown summary, and the terminal's headline (`kernelwright show`). docs/report.md.

Modules by job: `data` and `agent_data` read a run (an agent run's store, read-only, or a
judge-suite results file), `plots` draws (matplotlib, the `report` extra), `html` and `markdown`
render, `compare` lines runs up task by task."""

from .data import ReportError, RunData, TaskView
from .load import load_run
from .plots import INSTALL_HINT, MissingExtra

__all__ = ["INSTALL_HINT", "MissingExtra", "ReportError", "RunData", "TaskView", "load_run"]
