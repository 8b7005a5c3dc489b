"""`kernelwright report` and `show` (issue 31): a report of a real bench run (the scripted model,
the judge on the CPU interpreter) whose numbers are metrics.json's and results.jsonl's, that
headless Chromium loads without a console error or a request, with every plot drawn; a timed run
(built through the store's API), a comparison, a judge-suite results file, a run still going."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.agent.agent_support import PING_ANSWER, ROOT

pytestmark = pytest.mark.slow
REFS = ROOT / "src" / "kernelwright" / "suites" / "builtin" / "triton_refs"
SCREENSHOTS = Path(os.environ.get("KERNELWRIGHT_REPORT_SCREENSHOTS", "")) if os.environ.get(
    "KERNELWRIGHT_REPORT_SCREENSHOTS") else None


def _bench_module():
    spec = importlib.util.spec_from_file_location("report_size", ROOT / "benchmarks" / "report_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ans(code: str) -> dict:
    return {"content": f"## Strategy\nplan\n\n```python\n{code}```\n", "usage": {"input_tokens": 100, "output_tokens": 50}}


def kw(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.run([sys.executable, "-m", "kernelwright", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory) -> Path:
    """vector_add passes at once (run 0) and after a fix (run 1); gelu passes in run 0's third
    attempt and never in run 1: two tasks x 2 runs x 3 iterations, untimed."""
    from kernelwright.llm.testing import ScriptedServer

    tmp = tmp_path_factory.mktemp("bench")
    good = {t: _ans((REFS / f"{t}.py").read_text()) for t in ("vector_add", "gelu")}
    bad = {t: _ans((REFS / f"{t}.py").read_text() + f"\n\ndef {t}(*a, **k):\n    return undefined_helper(*a)\n")
           for t in ("vector_add", "gelu")}
    r = {"content": "analysis: the helper is undefined", "usage": {"input_tokens": 100, "output_tokens": 50}}
    va_good, va_bad, ge_good, ge_bad = good["vector_add"], bad["vector_add"], good["gelu"], bad["gelu"]
    sequence = [PING_ANSWER, va_good, va_bad, r, va_good, ge_bad, r, ge_bad, r, ge_good, ge_bad, r, ge_bad, r, ge_bad]
    with ScriptedServer({"sequence": sequence}) as server:
        proc = kw("bench", "--suite", "builtin", "--model", "openai-compatible/scripted", "--base-url",
                  server.openai_base_url, "--no-cache", "--device", "cpu", "--judge-seeds", "1", "--llm-seed", "5",
                  "--out", str(tmp / "run"), "--tasks", "vector_add,gelu", "--runs", "2", "--iterations", "3",
                  "--concurrency", "1", "--json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    return tmp / "run"


@pytest.fixture(scope="module")
def timed_run(tmp_path_factory) -> Path:
    """A timed run with profiles and a tuning pass, through the store's API (benchmarks/report_size.py)."""
    return _bench_module().build_run(tmp_path_factory.mktemp("timed") / "run", tasks=4, runs=2, iterations=3,
                                     prefix="syn")


class Page(HTMLParser):
    """The parts of a report page the tests check: data-* rows, figures with their SVG, links."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: dict[str, dict[str, str]] = {}
        self.tasks: dict[str, dict[str, str]] = {}
        self.figures: list[dict] = []
        self.urls: list[str] = []
        self.tags: set[str] = set()
        self.csp = ""

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.add(tag)
        if tag == "meta" and a.get("http-equiv") == "Content-Security-Policy":
            self.csp = a.get("content", "")
        if tag == "tr" and "data-metric" in a:
            self.metrics[a["data-metric"]] = a
        if tag == "tr" and "data-task" in a and "data-status" in a:
            self.tasks[a["data-task"]] = a
        if tag == "figure":
            self.figures.append({"id": a.get("id"), "svg": 0, "paths": 0})
        if tag == "svg" and self.figures:
            self.figures[-1]["svg"] += 1
        if tag in ("path", "use", "rect") and self.figures:
            self.figures[-1]["paths"] += 1
        for key in ("src", "href", "xlink:href", "action", "data"):
            if a.get(key):
                self.urls.append(a[key])


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def _num(text: str):
    return None if text == "" else float(text)


def render(run: Path, tmp: Path, *extra: str) -> tuple[dict, str]:
    proc = kw("report", str(run), "--out", str(tmp / "report.html"), "--json", *extra, cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    return data, Path(data["html"]).read_text()


def check_self_contained(page: Page) -> None:
    assert page.csp.startswith("default-src 'none'")
    assert not {"script", "link", "iframe", "object", "embed"} & page.tags
    # only links inside the page, or data: images
    assert all(u.startswith("#") or u.startswith("data:") for u in page.urls), [u for u in page.urls
                                                                               if not u.startswith("#")][:5]


def test_report_numbers_are_the_runs_own(bench_run, tmp_path):
    data, html = render(bench_run, tmp_path, "--markdown")
    page = parse(html)
    check_self_contained(page)
    metrics = json.loads((bench_run / "metrics.json").read_text())["per_runs"][-1]["metrics"]
    assert set(page.metrics) == set(metrics)
    for name, m in metrics.items():
        row = page.metrics[name]
        assert _num(row["data-value"]) == m["value"], name
        assert _num(row["data-numerator"]) == m["numerator"], name
        assert int(row["data-denominator"]) == m["denominator"], name
    results = [json.loads(line) for line in (bench_run / "results.jsonl").read_text().splitlines()]
    assert set(page.tasks) == {r["task"] for r in results}
    for r in results:
        row = page.tasks[r["task"]]
        assert int(row["data-passed-runs"]) == r["passed_runs"] and int(row["data-tokens"]) == r["tokens"]
        assert int(row["data-attempts"]) == r["attempts"] and _num(row["data-cost"]) == r["cost_usd"]
        assert row["data-status"] == ("passed" if r["best"] else "failed")
    # every run-level plot, and the timelines link attempts to their parents
    assert {f["id"] for f in page.figures} >= {"plot-sequential", "plot-parallel", "plot-speedups", "plot-cost",
                                               "plot-failures"}
    assert all(f["svg"] == 1 and f["paths"] >= 3 for f in page.figures)
    assert 'href="#t-gelu-r0-a1"' in html and 'id="t-gelu-r0-a2"' in html
    assert "name &#39;undefined_helper&#39; is not defined" in html  # the error excerpt
    md = data["markdown"]
    assert "| pass@1 | 0.75 | 1.5/2 |" in md and "| gelu | passed |" in md
    assert data["bytes"] < 1_000_000


@pytest.mark.skipif(not __import__("kernelwright.report.browser", fromlist=["x"]).find_chromium(),
                    reason="no Chromium here (apt-get install -y chromium; .ci/run installs it)")
def test_report_in_headless_chromium(bench_run, timed_run, tmp_path):
    from kernelwright.report import browser

    _, html = render(bench_run, tmp_path, "--compare", str(timed_run),
                     "--screenshot", str(tmp_path / "report.png"))
    out = tmp_path / "report.html"
    assert (tmp_path / "report.png").stat().st_size > 10_000
    for fragment in ("", "task-gelu", "t-gelu-r0-a1"):
        loaded = browser.load(out, fragment)
        assert loaded.console == [], loaded.console  # no error, no CSP violation: no request tried
        dom = parse(loaded.dom)
        assert dom.figures and all(f["svg"] == 1 and f["paths"] >= 3 for f in dom.figures)
        assert set(dom.metrics) == set(parse(html).metrics)
    if SCREENSHOTS:  # where a person looks at them (CI artifact)
        browser.screenshot(out, SCREENSHOTS / "report.png")
        browser.screenshot(out, SCREENSHOTS / "task.png", fragment="task-gelu")


def test_timed_run_draws_latency_profile_tuning_and_compares(bench_run, timed_run, tmp_path):
    data, html = render(timed_run, tmp_path, "--compare", str(bench_run), "--markdown")
    page = parse(html)
    check_self_contained(page)
    ids = {f["id"] for f in page.figures}
    assert "plot-tuning" in ids and sum(i.startswith("plot-latency-") for i in ids) == data["tasks"]
    assert all(f["svg"] == 1 and f["paths"] >= 3 for f in page.figures)
    metrics = json.loads((timed_run / "metrics.json").read_text())
    geo = metrics["per_runs"][-1]["metrics"]["geomean speedup"]["value"]
    assert _num(page.metrics["geomean speedup"]["data-value"]) == geo
    assert 'id="comparison"' in html and "vector_add" in html.split('id="comparison"')[1]  # the other run's tasks
    assert "of peak bandwidth" in html and "## Comparison" in data["markdown"]
    for r in (json.loads(line) for line in (timed_run / "results.jsonl").read_text().splitlines()):
        assert _num(page.tasks[r["task"]]["data-speedup"]) == r["best"]["speedup"]


def test_show_reads_a_run_still_going_without_writing(timed_run, tmp_path):
    """A run whose last task-run has not ended, its writer still open: show reads it, writes nothing."""
    from kernelwright.agent.app import open_run

    store, spec = open_run(timed_run, None, resume=True)
    store.reopen_task_runs([(spec.task_names[-1], 1)])
    def stamps() -> dict[str, int]:  # (the WAL's index files are SQLite's, shared by readers)
        return {p.name: p.stat().st_mtime_ns for p in timed_run.iterdir() if not p.name.endswith(("-wal", "-shm"))}

    before = stamps()
    try:
        proc = kw("show", str(timed_run), "--json", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["in_progress"] is True and len(data["tasks"]) == len(spec.task_names)
        plain = kw("show", str(timed_run), cwd=tmp_path)
        assert plain.returncode == 0 and "execution accuracy" in plain.stdout and "in progress" in plain.stdout
        assert stamps() == before  # (checked before the writer closes: closing checkpoints its WAL)
    finally:
        store.close()


def test_judge_suite_results_render(tmp_path):
    from kernelwright.judge.common.verdict import CaseResult, Verdict, judge_error_verdict
    from kernelwright.suites.runner import Record, ResultStore

    cand = tmp_path / "vector_add.py"
    cand.write_text((REFS / "vector_add.py").read_text())
    cases = [CaseResult("performance", f"n={n}", {"n": n}, True, ref_ms=0.01 * n, cand_ms=0.008 * n, speedup=1.25,
                        ci95=[1.2, 1.3], timing={"ref_block_ms": [0.01 * n, 0.011 * n],
                                                 "cand_block_ms": [0.008 * n, 0.0085 * n]}) for n in (1, 10)]
    good = Verdict("vector_add", str(cand), "passed", True, True, "passed", speedup=1.25, cases=cases, kind="passed")
    store = ResultStore(tmp_path / "results.jsonl")
    store.add(Record("vector_add", "judged", str(cand), verdict=good.to_dict()))
    store.add(Record("gelu", "judged", "gelu.py", verdict=judge_error_verdict("gelu", "gelu.py", "worker lost").to_dict()))
    store.add(Record("softmax", "missing", None, reason="no candidate file"))
    data, html = render(tmp_path / "results.jsonl", tmp_path, "--markdown")
    page = parse(html)
    check_self_contained(page)
    assert page.metrics["execution accuracy"]["data-value"] == repr(1 / 3)
    assert _num(page.metrics["GEAK speedup"]["data-value"]) == 1.25
    assert page.tasks["softmax"]["data-status"] == "missing"
    assert [f["id"] for f in page.figures if f["id"].startswith("plot-latency-")] == ["plot-latency-2"]  # vector_add
    assert "whiskers: its range over the timed blocks" in html
    shown = kw("show", str(tmp_path / "results.jsonl"), "--json", cwd=tmp_path)
    assert json.loads(shown.stdout)["metrics"][1]["value"] == pytest.approx(1 / 3)


def test_usage_errors_and_the_missing_extra(tmp_path, monkeypatch, capsys):
    assert kw("report", str(tmp_path), cwd=tmp_path).returncode == 2
    proc = kw("show", str(tmp_path / "nothing.jsonl"), "--json", cwd=tmp_path)
    assert proc.returncode == 2 and "error" in json.loads(proc.stdout)
    from kernelwright.report import plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(plots.MissingExtra, match=r"kernelwright\[report\]"):
        plots.require()


def test_report_of_a_bench_sized_run_is_small(tmp_path):
    """30 tasks x 4 runs x 5 iterations: under 5 MB (the time bound is benchmarks/report_size.py's,
    on a machine of its own)."""
    run = _bench_module().build_run(tmp_path / "run")
    data, html = render(run, tmp_path)
    assert data["bytes"] < 5_000_000 and data["tasks"] == 30
    assert html.count('<figure class="plot"') == 36
