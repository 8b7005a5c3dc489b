"""`kernelwright judge-suite` on the built-in suite under the interpreter: results file, metrics,
and resuming after an interruption without re-judging or losing anything.

Most runs are in this process (`kernelwright_here`, tests/conftest.py: the command line's own
entry point); the interrupted run and the usage errors' exit statuses are a real process's."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from kernelwright.suites.runner import Record, ResultStore

TASKS = "vector_add,softmax,silu,row_sum"


def run(args, **kw):
    return subprocess.run([sys.executable, "-m", "kernelwright", "judge-suite", *args],
                          capture_output=True, text=True, timeout=600, **kw)


@pytest.mark.slow
def test_reference_run_writes_results_and_metrics(tmp_path, kernelwright_here):
    out = tmp_path / "run.jsonl"
    proc = kernelwright_here("judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                             "--tasks", TASKS, "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    metrics = {m["name"]: m for m in report["metrics"]}
    assert metrics["execution accuracy"]["value"] == 1.0
    assert metrics["execution accuracy"]["denominator"] == 4
    lines = out.read_text().splitlines()
    assert sorted(json.loads(line)["task"] for line in lines) == sorted(TASKS.split(","))
    assert all(json.loads(line)["verdict"]["stage"] == "passed" for line in lines)

    # a rerun resumes: nothing is judged twice
    again = kernelwright_here("judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                              "--tasks", TASKS, "--out", str(out))
    assert again.returncode == 0
    assert "4 tasks already judged" in again.stderr
    assert len(out.read_text().splitlines()) == 4


@pytest.mark.slow
def test_interrupted_run_resumes_without_loss(tmp_path):
    out = tmp_path / "run.jsonl"
    args = ["--suite", "builtin", "--candidates", "reference", "--device", "cpu", "--workers-per-device", "1",
            "--tasks", "vector_add,silu,gelu,row_sum,row_max,flip", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "kernelwright", "judge-suite", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while time.time() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 2):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    first = out.read_text().splitlines()
    assert proc.returncode == 130, err
    assert "rerun the same command to resume" in err
    assert 2 <= len(first) < 6
    rerun = run(args)
    assert rerun.returncode == 0, rerun.stderr
    tasks = [json.loads(line)["task"] for line in out.read_text().splitlines()]
    assert sorted(tasks) == sorted(["vector_add", "silu", "gelu", "row_sum", "row_max", "flip"])  # each once
    assert out.read_text().splitlines()[: len(first)] == first  # earlier results untouched


def test_torn_last_line_is_ignored(tmp_path):
    path = tmp_path / "r.jsonl"
    store = ResultStore(path)
    store.add(Record("a", "missing", None, "no a.py"))
    with open(path, "a") as f:
        f.write('{"task": "b", "status": "jud')  # the process died mid-write
    again = ResultStore(path)
    assert set(again.records) == {"a"}


@pytest.mark.slow
def test_usage_errors_exit_2(tmp_path):
    assert run(["--suite", "nope", "--candidates", "reference"]).returncode == 2
    missing = run(["--suite", "tritonbench-revised", "--candidates", "reference"])
    assert missing.returncode == 2 and "--path" in missing.stderr
    assert run(["--suite", "builtin", "--candidates", str(tmp_path / "absent")]).returncode == 2
    assert run(["--suite", "builtin", "--candidates", "reference", "--tasks", "nope"]).returncode == 2


@pytest.mark.slow
def test_missing_candidates_are_recorded_not_dropped(tmp_path, kernelwright_here):
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "vector_add.py").write_text(
        (os.path.dirname(__file__) + "/candidates/vector_add/good.py") and
        open(os.path.join(os.path.dirname(__file__), "candidates", "vector_add", "good.py")).read())
    out = tmp_path / "run.jsonl"
    proc = kernelwright_here("judge-suite", "--suite", "builtin", "--candidates", str(cands), "--device", "cpu",
                             "--tasks", "vector_add,silu", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    records = {json.loads(line)["task"]: json.loads(line) for line in out.read_text().splitlines()}
    assert records["vector_add"]["verdict"]["stage"] == "passed"
    assert records["silu"]["status"] == "missing" and "silu.py" in records["silu"]["reason"]
    metrics = {m["name"]: m for m in json.loads(proc.stdout)["metrics"]}
    assert (metrics["execution accuracy"]["numerator"], metrics["execution accuracy"]["denominator"]) == (1, 2)


def test_tasks_given_twice_and_as_comma_lists_are_all_judged(tmp_path):
    """`--tasks a --tasks b,c` is a, b and c (it used to judge only the last --tasks, exit 0)."""
    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "vector_add.py").write_text(
        open(os.path.join(os.path.dirname(__file__), "candidates", "vector_add", "good.py")).read())
    out = tmp_path / "run.jsonl"
    proc = run(["--suite", "builtin", "--candidates", str(cands), "--device", "cpu", "--judge-seeds", "1",
                "--tasks", "vector_add", "--tasks", "silu,gelu", "--out", str(out), "--json"])
    assert proc.returncode == 0, proc.stderr
    records = {json.loads(line)["task"]: json.loads(line) for line in out.read_text().splitlines()}
    assert sorted(records) == ["gelu", "silu", "vector_add"]
    assert records["vector_add"]["verdict"]["stage"] == "passed"
    assert records["silu"]["status"] == records["gelu"]["status"] == "missing"
    unknown = run(["--suite", "builtin", "--candidates", "reference", "--tasks", "vector_add", "--tasks", "nope"])
    assert unknown.returncode == 2 and "'nope'" in unknown.stderr and "kernelwright tasks --suite builtin" in unknown.stderr


def test_a_reference_that_fails_here_makes_the_task_unsupported(tmp_path):
    """The suite's own reference failing on this platform is reported as unsupported, with the
    reason, counted as a failure, and left out of denominators only with --exclude-unsupported."""
    task_file = tmp_path / "needs_gpu.py"
    task_file.write_text('''
import torch
from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn
name = "needs_gpu"
instruction = "x + 1, but the reference only runs on a GPU"
entry_point = "vector_add(x, y)"
def make_inputs(case, gen):
    return randn(gen, case.shape, case.dtype), randn(gen, case.shape, case.dtype)
def reference(x, y):
    if x.dtype == torch.float64 and not x.is_cuda:  # the judged run (float64) fails off the GPU
        raise RuntimeError("this reference needs a CUDA device")
    return x + y
visible_cases = [Case("float32", shape=(64,))]
''')
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.metrics import execution_accuracy
    from kernelwright.suites.runner import ResultStore, plan, run_suite
    from kernelwright.tasks import load_task_file

    task = load_task_file(task_file, check_degenerate=False)
    cands = tmp_path / "c"
    cands.mkdir()
    (cands / "needs_gpu.py").write_text(
        open(os.path.join(os.path.dirname(__file__), "candidates", "vector_add", "good.py")).read())
    store = ResultStore(tmp_path / "r.jsonl")
    with JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1)) as pool:
        run_suite(plan([task], str(cands), store, pool.backend), store, pool)
    record = store.records["needs_gpu"]
    assert record.status == "unsupported" and "needs a CUDA device" in record.verdict["detail"]
    outcome = record.outcome()
    assert execution_accuracy([outcome]).denominator == 1
    assert execution_accuracy([outcome], exclude_unsupported=True).denominator == 0


def test_largest_tasks_are_judged_first(tmp_path):
    """The plan starts the tasks with the most items (test cases plus timed perf cases) first, so
    the longest task is not the last to start; equal sizes keep the suite's order."""
    from kernelwright.suites.runner import REFERENCE, expected_cost, load_suite_tasks, plan

    tasks, _ = load_suite_tasks("builtin", None)
    for limit in (None, 2):
        work = plan(tasks, REFERENCE, ResultStore(tmp_path / f"r{limit}.jsonl"), "cpu", max_perf_cases=limit)
        sizes = [expected_cost(task, path, limit) for task, path in work.to_judge]
        assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]
        suite_order = {task.name: i for i, task in enumerate(tasks)}
        for (a, pa), (b, pb) in zip(work.to_judge, work.to_judge[1:]):
            if expected_cost(a, pa, limit) == expected_cost(b, pb, limit):
                assert suite_order[a.name] < suite_order[b.name]


def test_a_file_of_many_autotuning_configs_is_judged_first(tmp_path):
    """Every autotuning config is compiled before it is tried: a candidate that declares 64 of
    them starts before tasks with more test items, so its minutes of compiling overlap the rest."""
    from kernelwright.suites.runner import expected_items, load_suite_tasks, plan

    tasks, _ = load_suite_tasks("builtin", None)
    smallest = min(tasks, key=lambda t: expected_items(t))
    cands = tmp_path / "cands"
    cands.mkdir()
    for task in tasks:
        (cands / f"{task.name}.py").write_text("import triton\n")
    (cands / f"{smallest.name}.py").write_text(
        "import triton\n"
        "configs = [triton.Config({'B': b}, num_warps=w, num_stages=s)\n"
        "           for b in [16, 32, 64, 128] for w in (2, 4, 8, 16) for s in range(2, 6)]\n")
    work = plan(tasks, str(cands), ResultStore(tmp_path / "r.jsonl"), "cpu")
    assert work.to_judge[0][0].name == smallest.name
    assert expected_items(smallest) < max(expected_items(t) for t in tasks)


GOOD_VECTOR_ADD = os.path.join(os.path.dirname(__file__), "candidates", "vector_add", "good.py")


@pytest.mark.slow
def test_failures_are_listed_by_kind_and_an_edited_candidate_is_judged_again(tmp_path, kernelwright_here):
    """The table is followed by the failures grouped by kind, each with the first line of its
    reason; with nothing timed there are no fast_p rows. A rerun reuses a stored verdict only for
    the same candidate content and judge options, and says which tasks it judges again and why."""
    def run(args):  # in this process
        return kernelwright_here("judge-suite", *args)

    cands = tmp_path / "cands"
    cands.mkdir()
    (cands / "vector_add.py").write_text(open(GOOD_VECTOR_ADD).read())
    (cands / "silu.py").write_text("import torch\n\ndef silu(x):\n    return x * torch.sigmoid(x)\n")
    out = tmp_path / "run.jsonl"
    args = ["--suite", "builtin", "--candidates", str(cands), "--device", "cpu", "--tasks", "vector_add,silu,gelu",
            "--out", str(out), "--judge-seeds", "1"]
    first = run(args)
    assert first.returncode == 0, first.stderr
    text = first.stdout
    assert "failures (2 tasks, by kind" in text
    # the kind is the verdict's own (its failure kind, or its stage where verdicts have none)
    assert re.search(r"\n  [\w -]+ \(1\):\n    silu: defines no @triton.jit kernel", text), text
    assert "  missing (1):\n    gelu: no gelu.py in" in text
    assert "| fast_" not in text and "nothing was timed" in text

    again = run(args)
    assert "3 tasks already judged" in again.stderr and "judging vector_add again" not in again.stderr
    with open(cands / "vector_add.py", "a") as f:
        f.write("# edited\n")
    edited = run(args)
    assert "judging vector_add again: the candidate file changed" in edited.stderr
    assert "2 tasks already judged" in edited.stderr
    other_options = run(args[:-2] + ["--judge-seeds", "2"])
    assert "judging vector_add again: the judge options changed" in other_options.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task"] for r in records].count("vector_add") == 3
    assert all(r["candidate_sha256"] or r["status"] == "missing" for r in records)


def test_plan_reuses_a_record_only_for_the_same_file_and_options(tmp_path):
    from kernelwright.judge import JudgeOptions
    from kernelwright.suites.runner import file_sha256, options_key, plan
    from kernelwright.tasks import resolve_task

    task = resolve_task("vector_add")
    cands = tmp_path / "c"
    cands.mkdir()
    cand = cands / "vector_add.py"
    cand.write_text("x = 1\n")
    store = ResultStore(tmp_path / "r.jsonl")
    opts = JudgeOptions(seeds=2)
    store.add(Record("vector_add", "judged", str(cand), "ok", {"stage": "passed"},
                     candidate_sha256=file_sha256(cand), judge_options=options_key(opts, "cpu")))
    assert plan([task], str(cands), store, "cpu", options=opts).already_done == 1
    assert plan([task], str(cands), store, "cpu", options=JudgeOptions(seeds=2, perf=False)).already_done == 1
    assert plan([task], str(cands), store, "cpu", options=JudgeOptions(seeds=3)).rejudged == [
        ("vector_add", "the judge options changed")]
    assert plan([task], str(cands), store, "cuda", options=opts).rejudged[0][1] == "the judge options changed"
    cand.write_text("x = 2\n")
    work = plan([task], str(cands), store, "cpu", options=opts)
    assert work.rejudged == [("vector_add", "the candidate file changed")] and len(work.to_judge) == 1
    old = ResultStore(tmp_path / "old.jsonl")
    old.add(Record("vector_add", "judged", str(cand), "ok", {"stage": "passed"}))  # before hashes were kept
    assert "older kernelwright" in plan([task], str(cands), old, "cpu", options=opts).rejudged[0][1]
