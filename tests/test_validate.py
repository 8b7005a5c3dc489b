"""check_not_degenerate: rejects task files whose reference cannot tell a right kernel from a
wrong one, and accepts sound ones."""

from __future__ import annotations

import textwrap

import pytest

from kernelwright.tasks import TaskFileError, load_task_file
from kernelwright.tasks.validate import check_not_degenerate, degeneracy_problems

TEMPLATE = '''
"""A tiny task for the degeneracy tests."""
import torch
from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "{name}"
instruction = "test task"
entry_point = "{name}(x: torch.Tensor)"


def make_inputs(case, gen):
    return (randn(gen, case.shape, case.dtype),)


def reference(x):
{body}


visible_cases = [Case("float32", shape=(4, 16)), Case("float16", shape=(3, 5))]
'''


def _task(tmp_path, name, body):
    path = tmp_path / f"{name}.py"
    path.write_text(TEMPLATE.format(name=name, body=textwrap.indent(textwrap.dedent(body).strip(), "    ")))
    return load_task_file(path, check_degenerate=False)


def test_loader_rejects_degenerate_task_files(tmp_path):
    path = tmp_path / "zeros.py"
    path.write_text(TEMPLATE.format(name="zeros", body="    return torch.zeros_like(x)"))
    with pytest.raises(TaskFileError, match="degenerate"):
        load_task_file(path)


def test_sound_task_passes(tmp_path):
    task = _task(tmp_path, "good", "return torch.softmax(x, dim=-1)")
    assert degeneracy_problems(task) == []
    assert check_not_degenerate(task) is None  # no TaskFileError
    assert load_task_file(task.source_path).name == "good"  # the loader's own check lets it in


def test_sound_task_with_tuple_output_passes(tmp_path):
    task = _task(tmp_path, "good_pair", "return x.amax(dim=-1), x.argmax(dim=-1)")
    assert degeneracy_problems(task) == []  # neither output is flagged (argmax's integers included)
    assert check_not_degenerate(task) is None
    assert load_task_file(task.source_path).name == "good_pair"


@pytest.mark.parametrize("name, body, why", [
    ("all_zero", "return x * 0", "all zeros"),
    ("constant", "return torch.ones_like(x) * 3", "constant"),
    ("near_constant", "return 1 + 1e-14 * x", "constant"),
    ("ignores_input", "return torch.arange(x.numel(), dtype=x.dtype).view(x.shape)", "do not depend on the inputs"),
    ("nan_output", "return x / 0 * 0", "NaN/inf"),
    ("inf_output", "return x.abs() / 0", "NaN/inf"),
    ("empty_output", "return x[:, :0]", "empty"),
    ("zero_second_output", "return x, torch.zeros_like(x)", "output 1"),
    ("not_a_tensor", "return float(x.sum())", "not a tensor"),
])
def test_degenerate_task_is_rejected(tmp_path, name, body, why):
    task = _task(tmp_path, name, body)
    with pytest.raises(TaskFileError) as info:
        check_not_degenerate(task)
    assert info.value.path == tmp_path / f"{name}.py"
    assert info.value.problem.startswith("degenerate: ")
    assert why in info.value.problem


def test_reference_that_raises_is_reported_as_a_task_file_error(tmp_path):
    task = _task(tmp_path, "raises", "raise RuntimeError('boom')")
    with pytest.raises(TaskFileError, match="reference failed on case .*boom"):
        check_not_degenerate(task)


def test_only_the_given_cases_are_run(tmp_path):
    # constant on the first case only: checking just the second case must pass
    task = _task(tmp_path, "first_case_constant", "return x * 0 if x.shape == (4, 16) else x * 2")
    with pytest.raises(TaskFileError):
        check_not_degenerate(task)
    check_not_degenerate(task, cases=task.visible_cases[1:])
