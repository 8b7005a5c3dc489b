"""The report as one self-contained HTML file: styles, highlighted code and SVG plots are all in
the page, and its Content-Security-Policy (`default-src 'none'`, inline styles and data: images
only) forbids every request, so it opens the same from a file, an attachment or a CI artifact.
There is no script: the per-task pages are CSS `:target` pages of the same file."""

from __future__ import annotations

import difflib
import time
from pathlib import Path
from typing import Any

from .compare import Comparison, compare
from .data import RunData, TaskView, task_anchor
from . import plots

TEMPLATES = Path(__file__).parent / "templates"
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
MAX_CODE_CHARS = 60_000  # a runaway answer does not make the page unreadable (the store keeps it whole)


def fmt(v: Any, digits: int = 4) -> str:
    """A number as the report prints it (the page's data-* attributes keep it exact)."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return str(int(v))
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def exact(v: Any) -> str:
    """A number for a data-* attribute: repr keeps every digit (the test compares them)."""
    return "" if v is None else repr(v)


def _environment():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters.update(fmt=fmt, exact=exact)
    return env


def highlight(code: str, lexer_name: str = "python") -> str:
    from pygments import highlight as pyg_highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name

    if len(code) > MAX_CODE_CHARS:
        code = code[:MAX_CODE_CHARS] + f"\n# ... {len(code) - MAX_CODE_CHARS} more characters (see run.sqlite)\n"
    return pyg_highlight(code, get_lexer_by_name(lexer_name), HtmlFormatter(cssclass="hl", nowrap=False))


def pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="friendly").get_style_defs(".hl")


def diff_html(task: TaskView) -> str:
    if not task.best_code or not task.baseline_code:
        return ""
    lines = difflib.unified_diff(task.baseline_code.splitlines(keepends=True), task.best_code.splitlines(keepends=True),
                                 fromfile=task.baseline_label, tofile="the kernel shown", n=3)
    text = "".join(lines)
    return highlight(text, "diff") if text else ""


def profile_text(profile: dict[str, Any]) -> str:
    from ..agent.profile_text import render_text

    try:
        return render_text(profile) if profile else ""
    except (TypeError, ValueError, KeyError, AttributeError):  # a profile of another version: shown raw
        return str(profile)


def roofline(profile: dict[str, Any]) -> dict[str, Any]:
    """The judge's fractions of peak (bandwidth, FLOP/s) per side, where the profile has them."""
    out = {}
    for side in ("candidate", "reference"):
        s = profile.get(side) if isinstance(profile, dict) else None
        if isinstance(s, dict):
            out[side] = {k: s.get(k) for k in ("time_ms", "bandwidth_frac", "flop_frac")}
    return out


def task_page(task: TaskView, index: int) -> dict[str, Any]:
    plot = plots.latency(task, index)
    return {"t": task, "anchor": task_anchor(task.name), "code": highlight(task.best_code) if task.best_code else "",
            "diff": diff_html(task), "plot": plot, "profile": profile_text(task.profile),
            "roofline": roofline(task.profile)}


def render_html(run: RunData, others: list[RunData] | None = None) -> str:
    """The whole page for `run`, with a comparison section when `others` are given."""
    plots.require()
    from markupsafe import Markup

    others = others or []
    comparison: Comparison | None = compare([run, *others]) if others else None
    pages = [task_page(t, i) for i, t in enumerate(run.tasks)]
    for p in pages:
        p["code"], p["diff"] = Markup(p["code"]), Markup(p["diff"])
        if p["plot"]:
            p["plot"].svg = Markup(p["plot"].svg)
    run_plots = plots.run_plots(run)
    for p in run_plots:
        p.svg = Markup(p.svg)
    solved = sum(t.solved for t in run.tasks)
    return _environment().get_template("report.html.j2").render(
        run=run, pages=pages, plots=run_plots, comparison=comparison, csp=CSP,
        css=Markup((TEMPLATES / "report.css").read_text() + pygments_css()),
        generated=time.strftime("%Y-%m-%d %H:%M:%S"), solved=solved, task_anchor=task_anchor,
        no_tuning=run.kind == "agent" and not (run.metrics or {}).get("tuned"))
