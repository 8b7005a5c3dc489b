"""Every built-in task: loads, is not degenerate, has a working Triton reference, has perf cases
and a cost model.

The Triton references are run under Triton's CPU interpreter, which is only switched on by
TRITON_INTERPRET=1 *before* triton is first imported. So this module never imports triton: each
task's reference check runs in its own subprocess (`python -m kernelwright.tasks.refcheck
--interpret --json TASK`); the subprocesses are started together, as many at a time as there are
CPU cores, the first time any of those tests runs. The interpreter emulates bfloat16 wrongly, so
refcheck runs bfloat16 cases with the same parameters in float16 instead (and skips float8).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
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

_refcheck_runs: dict[str, Future] = {}


def _run_refcheck(name: str) -> dict:
    env = dict(os.environ, TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([str(SRC_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.run([sys.executable, "-m", "kernelwright.tasks.refcheck", "--interpret", "--json", name],
                          capture_output=True, text=True, env=env, timeout=REFCHECK_TIMEOUT_S)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise AssertionError(f"refcheck for {name} printed no report (exit {proc.returncode}):\n"
                             f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


@pytest.fixture(scope="session")
def refcheck_runs():
    """Start every task's interpreted refcheck at once (bounded by the CPU count)."""
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for name in TASK_NAMES:
            _refcheck_runs[name] = pool.submit(_run_refcheck, name)
        yield _refcheck_runs
        for future in _refcheck_runs.values():
            future.cancel()


@pytest.mark.slow
@pytest.mark.parametrize("name", TASK_NAMES)
def test_triton_reference_matches_pytorch_reference_under_interpreter(name, refcheck_runs):
    report = refcheck_runs[name].result()
    assert report["task"] == name
    failures = "\n".join(f"[{label}] {p}" for label, problems in report["failures"].items() for p in problems)
    assert not report["failures"], f"Triton reference disagrees with the PyTorch reference:\n{failures}"
    assert report["checked"], "no case could be checked under the interpreter"
