"""Under --search evolve the runs share an archive, so they are not independent samples: every
place that reports pass@k for a run (results.jsonl, summary.json, the printed and --json summary,
bench's tables, the report) reports best-of-k instead, and says so. A synthetic store: no LLM, no
judge."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest
from rich.console import Console

from .agent_support import spec
from kernelwright.agent.app import open_run
from kernelwright.agent.memory import Attempt
from kernelwright.agent.results import task_result, write_outputs
from kernelwright.agent.scaling import BEST_OF_NOTE, UNBIASED_NOTE

CODE = "def tiny_add(x, y):\n    return x + y\n"


def _store(tmp_path, search: str):
    """tiny_add over 3 runs of 1 iteration: run 0 fails, runs 1 and 2 pass."""
    run_spec = spec(iterations=1, runs=3, search=search)
    store, run_spec = open_run(tmp_path / search, run_spec, resume=False)
    name = run_spec.task_names[0] if run_spec.task_names else "tiny_add"
    store.add_attempt(Attempt(name, 0, 0, "generate", 0, None, CODE, kind="wrong_values", reason="wrong"))
    for run in (1, 2):
        store.add_attempt(Attempt(name, run, 0, "generate", 0, None, CODE, kind="passed", speedup=1.5))
    for run in range(3):
        store.end_task_run(name, run, "all iterations done", None)
    return store, run_spec, name


@pytest.mark.parametrize("search", ["independent", "evolve"])
def test_results_and_summary_say_what_pass_at_k_is(tmp_path, search):
    store, run_spec, name = _store(tmp_path, search)
    results = write_outputs(store, [name], 3, search)
    r = results[0]
    rows = [json.loads(line) for line in (store.run_dir / "results.jsonl").read_text().splitlines()]
    summary = json.loads((store.run_dir / "summary.json").read_text())
    assert r.search == rows[0]["search"] == summary["search"] == search
    if search == "evolve":
        # best-of-k: run 0 failed, so best-of-1 is 0; runs 0-1 hold a pass, so best-of-2 is 1
        assert r.pass_at_k == {1: 0.0, 2: 1.0, 3: 1.0}
        assert r.pass_at_k_kind == rows[0]["pass_at_k_kind"] == summary["pass_at_k_kind"] == "best_of_k"
        assert summary["independent_runs"] is False and summary["pass_at_k_note"] == BEST_OF_NOTE.format(k="k")
        assert summary["pass_at_k"] == {"1": 0.0, "2": 1.0, "3": 1.0}
    else:  # the unbiased estimator: 2 of 3 runs passed
        assert r.pass_at_k[1] == pytest.approx(2 / 3) and r.pass_at_k[2] == 1.0
        assert r.pass_at_k_kind == summary["pass_at_k_kind"] == "unbiased"
        assert summary["independent_runs"] is True and summary["pass_at_k_note"] == UNBIASED_NOTE
    assert rows[0]["pass_at_k"] == {str(k): v for k, v in r.pass_at_k.items()}
    store.close()


def test_the_printed_summary_says_best_of_k(tmp_path):
    from kernelwright.cli.agent_results import jsonable, print_result

    store, run_spec, name = _store(tmp_path, "evolve")
    r = task_result(store, name, 3, search="evolve")
    out = io.StringIO()
    print_result(Console(file=out, width=400), store, run_spec, r)
    text = out.getvalue()
    assert "best-of-1 0.00, best-of-2 1.00, best-of-3 1.00" in text and "pass@" not in text.replace(
        "not pass@k", "")
    assert "--search evolve" in text
    data = jsonable(r)  # generate/optimize --json
    assert data["search"] == "evolve" and data["pass_at_k_kind"] == "best_of_k" and data["pass_at_k"][1] == 0.0
    independent = task_result(store, name, 3)
    out = io.StringIO()
    print_result(Console(file=out, width=400), store, replace(run_spec, settings=replace(run_spec.settings,
                                                                                         search="independent")),
                 independent)
    assert "pass@1 0.67" in out.getvalue() and "best-of" not in out.getvalue()
    store.close()


def test_metrics_tables_and_report_say_best_of_k(tmp_path):
    from kernelwright.agent.run_metrics import run_metrics
    from kernelwright.agent.scaling import table
    from kernelwright.report.agent_data import load_agent_run
    from kernelwright.report.markdown import render_markdown
    from kernelwright.report.plots import parallel

    store, run_spec, name = _store(tmp_path, "evolve")
    metrics = run_metrics(store, run_spec)
    store.close()
    assert metrics["search"] == "evolve" and metrics["independent_runs"] is False
    assert metrics["pass_at_k_kind"] == "best_of_k"
    last = metrics["per_runs"][-1]["metrics"]
    assert last["pass@1"]["value"] == 0.0 and last["pass@3"]["value"] == 1.0
    assert "best-of-1 | best-of-k" in table(metrics["per_runs"], "runs", independent=False)
    assert "pass@1 | pass@k" in table(metrics["per_runs"], "runs")
    run = load_agent_run(tmp_path / "evolve")
    info = dict(run.info)
    assert info["search"].startswith("evolve") and "best-of-k" in info["search"]
    md = render_markdown(run)
    assert "best-of-1 | best-of-k" in md and "pass@1 | pass@k" not in md
    assert "best-of-" in next(row["note"] for row in run.headline if row["name"] == "pass@1")
    for task in run.tasks:
        assert task.result is None or task.result["pass_at_k_kind"] == "best_of_k"
    plot = parallel(run)
    assert "best-of-k" in plot.title and "not independent" in plot.caption


@pytest.mark.parametrize("search", ["independent", "evolve"])
def test_show_names_the_rows_best_of_k_under_evolve(tmp_path, search):
    from kernelwright.cli.report_cmds import headline_table
    from kernelwright.report.agent_data import load_agent_run

    store, _spec, _name = _store(tmp_path, search)
    store.close()
    out = io.StringIO()
    Console(file=out, width=200).print(headline_table(load_agent_run(tmp_path / search)))
    text = out.getvalue()
    if search == "evolve":
        assert "best-of-1" in text and "best-of-3" in text and "│ pass@" not in text
    else:
        assert "│ pass@1" in text and "best-of-1 " not in text
