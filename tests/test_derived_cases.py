"""Derived hidden cases (tasks/derived.py) on a KernelBench-shaped checkout written here: a level-1
ReLU whose get_inputs() draws torch.rand (non-negative), where a Triton copy kernel (an identity
"ReLU") passed every case before and now fails the signed hidden case, while a correct Triton ReLU
passes; and a log, defined only for positive inputs, whose signed case is dropped and recorded."""

import pytest
import torch

from kernelwright.suites.kernelbench import load_suite
from kernelwright.tasks.derived import (
    DROPPED,
    LARGE_SCALE,
    NothingToDerive,
    atol_scales,
    derive_inputs,
    derived_kind,
    nonfinite_reason,
    raised_reason,
)

from .conftest import judge_on_cpu

PROBLEM = '''
import torch
import torch.nn as nn

batch_size = 4
dim = 96


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return OP


def get_inputs():
    return [torch.rand(batch_size, dim) + 0.01]


def get_init_inputs():
    return []
'''

CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def op_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + offs, EXPR, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        op_kernel[(triton.cdiv(n, 128),)](x, out, n, BLOCK=128)
        return out
'''


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("KernelBench-derived")
    level1 = root / "KernelBench" / "level1"
    level1.mkdir(parents=True)
    (level1 / "19_ReLU.py").write_text(PROBLEM.replace("OP", "torch.relu(x)"))
    (level1 / "30_Log.py").write_text(PROBLEM.replace("OP", "torch.log(x)"))
    # a model that refuses inputs outside its domain: raising drops the case as NaN does
    (level1 / "31_Checked.py").write_text(PROBLEM.replace(
        "        return OP", "        if bool((x < 0).any()):\n            raise ValueError('negative input')\n"
                            "        return x * 2"))
    cands = root / "candidates"
    cands.mkdir()
    (cands / "relu.py").write_text(CANDIDATE.replace("EXPR", "tl.maximum(x, 0.0)"))
    (cands / "identity.py").write_text(CANDIDATE.replace("EXPR", "x"))
    (cands / "log.py").write_text(CANDIDATE.replace("EXPR", "tl.log(x)"))
    (cands / "double.py").write_text(CANDIDATE.replace("EXPR", "x * 2.0"))
    return root


def _task(checkout, name):
    tasks, problems = load_suite(checkout)
    assert not problems
    return {t.name: t for t in tasks}[name]


def _cases(verdict):
    return {c.label: c for c in verdict.cases if c.kind == "correctness"}


def test_derive_inputs_keeps_shapes_dtypes_and_integer_tensors():
    gen = torch.Generator().manual_seed(7)
    x = torch.rand(3, 50)
    idx = torch.arange(6)
    scalar = torch.tensor(0.5)
    signed = derive_inputs((x, idx, [x.double()], scalar, 3), "signed", gen)
    assert signed[0].shape == x.shape and signed[0].dtype == x.dtype
    assert torch.equal(signed[0].abs(), x) and bool((signed[0] < 0).any()) and bool((signed[0] > 0).any())
    assert signed[1] is idx and signed[3] is scalar and signed[4] == 3  # integer, 0-d, non-tensor: untouched
    assert isinstance(signed[2], list) and torch.equal(signed[2][0].abs(), x.double())
    # the same seed, the same signs (both sides of the judge derive them alone)
    again = derive_inputs((x,), "signed", torch.Generator().manual_seed(7))
    assert torch.equal(again[0], signed[0])
    assert not torch.equal(derive_inputs((x,), "signed", torch.Generator().manual_seed(8))[0], signed[0])
    large = derive_inputs((x,), "large-magnitude", gen)
    assert torch.equal(large[0], x * LARGE_SCALE) and float(x.min()) >= 0  # signs kept
    with pytest.raises(NothingToDerive):
        derive_inputs((idx, 2.0), "signed", gen)


def test_drop_reasons_and_tolerance_scales():
    assert nonfinite_reason([torch.ones(3)]) is None
    reason = nonfinite_reason([torch.ones(2), torch.tensor([1.0, float("nan")])], ["a", "b"])
    assert reason == f"{DROPPED}: the reference is not defined there (NaN in b)"
    assert "(inf in output)" in nonfinite_reason([torch.tensor([float("inf")])])
    assert raised_reason(NothingToDerive("the problem's inputs hold no floating-point tensor to transform")) == \
        f"{DROPPED}: the problem's inputs hold no floating-point tensor to transform"
    assert atol_scales([torch.full((4,), -30.0), torch.full((4,), 0.1), torch.arange(3)]) == [30.0, 1.0, 1.0]


def test_kernelbench_tasks_get_the_derived_hidden_cases(checkout):
    task = _task(checkout, "L1_19_ReLU")
    assert [derived_kind(c) for c in task.hidden_cases] == ["signed", "large-magnitude"]
    assert "other distributions" in task.instruction
    assert all(c.to_dict() not in task.public_view()["visible_cases"] for c in task.hidden_cases)


@pytest.mark.slow
def test_identity_relu_fails_the_signed_case_a_correct_relu_passes(checkout):
    task = _task(checkout, "L1_19_ReLU")
    wrong = judge_on_cpu(task, checkout / "candidates" / "identity.py", seeds=2, perf=False)
    assert wrong.stage == "correctness" and wrong.kind.value == "wrong_values", wrong.reason
    cases = _cases(wrong)
    assert cases["get_inputs() at the file's sizes"].ok  # KernelBench's own check alone passed it
    signed = next(c for label, c in cases.items() if "random sign" in label)
    assert signed.ok is False and signed.failure == "wrong_values" and len(signed.seeds) == 1
    right = judge_on_cpu(task, checkout / "candidates" / "relu.py", seeds=2, perf=False)
    assert right.stage == "passed", f"{right.reason}\n{right.detail}"
    assert [c.ok for c in _cases(right).values()] == [True, True, True] and not right.flags


@pytest.mark.slow
def test_a_domain_limited_reference_drops_the_case_and_records_it(checkout):
    task = _task(checkout, "L1_30_Log")
    verdict = judge_on_cpu(task, checkout / "candidates" / "log.py", seeds=2, perf=False)
    assert verdict.stage == "passed", f"{verdict.reason}\n{verdict.detail}"
    cases = _cases(verdict)
    signed = next(c for label, c in cases.items() if "random sign" in label)
    assert signed.ok is None and signed.reason == f"{DROPPED}: the reference is not defined there (NaN in output)"
    assert verdict.flags == [f"case {signed.label}: {signed.reason}"]
    large = next(c for label, c in cases.items() if f"times {LARGE_SCALE:g}" in label)
    assert large.ok is True  # log(100 x) is defined: that case is kept


@pytest.mark.slow
def test_a_reference_that_raises_on_a_derived_case_drops_it(checkout):
    task = _task(checkout, "L1_31_Checked")
    verdict = judge_on_cpu(task, checkout / "candidates" / "double.py", seeds=1, perf=False)
    assert verdict.stage == "passed", f"{verdict.reason}\n{verdict.detail}"
    signed = next(c for label, c in _cases(verdict).items() if "random sign" in label)
    assert signed.ok is None
    assert signed.reason == f"{DROPPED}: the reference is not defined there (it raised ValueError: negative input)"
    assert verdict.flags == [f"case {signed.label}: {signed.reason}"]
