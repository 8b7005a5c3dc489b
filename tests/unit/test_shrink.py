"""--shrink F (tasks/shrink.py): which sizes scale and how, shrunk refs that every process reloads
shrunk, suites whose sizes are code refused by name, and --shrink's values checked (exit 2)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app
from kernelwright.tasks import load_task_ref, resolve_task
from kernelwright.tasks.model import Case, EntryPoint, Task
from kernelwright.tasks.shrink import ShrinkUnsupported, scale_dim, shrink_task, split_ref


def test_dimensions_keep_what_kernels_rely_on():
    assert scale_dim(4096, 0.1) == 512          # a power of two stays one
    assert scale_dim(393216, 0.1) % 16 == 0     # a multiple of 16 stays one
    assert scale_dim(50_257, 0.1) == 5026
    assert scale_dim(3, 0.01) == 3              # kernel sizes, strides, small batches: kept
    assert scale_dim(128, 0.001) == 16          # never below 16


def test_a_builtin_tasks_perf_cases_shrink_and_its_correctness_cases_stay():
    task = resolve_task("matmul")
    shrunk = shrink_task(task, 0.01)
    assert shrunk.shrink == 0.01 and split_ref(shrunk.ref) == (0.01, task.ref)
    assert shrunk.correctness_cases == task.correctness_cases  # small by design: odd sizes, hostile cases
    for old, new in zip(task.perf_cases, shrunk.perf_cases):
        assert all(new.get(k) < old.get(k) for k in "MNK") and new.dtype == old.dtype
    moved = [task.cost(c)["bytes"] for c in task.perf_cases], [shrunk.cost(c)["bytes"] for c in shrunk.perf_cases]
    assert 0.003 < sum(moved[1]) / sum(moved[0]) < 0.03  # about F
    again = load_task_ref(shrunk.ref)  # what a judge child reloads
    assert again.shrink == 0.01 and again.perf_cases == shrunk.perf_cases
    assert "shrunk (--shrink 0.01)" in shrunk.notes[-1]
    assert shrink_task(task, None) is task and shrink_task(task, 1.0) is task


def test_a_suite_whose_sizes_are_code_cannot_shrink():
    task = Task(name="add_value", instruction="", entry_point=EntryPoint.parse("f(x)"), make_inputs=lambda c, g: (),
                reference=lambda: None, visible_cases=[Case("any")], hidden_cases=[], perf_cases=[],
                source_path=__file__, bind=lambda *a: None, suite="rocm", shrink_unsupported="sizes in tests")
    with pytest.raises(ShrinkUnsupported, match="rocm task add_value cannot be shrunk: sizes in tests"):
        shrink_task(task, 0.5)


@pytest.mark.parametrize("command", ["eval", "judge-suite", "generate", "optimize", "bench"])
@pytest.mark.parametrize("value", ["0", "2", "abc", "-0.5"])
def test_shrink_outside_0_to_1_is_a_usage_error(command, value):
    result = CliRunner().invoke(app, [command, "--shrink", value])
    assert result.exit_code == 2 and "--shrink" in result.output, result.output
