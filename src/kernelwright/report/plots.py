"""The report's plots, drawn by matplotlib (the `report` extra) and inlined as SVG: vector, text
kept as text (searchable, small), no file or font to fetch. Every plot reads numbers the run's
own metrics computed (metrics.json's curves, results.jsonl's rows); none is computed here."""

from __future__ import annotations

import io
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

from .data import RunData, TaskView

INSTALL_HINT = "pip install 'kernelwright[report]'"
PALETTE = {"call": "#8da0cb", "exec": "#1b9e77", "pass": "#d95f02", "geak": "#7570b3", "geo": "#e7298a",
           "ref": "#999999", "cand": "#1b9e77", "bad": "#d95f02"}


class MissingExtra(RuntimeError):
    """matplotlib is not installed: the report's plots need the `report` extra."""


@dataclass
class Plot:
    key: str        # unique in the page: the SVG's ids are salted with it
    title: str
    caption: str
    svg: str


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra(f"the report's plots need matplotlib: {INSTALL_HINT}") from None
    matplotlib.use("Agg")  # no display: the report is written from a terminal or CI
    import matplotlib.pyplot as plt

    return matplotlib, plt


def require() -> None:
    """Raise MissingExtra now, before any work, when matplotlib is missing."""
    _pyplot()


def to_svg(fig: Any, key: str, tight: bool = True) -> str:
    """The figure as an inline <svg> element. Each figure's ids (clip paths, markers) are salted
    with its key: matplotlib derives them from a hash, and two plots in one page must not share one."""
    matplotlib, plt = _pyplot()
    with matplotlib.rc_context({"svg.hashsalt": key, "svg.fonttype": "none"}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight" if tight else None)
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _figure(ncols: int = 1, width: float = 6.4, height: float = 3.2):
    _, plt = _pyplot()
    fig, axes = plt.subplots(1, ncols, figsize=(width, height), squeeze=False)
    for ax in axes[0]:
        ax.grid(True, alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, list(axes[0])


def _empty(ax: Any, why: str) -> None:
    ax.text(0.5, 0.5, why, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="#666", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def _value(m: dict[str, Any], name: str) -> float | None:
    v = (m.get(name) or {}).get("value")
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


def _curve(ax: Any, xs: list[int], points: list[dict[str, Any]], names: list[tuple[str, str, str]]) -> bool:
    drawn = False
    for name, label, color in names:
        ys = [_value(p["metrics"], name) for p in points]
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        if pts:
            dashed = name == "call accuracy"
            ax.plot(*zip(*pts), marker="o", label=label, color=color, ls="--" if dashed else "-",
                    lw=3.0 if dashed else 1.5, alpha=0.8 if dashed else 1.0)
            drawn = True
    return drawn


def _speed_panel(ax: Any, xs: list[int], points: list[dict[str, Any]], why: str, xlabel: str) -> None:
    if not _curve(ax, xs, points, [("GEAK speedup", "GEAK speedup (mean)", PALETTE["geak"]),
                                   ("geomean speedup", "geomean speedup", PALETTE["geo"])]):
        _empty(ax, f"nothing was timed ({why})" if why else "no correct task was timed")
        return
    band = [(x, p["geomean_ci95"]) for x, p in zip(xs, points) if p.get("geomean_ci95")]
    if band:
        ax.fill_between([x for x, _ in band], [c[0] for _, c in band], [c[1] for _, c in band],
                        color=PALETTE["geo"], alpha=0.15, label="geomean 95% CI")
    ax.axhline(1.0, color="#444", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("speedup over the reference")
    ax.set_xticks(xs)
    ax.legend(fontsize=8)


def _accuracy_panel(ax: Any, xs: list[int], points: list[dict[str, Any]], extra: list[tuple[str, str, str]],
                    xlabel: str) -> None:
    # call accuracy dashed and wider: it often equals execution accuracy and would hide under it
    _curve(ax, xs, points, [("call accuracy", "call accuracy", PALETTE["call"]),
                            ("execution accuracy", "execution accuracy", PALETTE["exec"]), *extra])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of tasks")
    ax.set_xticks(xs)
    ax.legend(fontsize=8)


def sequential(run: RunData) -> Plot:
    m = run.metrics or {}
    points = m.get("per_iteration") or []
    xs = [p["iterations"] for p in points]
    fig, (left, right) = _figure(2, 9.6)
    one = "pass@1" if m.get("independent_runs", True) else "best-of-1"  # (--search evolve)
    _accuracy_panel(left, xs, points, [("pass@1", one, PALETTE["pass"])], "iterations")
    _speed_panel(right, xs, points, m.get("untimed_why") or "", "iterations")
    return Plot("sequential", "Sequential scaling: accuracy and speedup against iterations",
                f"All {m.get('runs')} runs, each cut to its first t LLM attempts (metrics.json per_iteration).",
                to_svg(fig, "sequential"))


def parallel(run: RunData) -> Plot:
    m = run.metrics or {}
    points = m.get("per_runs") or []
    xs = [p["runs"] for p in points]
    fig, (left, right) = _figure(2, 9.6)
    last = points[-1]["metrics"] if points else {}
    ks = [k for k in xs if _value(last, f"pass@{k}") is not None]
    _accuracy_panel(left, xs, points, [], "runs (best of N)")
    ind = m.get("independent_runs", True)  # --search evolve: the runs share an archive
    name = "pass@k" if ind else "best-of-k"
    if ks:
        left.plot(ks, [_value(last, f"pass@{k}") for k in ks], marker="s", color=PALETTE["pass"],
                  label=f"{name} (k runs of {xs[-1]})")
        left.legend(fontsize=8)
    _speed_panel(right, xs, points, m.get("untimed_why") or "", "runs (best of N)")
    return Plot("parallel", f"Parallel scaling: {name} and best-of-N speedup against the number of runs",
                "Every iteration; a task counts as solved (and its speedup is its best) over the first N runs "
                "(metrics.json per_runs)." + ("" if ind else " The runs shared one archive (--search evolve): "
                                               "they are not independent, so the curve is best-of-k, not pass@k."),
                to_svg(fig, "parallel"))


def speedup_distribution(run: RunData) -> Plot:
    speeds = sorted(t.speedup for t in run.tasks if t.solved and t.speedup and t.speedup > 0)
    fig, (ax,) = _figure()
    if not speeds:
        _empty(ax, "no solved task has a measured speedup")
    else:
        lo, hi = min(speeds + [0.9]), max(speeds + [1.1])
        bins = [lo * (hi / lo) ** (i / 20) for i in range(21)]
        ax.hist(speeds, bins=bins, color=PALETTE["cand"], edgecolor="white")
        ax.set_xscale("log")
        from matplotlib.ticker import FuncFormatter

        plain = FuncFormatter(lambda v, _: f"{v:g}")  # 2, not 2x10^0
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(plain)
        ax.axvline(1.0, color="#444", lw=0.8, ls="--")
        ax.set_xlabel("best speedup of the task (log scale)")
        ax.set_ylabel("tasks")
    return Plot("speedups", "Distribution of per-task speedups",
                f"{len(speeds)} solved tasks with a measured speedup; the dashed line is the reference's speed.",
                to_svg(fig, "speedups"))


def cost_per_task(run: RunData) -> Plot:
    tasks = [t for t in run.tasks if t.result]
    solved = [t for t in tasks if t.solved]
    fig, (left, right) = _figure(2, 9.6, max(3.0, 0.18 * len(tasks) + 1))
    if not tasks:
        _empty(left, "no task")
        _empty(right, "no task")
    for ax, key, label in ((left, "tokens", "tokens"), (right, "cost_usd", "cost (USD)")):
        if not tasks:
            break
        ys = list(range(len(tasks)))
        ax.barh(ys, [t.result.get(key) or 0 for t in tasks],
                color=[PALETTE["cand"] if t.solved else PALETTE["bad"] for t in tasks])
        ax.set_yticks(ys, [t.name for t in tasks], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel(label + " per task (green: solved)")
        if not any(t.result.get(key) for t in tasks):
            ax.set_xlim(0, 1)
            ax.text(0.5, 0.5, f"no {label} recorded", ha="center", va="center", transform=ax.transAxes,
                    fontsize=9, color="#666")
    tokens = sum(t.result.get("tokens") or 0 for t in tasks)
    cost = sum(t.result.get("cost_usd") or 0.0 for t in tasks)
    per = (f"{tokens / len(solved):.0f} tokens and ${cost / len(solved):.4f} per solved task ({len(solved)} solved)"
           if solved else "no task solved")
    return Plot("cost", "Tokens and cost per task", per + " (results.jsonl).", to_svg(fig, "cost"))


TUNING_METRICS = ("execution accuracy", "GEAK speedup", "geomean speedup", "fast_1")


def tuning(run: RunData) -> Plot | None:
    """Before and after the tuning pass, on the same tasks and runs; None without a tuning pass."""
    m = run.metrics or {}
    if not m.get("tuned") or not m.get("per_runs"):
        return None
    before, after = m["per_runs"][-1]["metrics"], m["tuned"]["metrics"]
    fig, (ax,) = _figure()
    xs = list(range(len(TUNING_METRICS)))
    vals = [[_value(p, n) or 0.0 for n in TUNING_METRICS] for p in (before, after)]
    ax.bar([x - 0.2 for x in xs], vals[0], 0.4, label="before tuning", color=PALETTE["ref"])
    ax.bar([x + 0.2 for x in xs], vals[1], 0.4, label="after tuning", color=PALETTE["cand"])
    ax.set_xticks(xs, TUNING_METRICS, fontsize=8)
    ax.legend(fontsize=8)
    return Plot("tuning", "What the tuning pass added", "All runs and iterations, without and with the "
                "tuning pass's kept variants (metrics.json per_runs[-1] and tuned).", to_svg(fig, "tuning"))


def failure_kinds(run: RunData) -> Plot:
    """How the attempts ended, by their position in the task-run: what the model keeps getting wrong."""
    counts: dict[int, Counter] = {}
    for t in run.tasks:
        for a in t.attempts:
            counts.setdefault(a["index"] + 1, Counter())[a["kind"]] += 1
    fig, (ax,) = _figure(1, 7.4, 3.4)
    kinds = sorted({k for c in counts.values() for k in c}, key=lambda k: (k != "passed", k))
    if not kinds:
        _empty(ax, "no attempt recorded")
    xs = sorted(counts)
    bottom = [0] * len(xs)
    _, plt = _pyplot()
    cmap = plt.get_cmap("tab20")
    for i, kind in enumerate(kinds):
        ys = [counts[x][kind] for x in xs]
        color = PALETTE["cand"] if kind == "passed" else cmap((i * 2 + 1) % 20)
        ax.bar(xs, ys, bottom=bottom, label=kind, color=color)
        bottom = [b + y for b, y in zip(bottom, ys)]
    if kinds:
        ax.set_xticks(xs)
        ax.set_xlabel("attempt (position in its task-run)")
        ax.set_ylabel("attempts")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Plot("failures", "Verdict kinds over attempts",
                "Every attempt of every task-run, by its position, stacked by the judge's kind.",
                to_svg(fig, "failures"))


def latency(task: TaskView, index: int) -> Plot | None:
    """Both sides' median latency per timed shape, with intervals; the speedup and its 95% interval
    above each pair. One panel with fixed margins: a run has a plot per task, and matplotlib's
    tight bounding box draws every figure twice (it was most of a 30-task report's time)."""
    from matplotlib.ticker import NullLocator

    rows = task.timings
    if not rows:
        return None
    fig, (ax,) = _figure(1, 7.0, 3.0)
    xs = list(range(len(rows)))
    for offset, side, color, label in ((-0.2, "ref", PALETTE["ref"], "reference"),
                                       (0.2, "cand", PALETTE["cand"], "kernel")):
        ax.bar([x + offset for x in xs], [r[f"{side}_ms"] or 0.0 for r in rows], 0.4, color=color, label=label,
               yerr=_errors(rows, side), capsize=2, error_kw={"lw": 0.8})
    roof = [(x, r["roofline_ms"]) for x, r in zip(xs, rows) if r.get("roofline_ms")]
    if roof:
        ax.scatter(*zip(*roof), marker="_", s=300, color="#000", label="roofline", zorder=3)
    top = max(max(r["ref_ms"] or 0.0, r["cand_ms"] or 0.0) for r in rows)
    ax.set_yscale("log")
    ax.yaxis.set_minor_locator(NullLocator())  # minor ticks of a log axis: most of the drawing time
    for x, r in zip(xs, rows):
        ci = r.get("ci95")
        text = f"{r['speedup']:.2f}x" if r.get("speedup") is not None else ""
        if ci and text:
            text += f"\n[{ci[0]:.2f}, {ci[1]:.2f}]"
        ax.text(x, top * 1.6, text, ha="center", va="bottom", fontsize=7)
    ax.set_ylim(top=top * 8)
    ax.set_ylabel("median latency (ms, log)")
    ax.set_xticks(xs, [r["label"] for r in rows], rotation=20, ha="right", fontsize=7)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside: the speedups sit on top
    fig.subplots_adjust(left=0.1, right=0.84, top=0.97, bottom=0.28)
    key = f"latency-{index}"
    return Plot(key, "Latency per shape", _latency_caption(rows), to_svg(fig, key, tight=False))


def _errors(rows: list[dict[str, Any]], side: str) -> list[list[float]] | None:
    """Error bars of one side: its block times' range where the verdict kept them; else, for the
    kernel, its latency at the ends of the speedup's interval (the store keeps medians only)."""
    lo, hi = [], []
    for r in rows:
        mid, span = r[f"{side}_ms"] or 0.0, r.get(f"{side}_range")
        if span is None and side == "cand" and r.get("ci95") and r.get("ref_ms") and min(r["ci95"]) > 0:
            span = (r["ref_ms"] / r["ci95"][1], r["ref_ms"] / r["ci95"][0])
        lo.append(max(0.0, mid - span[0]) if span else 0.0)
        hi.append(max(0.0, span[1] - mid) if span else 0.0)
    return [lo, hi] if any(lo) or any(hi) else None


def _latency_caption(rows: list[dict[str, Any]]) -> str:
    if any(r.get("ref_range") for r in rows):
        return ("Bars: each side's median; whiskers: its range over the timed blocks. Above each shape: "
                "the speedup and its 95% interval.")
    return ("Bars: each side's median; the kernel's whiskers: its latency at the ends of the speedup's "
            "95% interval (the run keeps medians and that interval). Above each shape: the speedup and "
            "that interval.")


def run_plots(run: RunData) -> list[Plot]:
    """The run-level plots, in page order (agent runs: all of them; judge-suite: one verdict per
    task, so no curves)."""
    makers: list[Callable[[RunData], Plot | None]] = [speedup_distribution, failure_kinds]
    if run.kind == "agent":
        makers = [sequential, parallel, speedup_distribution, cost_per_task, tuning, failure_kinds]
    return [p for p in (make(run) for make in makers) if p is not None]
