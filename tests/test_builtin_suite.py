"""Every built-in task: loads, is not degenerate, has a working Triton reference, has perf cases
and a cost model.

The Triton references are run under Triton's CPU interpreter, which is only switched on by
TRITON_INTERPRET=1 *before* triton is first imported. So this module never imports triton: the
reference checks run in subprocesses (`python -m kernelwright.tasks.refcheck --interpret --json
TASK...`, a report line per task), the tasks dealt out to as many processes as there are CPU
cores, all started the first time any of those tests runs. The interpreter emulates bfloat16 wrongly, so
refcheck runs bfloat16 cases with the same parameters in float16 instead (and skips float8).
"""

from __future__ import annotations

import ast
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest

import kernelwright
from kernelwright.tasks import builtin_task_paths, load_task_file
from kernelwright.tasks.validate import degeneracy_problems

TASK_PATHS = builtin_task_paths()
TASK_NAMES = sorted(TASK_PATHS)
SRC_DIR = Path(kernelwright.__file__).resolve().parent.parent
REFCHECK_TIMEOUT_S = 300

# Tasks the brief for the suite requires (any more are welcome).
REQUIRED_TASKS = {
    "vector_add", "softmax", "rmsnorm", "matmul", "gelu", "silu", "swiglu", "bias_gelu", "row_sum", "row_max",
    "row_argmax", "cumsum", "softmax_long_row", "layernorm", "layernorm_backward", "rmsnorm_backward",
    "cross_entropy", "matmul_fp32", "matmul_bf16", "bmm", "linear_gelu", "flash_attention",
    "flash_attention_causal", "rotary_embedding", "embedding", "transpose_2d", "flip", "quantize_int8_rowwise",
    "dequantize_int8_rowwise", "topk", "dropout",
}
# Pure data movement: no arithmetic, so a cost model honestly reports zero flops.
ZERO_FLOP_TAGS = {"data-movement", "gather"}
# H200 rates for the "each perf case runs >= 20 us" sanity bound (generous peaks, so the bound
# is a lower estimate of the real time): HBM3e bandwidth, and dense throughput per cost()["math"]
# (fp16/bf16 tensor cores by default, which is also an upper bound for anything else).
H200_BYTES_PER_S = 4.8e12
H200_FLOPS_PER_S = {"fp32": 67e12, "tf32": 495e12}
H200_DEFAULT_FLOPS_PER_S = 1.0e15
MIN_PERF_SECONDS = 20e-6


def test_suite_has_the_required_tasks():
    assert len(TASK_NAMES) >= 30
    assert REQUIRED_TASKS <= set(TASK_NAMES), sorted(REQUIRED_TASKS - set(TASK_NAMES))


@pytest.mark.parametrize("name", TASK_NAMES)
def test_task_loads_and_is_complete(name):
    task = load_task_file(TASK_PATHS[name])
    assert task.name == name == TASK_PATHS[name].stem
    assert task.difficulty in (1, 2, 3, 4, 5)
    assert task.tags
    assert len(task.instruction) > 200, "the instruction must spell out shapes, dtypes and semantics"
    assert task.entry_point.signature.startswith(f"{name}(")
    assert task.visible_cases and task.hidden_cases
    labels = [c.label for c in task.correctness_cases + task.perf_cases]
    assert len(labels) == len(set(labels)), "case labels must be unique"


@pytest.mark.parametrize("name", TASK_NAMES)
def test_task_is_not_degenerate(name):
    task = load_task_file(TASK_PATHS[name], check_degenerate=False)  # the check itself, below
    assert degeneracy_problems(task) == []


def _jit_kernels_and_launches(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names of @triton.jit functions, and names launched as `name[grid](...)`."""
    kernels = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if isinstance(target, ast.Attribute) and target.attr == "jit" and \
                        isinstance(target.value, ast.Name) and target.value.id == "triton":
                    kernels.add(node.name)
    launched = {node.func.value.id for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name)}
    return kernels, launched


@pytest.mark.parametrize("name", TASK_NAMES)
def test_triton_reference_defines_entry_point_and_launches_a_jit_kernel(name):
    task = load_task_file(TASK_PATHS[name])
    assert task.triton_reference is not None, "every built-in task ships a Triton reference"
    path = Path(task.triton_reference)
    assert path.name == f"{name}.py" and path.parent.name == "triton_refs"
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert task.entry_point.name in top_level, f"{path.name} must define {task.entry_point.name}()"
    kernels, launched = _jit_kernels_and_launches(tree)
    assert kernels, f"{path.name} has no @triton.jit kernel"
    assert kernels & launched, f"{path.name} never launches its @triton.jit kernel(s) {sorted(kernels)}"


@pytest.mark.parametrize("name", TASK_NAMES)
def test_perf_cases_and_cost_model(name):
    task = load_task_file(TASK_PATHS[name])
    assert task.perf_cases, "at least one perf case"
    assert callable(task.cost)
    zero_flops_ok = bool(ZERO_FLOP_TAGS & set(task.tags))
    for case in task.perf_cases:
        cost = task.cost(case)
        assert cost["bytes"] > 0, case
        assert cost["flops"] > 0 or (zero_flops_ok and cost["flops"] == 0), case
        # big enough to time on an H200 (the cost model counts minimum traffic, so this bound
        # underestimates the real time)
        flops_per_s = H200_FLOPS_PER_S.get(cost.get("math"), H200_DEFAULT_FLOPS_PER_S)
        seconds = max(cost["bytes"] / H200_BYTES_PER_S, cost["flops"] / flops_per_s)
        assert seconds >= MIN_PERF_SECONDS, f"{case}: only ~{seconds * 1e6:.1f} us on an H200"


# -- Triton reference vs PyTorch reference under the interpreter ------------------------------

def _settle(future: Future, report: dict | None = None, error: str | None = None) -> None:
    if future.done():  # cancelled: the session is ending
        return
    if error is None:
        future.set_result(report)
    else:
        future.set_exception(AssertionError(error))


def _refcheck_shard(names: list[str], reports: dict[str, Future], running: list[subprocess.Popen],
                    stop: threading.Event) -> None:
    """Check `names` with one refcheck process (`--json`: one report line per task, in order), so
    that torch and triton are imported once for all of them, not once per task; each task's
    future is settled when its line arrives. A process that dies, or prints no report for
    REFCHECK_TIMEOUT_S, fails the task it was on with what it printed and its exit status; the
    tasks after it are checked by a new process."""
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([str(SRC_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]))
    todo = list(names)
    try:
        while todo and not stop.is_set():
            with tempfile.TemporaryFile(mode="w+") as err:
                proc = subprocess.Popen([sys.executable, "-m", "kernelwright.tasks.refcheck", "--interpret",
                                         "--json", *todo], stdout=subprocess.PIPE, stderr=err, text=True, env=env)
                running.append(proc)
                if stop.is_set():
                    proc.kill()
                lines: queue.Queue[str | None] = queue.Queue()

                def read(out=proc.stdout, lines=lines) -> None:
                    for line in out:
                        lines.put(line)
                    lines.put(None)

                reader = threading.Thread(target=read, daemon=True)
                reader.start()
                printed: list[str] = []
                while todo:
                    try:
                        line = lines.get(timeout=REFCHECK_TIMEOUT_S)
                    except queue.Empty:
                        proc.kill()
                        line, what = None, f"printed no report within {REFCHECK_TIMEOUT_S} s"
                    else:
                        what = "printed no report"
                    if line is None:  # the process ended (or was ended) before reporting on todo[0]
                        proc.wait()
                        err.seek(0)
                        _settle(reports[todo.pop(0)], error=f"refcheck {what} (exit {proc.returncode}):\n"
                                                            f"{''.join(printed)[-2000:]}\n{err.read()[-4000:]}")
                        break
                    try:
                        report = json.loads(line) if line.startswith("{") else None
                    except json.JSONDecodeError:
                        report = None
                    if isinstance(report, dict) and report.get("task") == todo[0]:
                        _settle(reports[todo.pop(0)], report)
                        printed.clear()
                    else:
                        printed.append(line)
                proc.kill()
                proc.wait()
                reader.join(timeout=30)
    except BaseException as exc:  # no test may wait forever on a task never checked
        for name in todo:
            _settle(reports[name], error=f"refcheck not run: {exc!r}")
        raise


@pytest.fixture(scope="session")
def refcheck_runs():
    """Every task's interpreted refcheck, started at once: the tasks dealt out to as many
    processes as there are CPU cores."""
    reports: dict[str, Future] = {name: Future() for name in TASK_NAMES}
    running: list[subprocess.Popen] = []
    stop = threading.Event()
    shards = max(1, min(os.cpu_count() or 1, len(TASK_NAMES)))
    threads = [threading.Thread(target=_refcheck_shard, args=(TASK_NAMES[i::shards], reports, running, stop),
                                daemon=True) for i in range(shards)]
    for t in threads:
        t.start()
    yield reports
    stop.set()
    for future in reports.values():
        future.cancel()
    for proc in running:  # the session ended early (-x, Ctrl-C): no refcheck outlives it
        proc.kill()
    for t in threads:
        t.join()


@pytest.mark.slow
@pytest.mark.parametrize("name", TASK_NAMES)
def test_triton_reference_matches_pytorch_reference_under_interpreter(name, refcheck_runs):
    report = refcheck_runs[name].result()
    assert report["task"] == name
    failures = "\n".join(f"[{label}] {p}" for label, problems in report["failures"].items() for p in problems)
    assert not report["failures"], f"Triton reference disagrees with the PyTorch reference:\n{failures}"
    assert report["checked"], "no case could be checked under the interpreter"
