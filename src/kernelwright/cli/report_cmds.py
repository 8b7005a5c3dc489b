"""`kernelwright report` (one self-contained HTML file of a run, and a Markdown summary) and
`kernelwright show` (the headline in the terminal, also while the run is going). Both read the
run without writing to it: an agent run's store read-only, or a judge-suite results file.

Exit status: 0 written (shown), 2 usage error (not a run, the `report` extra missing, no Chromium
for --screenshot)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import app
from .agent_cmds import JsonOpt, _error
from .options import Command

RunArg = Annotated[Path, typer.Argument(help="an agent run directory (bench, generate, optimize) or a judge-suite results .jsonl")]


def _load(path: Path, as_json: bool, with_tasks: bool = True):
    from ..report import ReportError, load_run
    from ..store import StoreError

    try:
        return load_run(path, with_tasks)
    except (ReportError, StoreError) as exc:
        raise _error(str(exc), as_json) from None


def default_out(path: Path) -> Path:
    """Beside the run: RUN_DIR/report.html, or results.jsonl's results.html."""
    return path / "report.html" if path.is_dir() else path.with_suffix(".html")


@app.command("report", cls=Command, short_help="One self-contained HTML report of a run.")
def report_command(
    run_dir: RunArg,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="the HTML file (default RUN_DIR/report.html; for a results file, its name with .html)")] = None,
    compare: Annotated[Optional[list[Path]], typer.Option("--compare", help="another run to compare task by task (repeatable)")] = None,
    markdown: Annotated[bool, typer.Option("--markdown", help="also print the Markdown summary (for pull requests and terminals)")] = False,
    screenshot: Annotated[Optional[Path], typer.Option("--screenshot", help="also save a PNG of the page, drawn by headless Chromium")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write one HTML file of a run: what it was, the metrics with their denominators, the
    scaling plots, a page per task (best kernel, diff, latency per shape, profile, the timeline
    of attempts) and, with --compare, the runs side by side. The file fetches nothing (scripts,
    styles, fonts, plots are inside it). docs/report.md describes each section.

    Exit status: 0 written, 2 usage error (not a run; the plots need the report extra: pip
    install 'kernelwright[report]'; --screenshot needs Chromium).
    """
    from ..report import MissingExtra
    from ..report.html import render_html
    from ..report.markdown import render_markdown

    started = time.monotonic()
    run = _load(run_dir, as_json)
    others = [_load(p, as_json) for p in compare or []]
    try:
        page = render_html(run, others)
    except MissingExtra as exc:
        raise _error(str(exc), as_json) from None
    target = out or default_out(run.path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page)
    shot = _screenshot(target, screenshot, as_json) if screenshot else None
    summary = render_markdown(run, others) if markdown else None
    if as_json:
        print(json.dumps({"html": str(target), "bytes": len(page.encode()), "seconds": round(time.monotonic() - started, 3),
                          "tasks": len(run.tasks), "screenshot": str(shot) if shot else None, "markdown": summary}))
        return
    if summary:
        print(summary)
    Console(stderr=True).print(f"report: {escape(str(target))} ({len(page.encode()) / 1024:.0f} KiB, "
                               f"{len(run.tasks)} tasks, {time.monotonic() - started:.1f} s)", highlight=False)


def _screenshot(html: Path, png: Path, as_json: bool) -> Path:
    from ..report.browser import BrowserMissing, screenshot

    try:
        return screenshot(html, png)
    except BrowserMissing as exc:
        raise _error(str(exc), as_json) from None


@app.command("show", cls=Command, short_help="The headline of a run, in the terminal.")
def show_command(run_dir: RunArg, as_json: JsonOpt = False) -> None:
    """The metrics of a run and its tasks, from its store (read-only: it works while the run is
    still going, with the attempts stored so far), or from a judge-suite results file.

    Exit status: 0 shown, 2 not a run.
    """
    run = _load(run_dir, as_json, with_tasks=False)
    if as_json:
        print(json.dumps({"run": str(run.path), "in_progress": run.in_progress, "info": dict(run.info),
                          "metrics": run.headline, "geomean_ci95": run.geomean_ci95,
                          "tasks": [{"task": t.name, "status": t.status, "speedup": t.speedup, "why": t.why}
                                    for t in run.tasks]}, default=str))
        return
    console = Console()
    console.print(headline_table(run))
    console.print(tasks_table(run))


def headline_table(run) -> Table:
    from ..report.html import fmt

    state = " (in progress)" if run.in_progress else ""
    info = dict(run.info)
    caption = ", ".join(f"{k} {info[k]}" for k in ("model", "tasks x runs x iterations", "cost") if k in info)
    table = Table(title=f"{run.label}{state}", caption=caption, title_justify="left")
    for col, justify in (("metric", "left"), ("value", "right"), ("n / d", "right"), ("denominator", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    best_of = str(info.get("search", "")).startswith("evolve")  # the runs are not independent samples
    for m in run.headline:
        value = fmt(m["value"])
        name = m["name"].replace("pass@", "best-of-") if best_of else m["name"]
        if m["name"] == "geomean speedup" and run.geomean_ci95:
            value += f" [{fmt(run.geomean_ci95[0])}, {fmt(run.geomean_ci95[1])}]"
        num = fmt(m["numerator"]) if m["numerator"] is not None else "-"
        note = m.get("note", "") + (f" ({m['why']})" if m.get("why") and m["value"] is None else "")
        table.add_row(escape(name), value, f"{num} / {m['denominator']}", escape(note))
    return table


def tasks_table(run) -> Table:
    from ..report.html import fmt

    table = Table(title=f"tasks: {sum(t.solved for t in run.tasks)} of {len(run.tasks)} solved", title_justify="left")
    for col in ("task", "status", "best speedup", "runs passed", "attempts", "why not"):
        table.add_column(col)
    for t in run.tasks:
        r = t.result or {}
        style = "green" if t.solved else "red" if t.status == "failed" else "yellow"
        table.add_row(escape(t.name), f"[{style}]{t.status}[/]", fmt(t.speedup),
                      f"{r['passed_runs']}/{r['runs']}" if r else "-", str(r.get("attempts", "-")),
                      escape(t.why[:120]))
    return table
