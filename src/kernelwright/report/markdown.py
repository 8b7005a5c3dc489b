"""The report's Markdown summary, for pull requests and terminals: what the run was, the metrics
table (`metrics.format_table`, as `judge-suite` prints it), both scaling curves
(`agent.scaling.table`, as `bench` prints them), the tasks, and the comparison when asked."""

from __future__ import annotations

from .compare import compare
from .data import RunData
from .html import fmt


def _metric_table(run: RunData) -> str:
    from ..metrics import Metric, format_table

    rows = [Metric(r["name"], r["value"], r["numerator"], r["denominator"], r.get("note", ""), r.get("why"))
            for r in run.headline]
    table = format_table(rows)
    if run.geomean_ci95:
        table += f"\n\ngeomean speedup 95% interval: [{fmt(run.geomean_ci95[0])}, {fmt(run.geomean_ci95[1])}]"
    return table


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _tasks(run: RunData, limit: int = 200) -> list[str]:
    agent = run.kind == "agent"
    head = "| task | status | best speedup |" + (" runs passed | attempts | tokens | cost (USD) |" if agent else "") + " why not |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for t in run.tasks[:limit]:
        row = f"| {_cell(t.name)} | {t.status} | {fmt(t.speedup)} |"
        if agent:
            r = t.result or {}
            row += (f" {r.get('passed_runs', '-')}/{r.get('runs', '-')} | {r.get('attempts', '-')} | "
                    f"{r.get('tokens', '-')} | {fmt(r.get('cost_usd'))} |")
        lines.append(row + f" {_cell(t.why[:160])} |")
    if len(run.tasks) > limit:
        lines.append(f"\n... and {len(run.tasks) - limit} more tasks (the HTML report has them all)")
    return lines


def _comparison(runs: list[RunData]) -> list[str]:
    c = compare(runs)
    out = ["## Comparison", ""] + [f"{i}. {label}" for i, label in enumerate(c.labels)] + [""]
    out.append("| metric | " + " | ".join(f"run {i}" for i in range(len(runs))) + " |")
    out.append("|---|" + "---|" * len(runs))
    for m in c.metrics:
        out.append(f"| {m['name']} | " + " | ".join(fmt(v["value"]) if v else "-" for v in m["values"]) + " |")
    out += ["", f"Solved by the base only: {', '.join(c.only_base) or 'none'}. "
                f"Solved by another run and not by the base: {', '.join(c.only_other) or 'none'}.", ""]
    out.append("| task | " + " | ".join(f"run {i}" for i in range(len(runs))) + " | |")
    out.append("|---|" + "---|" * (len(runs) + 1))
    for row in c.tasks:
        cells = [f"{x['status']} {fmt(x['speedup'])}" if x else "-" for x in row["cells"]]
        out.append(f"| {_cell(row['task'])} | " + " | ".join(cells) + f" | {row['verdict']} |")
    return out


def render_markdown(run: RunData, others: list[RunData] | None = None) -> str:
    from ..agent.scaling import table

    out = [f"# kernelwright report: {run.label}", "", f"`{run.path}`", ""]
    if run.in_progress:
        out += ["**In progress**: the numbers are those of the attempts stored so far.", ""]
    out += [f"- {k}: {v}" for k, v in run.info] + ["", "## Metrics", "", _metric_table(run), ""]
    m = run.metrics or {}
    ind = m.get("independent_runs", True)  # --search evolve: best-of-k, not pass@k
    if m.get("per_iteration"):
        out += ["## Sequential scaling (all runs)", "", table(m["per_iteration"], "iterations", ind), ""]
    if m.get("per_runs"):
        out += ["## Parallel scaling (all iterations)", "", table(m["per_runs"], "runs", ind), ""]
    if m.get("tuned"):
        out += ["## After the tuning pass", "", table([m["tuned"]], "runs", ind), ""]
    solved = sum(t.solved for t in run.tasks)
    out += [f"## Tasks ({solved} of {len(run.tasks)} solved)", "", *_tasks(run), ""]
    if others:
        out += _comparison([run, *others]) + [""]
    return "\n".join(out)
