"""The comparison rules of kernelwright.tasks.refcheck, exercised with plain PyTorch functions
standing in for Triton kernels (so nothing here imports triton)."""

from __future__ import annotations

import torch

from kernelwright.tasks import Case, resolve_task
from kernelwright.tasks.refcheck import check_case


def _problems(task_name, fn, case):
    return check_case(resolve_task(task_name), fn, case, device="cpu")


def test_a_correct_implementation_has_no_problems():
    assert _problems("vector_add", lambda x, y: x + y, Case("float16", shape=(32, 130))) == []
    assert _problems("topk", lambda x, k: torch.topk(x, k), Case("float32", shape=(8, 1000), k=5)) == []


def test_values_outside_the_tolerance_are_reported():
    problems = _problems("vector_add", lambda x, y: x + y + 1e-2, Case("float32", shape=(1000,)))
    assert len(problems) == 1 and "outside atol" in problems[0] and "1000 of 1000" in problems[0]


def test_float32_output_judged_against_the_float64_reference():
    # rounding the sum to float16 and back is a float32-dtype output with float16 accuracy: caught
    problems = _problems("vector_add", lambda x, y: (x + y).half().float(), Case("float32", shape=(1000,)))
    assert problems and "outside atol" in problems[0]


def test_wrong_dtype_or_shape_is_reported():
    case = Case("float32", shape=(1000,))
    assert "expected torch.float32" in _problems("vector_add", lambda x, y: (x + y).double(), case)[0]
    assert "(1, 1000)" in _problems("vector_add", lambda x, y: (x + y)[None], case)[0]


def test_integer_outputs_must_match_exactly():
    problems = _problems("row_argmax", lambda x: x.argmin(dim=-1), Case("float32", shape=(16, 1000)))
    assert problems and "elements differ" in problems[0]


def test_wrong_number_of_outputs_is_reported():
    problems = _problems("topk", lambda x, k: torch.topk(x, k).values, Case("float32", shape=(8, 1000), k=5))
    assert problems == ["returned 1 output(s), the reference returns 2"]


def test_modifying_an_input_is_reported():
    def in_place(x, y):
        return x.add_(y).clone()

    assert "argument 0 was modified" in _problems("vector_add", in_place, Case("float32", shape=(1000,)))
