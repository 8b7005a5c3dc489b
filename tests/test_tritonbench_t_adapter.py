"""The TritonBench-T adapter end to end under the interpreter, on a miniature checkout laid out like
thunlp/TritonBench (data/TritonBench_T_v1/<op>.py = PyTorch operator + 146-# separator + test that
builds inputs on 'cuda' and prints its results; TritonBench_T_v1.jsonl statistics; Alpaca
instruction JSON matched through the functional description)."""

import json
import subprocess
import sys

import pytest

from kernelwright.suites.runner import REFERENCE, ResultStore, plan
from kernelwright.suites.runner import suite_task_names
from kernelwright.suites.tritonbench_t import DATA_DIR, INSTRUCTION_JSONS, STATS_JSON, load_suite
from kernelwright.tasks import load_task_ref

from .conftest import QUICK_PERF, judge_on_cpu

SEPARATOR = "\n" + "#" * 146 + "\n"
# A made-up operator in TritonBench-T's style: PyTorch function, then the golden test.
OPERATOR = '''
import torch

def shifted_tanh(input: torch.Tensor, shift: float = 1.0) -> torch.Tensor:
    """tanh(input) + shift, element-wise."""
    return torch.tanh(input) + shift
'''
TEST = '''
import torch
torch.manual_seed(42)

def test_shifted_tanh():
    results = {}
    results["test_case_1"] = shifted_tanh(torch.randn(5, device='cuda'))
    results["test_case_2"] = shifted_tanh(torch.randn(3, 7, device='cuda'), shift=-2.0)
    return results

test_results = test_shifted_tanh()
print(test_results)
'''
CANDIDATE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def shifted_tanh_kernel(x_ptr, out_ptr, n, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(x < 0, -t, t)
    tl.store(out_ptr + offs, t + shift, mask=mask)


def shifted_tanh(input, shift=1.0):
    x = input.contiguous()
    out = torch.empty_like(x, device='cuda')
    n = x.numel()
    shifted_tanh_kernel[(triton.cdiv(n, 32),)](x, out, n, SHIFT, BLOCK=32)
    return out
'''


def write_checkout(root):
    """The one-operator TritonBench-T layout under `root` (also the bench tests' checkout)."""
    data = root / DATA_DIR
    data.mkdir(parents=True)
    (data / "shifted_tanh.py").write_text(OPERATOR + SEPARATOR + TEST)
    (data / "no_test.py").write_text("import torch\n\ndef f(x):\n    return x\n")
    description = "Applies tanh to every element of the input and adds a constant shift."
    (root / STATS_JSON).write_text(json.dumps([{"name": "shifted_tanh", "file": "shifted_tanh.py",
                                                 "description": description, "difficulty": 2,
                                                 "func_inputs": "shifted_tanh(input, shift=1.0) -> Tensor"}]))
    instruction = ("You are an expert in Triton programming.\nFunctional Description: " + description +
                   "\nWrapper Entry Information: shifted_tanh(input, shift=1.0) -> Tensor\n")
    (root / INSTRUCTION_JSONS[0]).write_text(json.dumps([{"instruction": instruction, "input": "", "output": ""}]))
    return root


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = write_checkout(tmp_path_factory.mktemp("TritonBench"))
    cands = root / "candidates"
    cands.mkdir()
    (cands / "shifted_tanh.py").write_text(CANDIDATE.replace("SHIFT", "shift"))
    (cands / "wrong.py").write_text(CANDIDATE.replace("SHIFT", "shift + 0.1"))
    torch_only = CANDIDATE.replace("SHIFT", "shift").replace(
        "    shifted_tanh_kernel[(triton.cdiv(n, 32),)](x, out, n, shift, BLOCK=32)\n    return out",
        "    return torch.tanh(x) + shift")
    (cands / "torch_only.py").write_text(torch_only)
    return root


def test_loads_like_tritonbench(checkout):
    tasks, problems = load_suite(checkout / DATA_DIR)  # any folder inside the checkout works
    assert [t.name for t in tasks] == ["shifted_tanh"]
    assert suite_task_names("tritonbench-t", checkout) == ["no_test", "shifted_tanh"]  # file names, unread
    assert problems == [("no_test.py", "SuiteError: no_test.py: no 146-# separator between the operator and its test")]
    task = tasks[0]
    assert task.instruction.startswith("You are an expert in Triton programming.")
    assert "Wrapper Entry Information: shifted_tanh" in task.instruction
    assert task.entry_point.name == "shifted_tanh" and task.difficulty == 2
    assert [c.label for c in task.visible_cases] == ["golden test function test_shifted_tanh()"]
    assert len(task.perf_cases) == 1
    again = load_task_ref(task.ref)
    assert again.name == "shifted_tanh" and again.entry_point == task.entry_point


def test_reference_run_reports_no_triton_reference(checkout, tmp_path):
    tasks, _ = load_suite(checkout)
    work = plan(tasks, REFERENCE, ResultStore(tmp_path / "r.jsonl"), "cpu")
    assert not work.to_judge and "TritonBench-T ships no Triton reference" in work.not_run[0].reason


@pytest.mark.slow
@pytest.mark.parametrize("candidate,stage,reason", [
    ("shifted_tanh.py", "passed", ""),
    ("wrong.py", "correctness", "outside tolerance"),
    ("torch_only.py", "correctness", "never launched"),
])
def test_judged(checkout, candidate, stage, reason):
    (task,), _ = load_suite(checkout)
    verdict = judge_on_cpu(task, checkout / "candidates" / candidate, seeds=2, **QUICK_PERF)
    assert verdict.stage == stage, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert reason in verdict.reason
    if stage == "passed":
        # the test calls the operator twice: seed 1 twice (rerun check) + seed 2 once
        assert verdict.kernels["shifted_tanh_kernel"] >= 6
        assert verdict.speedup is not None and [c.kind for c in verdict.cases].count("performance") == 1


def test_judge_suite_cli(checkout, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelwright", "judge-suite", "--suite", "tritonbench-t",
                           "--path", str(checkout), "--candidates", str(checkout / "candidates"), "--device", "cpu",
                           "--no-perf", "--json", "--out", str(tmp_path / "t.jsonl")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [(r["task"], r["verdict"]["stage"]) for r in report["results"]] == [("shifted_tanh", "passed")]
    assert report["unreadable_files"][0][0] == "no_test.py"


def test_test_section_that_redefines_the_operator_does_not_replace_the_candidate(tmp_path):
    """thunlp's relu_sqrt.py redefines the operator in PyTorch after the separator: executed in the
    candidate's module, it replaced the candidate's function and every correct candidate failed."""
    root = tmp_path / "TritonBench"
    data = root / DATA_DIR
    data.mkdir(parents=True)
    shadowing_test = TEST.replace("def test_shifted_tanh", OPERATOR.split("import torch", 1)[1] + "\n\ndef test_shifted_tanh")
    (data / "shifted_tanh.py").write_text(OPERATOR + SEPARATOR + shadowing_test)
    (tmp_path / "good.py").write_text(CANDIDATE.replace("SHIFT", "shift"))
    (task,), _ = load_suite(root)
    verdict = judge_on_cpu(task, tmp_path / "good.py", seeds=1, perf=False)
    assert verdict.stage == "passed", f"{verdict.stage}: {verdict.reason}"
    assert verdict.kernels.get("shifted_tanh_kernel", 0) >= 2
