"""The KernelBench adapter end to end under the interpreter, on a miniature checkout laid out like
ScalingIntelligence/KernelBench (KernelBench/levelN/<N>_<Name>.py with Model, get_inputs,
get_init_inputs): a correct ModelNew passes, wrong / torch-only ones fail, nothing is dropped."""

import json
import subprocess
import sys

import pytest

from kernelwright.suites.kernelbench import load_suite, task_name
from kernelwright.suites.runner import REFERENCE, ResultStore, candidate_for, plan, suite_task_names
from kernelwright.tasks import load_task_ref

from .conftest import QUICK_PERF, judge_on_cpu

# A made-up level-2 style problem: a linear layer (random weights: both sides must build them
# under the same seed) followed by a scaled ReLU.
REFERENCE_FILE = '''
import torch
import torch.nn as nn

batch_size = 4
in_features = 8
out_features = 16
scale = 0.5


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.relu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
'''

CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scaled_relu_kernel(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = self.linear(x).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        scaled_relu_kernel[(triton.cdiv(n, 64),)](y, out, n, SCALE, BLOCK=64)
        return out
'''
TORCH_ONLY = CANDIDATE.replace(
    "        scaled_relu_kernel[(triton.cdiv(n, 64),)](y, out, n, SCALE, BLOCK=64)\n        return out",
    "        return torch.relu(y) * self.scale")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = tmp_path_factory.mktemp("KernelBench-repo")
    level2 = root / "KernelBench" / "level2"
    level2.mkdir(parents=True)
    (level2 / "7_Linear_ScaledReLU.py").write_text(REFERENCE_FILE)
    (level2 / "8_Broken.py").write_text("import torch\n\nclass Model:\n    pass\n")  # no get_inputs
    cands = root / "candidates"
    cands.mkdir()
    (cands / "L2_7_Linear_ScaledReLU.py").write_text(CANDIDATE.replace("SCALE", "self.scale"))
    (cands / "wrong.py").write_text(CANDIDATE.replace("SCALE", "self.scale * 1.5"))
    (cands / "torch_only.py").write_text(TORCH_ONLY.replace("SCALE", "self.scale"))
    (cands / "no_model_new.py").write_text(CANDIDATE.replace("class ModelNew", "class Other"))
    return root


def test_loads_names_instruction_cases_and_reports_bad_files(checkout):
    assert task_name("level1/19_ReLU.py") == "L1_19_ReLU"
    assert task_name("level3/5_Net-v2.py") == "L3_5_Net_v2"
    tasks, problems = load_suite(checkout / "KernelBench" / "level2")  # any folder inside works
    assert [t.name for t in tasks] == ["L2_7_Linear_ScaledReLU"]
    assert suite_task_names("kernelbench", checkout) == ["L2_7_Linear_ScaledReLU", "L2_8_Broken"]  # files, unread
    assert problems == [("level2/8_Broken.py", "SuiteError: 8_Broken.py does not define get_inputs, get_init_inputs")]
    task = tasks[0]
    assert "Write `ModelNew`" in task.instruction and "Triton kernels" in task.instruction
    assert "def get_init_inputs" in task.instruction  # the reference source is shown, as KernelBench does
    assert task.entry_point.name == "ModelNew"
    assert len(task.visible_cases) == 1 and len(task.perf_cases) == 1
    assert task.tolerance_for("float32").atol == task.tolerance_for("float16").rtol == 1e-2
    again = load_task_ref(task.ref)
    assert again.name == task.name and again.reference_impl == task.reference_impl


def test_reference_run_reports_no_triton_reference(checkout, tmp_path):
    (task,), _ = load_suite(checkout)
    assert candidate_for(task, REFERENCE) is None
    work = plan([task], REFERENCE, ResultStore(tmp_path / "r.jsonl"), "cpu")
    assert not work.to_judge
    assert work.not_run[0].status == "missing" and "KernelBench ships no Triton reference" in work.not_run[0].reason


@pytest.mark.slow
@pytest.mark.parametrize("candidate,stage,reason", [
    ("L2_7_Linear_ScaledReLU.py", "passed", ""),
    ("wrong.py", "correctness", "outside tolerance"),
    ("torch_only.py", "correctness", "never launched"),
    ("no_model_new.py", "static", "does not define the entry point `ModelNew`"),
])
def test_judged(checkout, candidate, stage, reason):
    (task,), _ = load_suite(checkout)
    verdict = judge_on_cpu(task, checkout / "candidates" / candidate, seeds=2, **QUICK_PERF)
    assert verdict.stage == stage, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert reason in verdict.reason
    if stage == "passed":
        # seed 1 twice (the rerun check), seed 2 once; passing at all means both sides built the same weights
        assert verdict.kernels["scaled_relu_kernel"] >= 3
        assert verdict.speedup is not None and [c.kind for c in verdict.cases].count("performance") == 1


@pytest.mark.slow
def test_judge_suite_cli_end_to_end(checkout, tmp_path):
    cands = tmp_path / "cands"
    cands.mkdir()  # holds no file for the task: reported as missing, with the reason
    out = tmp_path / "run.jsonl"
    args = [sys.executable, "-m", "kernelwright", "judge-suite", "--suite", "kernelbench", "--path", str(checkout),
            "--device", "cpu", "--no-perf", "--json"]
    proc = subprocess.run([*args, "--candidates", str(checkout / "candidates"), "--out", str(out),
                           "--tasks", "L2_7_Linear_ScaledReLU"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (result,) = report["results"]
    assert result["task"] == "L2_7_Linear_ScaledReLU" and result["verdict"]["stage"] == "passed"
    assert report["unreadable_files"] == [["level2/8_Broken.py",
                                           "SuiteError: 8_Broken.py does not define get_inputs, get_init_inputs"]]
    missing = subprocess.run([*args, "--candidates", str(cands), "--out", str(tmp_path / "m.jsonl")],
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 0, missing.stderr
    (record,) = json.loads(missing.stdout)["results"]
    assert record["status"] == "missing" and f"no L2_7_Linear_ScaledReLU.py in {cands}" == record["reason"]


def test_problem_files_are_chosen_like_kernelbench(tmp_path):
    """The real repository keeps superseded `<N>_..._OLD.py` files next to the fixed ones and
    non-problem files (`level9/*_reference.py`) in level folders: neither becomes a task, and
    both are reported with the reason."""
    level = tmp_path / "KernelBench" / "level3"
    level.mkdir(parents=True)
    (level / "7_Linear_ScaledReLU.py").write_text(REFERENCE_FILE)
    (level / "7_Linear_ScaledReLU_OLD.py").write_text(REFERENCE_FILE)
    (level / "9_Only_OLD.py").write_text(REFERENCE_FILE)  # no fixed version: still a problem
    (level / "rotary_reference.py").write_text(REFERENCE_FILE)
    tasks, problems = load_suite(tmp_path)
    assert [t.name for t in tasks] == ["L3_7_Linear_ScaledReLU", "L3_9_Only_OLD"]
    # the names --tasks is checked with before anything loads: the same problem files
    assert suite_task_names("kernelbench", tmp_path) == ["L3_7_Linear_ScaledReLU", "L3_9_Only_OLD"]
    assert dict(problems) == {
        "level3/7_Linear_ScaledReLU_OLD.py": "superseded by the fixed problem 7 in level3",
        "level3/rotary_reference.py": "not a problem file: its name does not start with the problem number",
    }
