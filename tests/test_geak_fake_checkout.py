"""The TritonBench-revised adapter end to end under the interpreter, on a miniature checkout laid
out like GEAK-eval's (golden file + separator + test function, instruction JSON, perf script that
imports GEAK-eval's helper module): references pass with a measured speedup, bad candidates fail."""

import json

import torch

import pytest

from kernelwright.suites.geak import load_suite
from kernelwright.suites.geak_source import TRITONBENCH_DIR, TRITONBENCH_JSON, TRITONBENCH_PERF_DIR

from .conftest import QUICK_PERF, judge_on_cpu

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def puzzle1_kernel(x_ptr, output_ptr, N, BLOCK_SIZE: tl.constexpr, value):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < N
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + value, mask=mask)


def puzzle1(x: torch.Tensor):
    output = torch.empty_like(x)
    N = output.numel()
    puzzle1_kernel[(triton.cdiv(N, 1024),)](x, output, N, BLOCK_SIZE=1024, value=VALUE)
    return output
'''
TEST = '''
import torch

def test_puzzle():
    results = {}
    results['test_case_1'] = puzzle1(torch.randn(1000))
    results['test_case_2'] = puzzle1(torch.rand(37) * 100)
    return results

result_gold = test_puzzle()
'''
PERF = '''
import sys
import os
sys.path.append(os.path.abspath(os.path.join(os.path.dirname(__file__), '..')))
from add_value import puzzle1
from geak_eval.perf.performance_utils import Performance_Metrics, do_bench_config
import torch
from geak_eval.data.TritonBench.data.TritonBench_G_v1.add_value import puzzle1 as puzzle1_ref

class performance_metrics(Performance_Metrics):
    def __init__(self, dtype=None, is_backward=False, **kwargs):
        super().__init__('add_value', dtype=dtype, is_backward=is_backward, **kwargs)

    def get_input_tensors(self):
        self.input_tensors = [torch.rand(2 ** i, dtype=torch.float32) for i in (10, 13)]

    def to_cuda(self, input_tensor):
        return input_tensor  # the interpreter runs on the CPU

    def call_op(self, input_tensor):
        return puzzle1(input_tensor)

    def call_op_ref(self, input_tensor):
        return puzzle1_ref(input_tensor)

if __name__ == '__main__':
    raise SystemExit("never run by the judge")
'''


def write_checkout(root, stem: str, golden: str, instruction: str, perf: str | None = None, **entry):
    """A one-task GEAK-eval layout under `root`: golden file, instruction JSON, optional perf script."""
    data = root / TRITONBENCH_DIR
    data.mkdir(parents=True)
    (data / f"{stem}.py").write_text(golden)
    (root / TRITONBENCH_JSON).write_text(json.dumps([{"instruction": instruction, "file": f"{stem}.py", **entry}]))
    if perf is not None:
        (root / TRITONBENCH_PERF_DIR).mkdir(parents=True)
        (root / TRITONBENCH_PERF_DIR / f"{stem}_perf.py").write_text(perf)
    return root


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    root = write_checkout(tmp_path_factory.mktemp("GEAK-eval"), "add_value",
                          KERNEL.replace("VALUE", "10") + "\n" + "#" * 146 + "\n" + TEST,
                          "Add 10 to every element.", PERF, difficulty="1")
    cands = root / "candidates"
    cands.mkdir()
    (cands / "good.py").write_text(KERNEL.replace("VALUE", "10"))
    (cands / "wrong.py").write_text(KERNEL.replace("VALUE", "11"))
    (cands / "torch_only.py").write_text(KERNEL.replace("VALUE", "10").replace(
        "    puzzle1_kernel[(triton.cdiv(N, 1024),)](x, output, N, BLOCK_SIZE=1024, value=10)\n    return output",
        "    return x + 10"))
    (cands / "with_own_test.py").write_text(  # candidates may carry their own test: it is replaced
        KERNEL.replace("VALUE", "10") + "#" * 146 + "\ndef test_puzzle():\n    return {'x': torch.zeros(1)}\n")
    return root


def test_suite_loads_with_perf_inputs(checkout):
    tasks, problems = load_suite("tritonbench-revised", checkout)
    assert not problems and len(tasks) == 1
    task = tasks[0]
    assert task.entry_point.name == "puzzle1" and task.instruction == "Add 10 to every element."
    assert [c.label for c in task.perf_cases] == ["input 0: 1024 float32", "input 1: 8192 float32"]


@pytest.mark.slow
# timed with QUICK_PERF: on a loaded machine an honest candidate failed timing_mismatch beside another test
@pytest.mark.serial
@pytest.mark.parametrize("candidate,stage,reason", [
    (None, "passed", ""),
    ("good.py", "passed", ""),
    ("with_own_test.py", "passed", ""),
    ("wrong.py", "call", "outside tolerance"),
    ("torch_only.py", "correctness", "never launched"),
])
def test_judged_like_geak_but_stricter(checkout, candidate, stage, reason):
    (task,), _ = load_suite("tritonbench-revised", checkout)
    path = task.reference_impl if candidate is None else checkout / "candidates" / candidate
    verdict = judge_on_cpu(task, path, seeds=2, **QUICK_PERF)
    if stage == "call":  # a wrong value fails on the very first case: the correctness check of it
        stage = "correctness"
    assert verdict.stage == stage, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert reason in verdict.reason
    if stage == "passed":
        assert verdict.speedup is not None and len([c for c in verdict.cases if c.kind == "performance"]) == 2


HALF = KERNEL.replace("mask = offsets < N", "mask = offsets < N // 2")  # leaves half the output unwritten


@pytest.fixture(scope="module")
def half_checkout(tmp_path_factory):
    """A golden that writes only the first half of its torch.empty output: GEAK-eval passes it
    because fresh memory tends to be zero; the judge must neither fail it nor compare garbage."""
    root = write_checkout(tmp_path_factory.mktemp("GEAK-eval-half"), "add_value",
                          HALF.replace("VALUE", "10") + "\n" + "#" * 146 + "\n" + TEST, "Add 10.", PERF)
    cands = root / "candidates"
    cands.mkdir()
    (cands / "full.py").write_text(KERNEL.replace("VALUE", "10"))           # writes everything: fine
    (cands / "wrong_half.py").write_text(HALF.replace("VALUE", "11"))       # wrong where defined
    return root


@pytest.mark.slow
@pytest.mark.parametrize("candidate,stage", [(None, "passed"), ("full.py", "passed"),
                                             ("wrong_half.py", "correctness")])
def test_reference_with_unwritten_outputs(half_checkout, candidate, stage):
    (task,), _ = load_suite("tritonbench-revised", half_checkout)
    path = task.reference_impl if candidate is None else half_checkout / "candidates" / candidate
    verdict = judge_on_cpu(task, path, seeds=2, **dict(QUICK_PERF, perf_blocks=2))
    assert verdict.stage == stage, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    if stage == "correctness":  # a mismatch next to positions the reference left undefined says so
        assert "the reference's own runs differed at" in verdict.reason, verdict.reason
    if stage == "passed":
        assert any("uninitialised memory" in flag for flag in verdict.flags), verdict.flags
        assert verdict.speedup is not None
    if candidate is None:
        # at perf size the poisoned candidate side holds NaN where the golden wrote nothing: the
        # first comparison fails, the reference is then probed, and the case passes on the rest
        assert any("of perf case" in flag for flag in verdict.flags), verdict.flags


def judge_one_file_checkout(tmp_path, golden_file: str, candidate: str, seeds: int = 2):
    """Judge `candidate` (kernel code) against a one-task checkout whose golden file is `golden_file`."""
    root = write_checkout(tmp_path / "GEAK-eval", "add_value", golden_file, "Add 10.")
    (tmp_path / "candidate.py").write_text(candidate)
    (task,), _ = load_suite("tritonbench-revised", root)
    return judge_on_cpu(task, tmp_path / "candidate.py", seeds=seeds, perf=False)


SEPARATOR = "\n" + "#" * 146 + "\n"
# Both goldens leave half their output unwritten, like HALF: a full candidate disagrees there at the
# first comparison, and only then is the golden probed on poisoned memory.
STICKY = HALF.replace("def puzzle1(x: torch.Tensor):\n", '''_broken = []


def puzzle1(x: torch.Tensor):
    # Like a GPU fault: once it has read poisoned scratch memory, every later call fails too.
    if _broken:
        raise RuntimeError("sticky error: the context is broken")
    scratch = torch.empty(64)
    if torch.isnan(scratch).all():
        _broken.append(True)
        raise RuntimeError("read poisoned memory")
''')


LEFTOVER = HALF.replace("def puzzle1(x: torch.Tensor):\n", '''_calls, _poisoned_at = [], []


def puzzle1(x: torch.Tensor):
    # Like a golden that reads memory a probe left poisoned: the probe's runs succeed (the test
    # calls this twice on NaN-poisoned memory, then twice on zeroed memory), the next call fails.
    _calls.append(1)
    if not _poisoned_at and torch.isnan(torch.empty(64)).all():
        _poisoned_at.append(len(_calls))
    if _poisoned_at and len(_calls) > _poisoned_at[0] + 3:
        raise RuntimeError("garbage index read from leftover memory")
''')


@pytest.mark.slow
@pytest.mark.parametrize("golden,why", [(STICKY, "read poisoned memory"), (LEFTOVER, "after a probe")],
                         ids=["breaks_on_poison", "fails_after_a_probe"])
def test_reference_broken_by_probes_fails_the_candidate_with_the_reason(tmp_path, golden, why):
    """When the probes break the golden (at once, or at its next clean call, when it is judged
    again in fresh processes without probes), the positions it leaves undefined cannot be set
    aside: a candidate that disagrees there fails, and the verdict says the reference was not
    probed and why. It is never a judge error or a crash."""
    verdict = judge_one_file_checkout(tmp_path, golden.replace("VALUE", "10") + SEPARATOR + TEST,
                                      KERNEL.replace("VALUE", "10"))
    assert verdict.stage == "correctness", f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    notes = [verdict.reason] + verdict.flags
    assert any("not probed" in note and why in note for note in notes), notes


@pytest.mark.slow
def test_test_section_that_redefines_the_kernel_does_not_replace_the_candidate(tmp_path):
    """quantize_kv_copy.py's test section redefines its kernel and wrapper: appended to a candidate
    (as GEAK-eval does), the golden code would run in the candidate's place."""
    golden = KERNEL.replace("VALUE", "10")
    verdict = judge_one_file_checkout(tmp_path, golden + SEPARATOR + golden + "\n" + TEST,
                                      KERNEL.replace("VALUE", "11"), seeds=1)
    assert verdict.stage == "correctness" and "outside tolerance" in verdict.reason, verdict.reason


OVERREAD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def scaled_kernel(x_ptr, scale_ptr, output_ptr, N, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < N
    # Like GEAK's attention_forward_triton: one scale per block, but the perf script passes a 0-dim
    # scale, so every block after the first reads memory past the end of it.
    scale = tl.load(scale_ptr + pid)
    tl.store(output_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * scale, mask=mask)


def scaled(x: torch.Tensor, scale: torch.Tensor):
    output = torch.empty_like(x)
    N = output.numel()
    scaled_kernel[(triton.cdiv(N, 256),)](x, scale, output, N, BLOCK_SIZE=256)
    return output
'''
OVERREAD_TEST = '''
import torch

def test_scaled():
    x = torch.randn(256)
    return {"test_case_1": scaled(x, torch.ones(1))}

result_gold = test_scaled()
'''
OVERREAD_PERF = PERF.replace("add_value", "scaled_op").replace("puzzle1", "scaled").replace(
    "self.input_tensors = [torch.rand(2 ** i, dtype=torch.float32) for i in (10, 13)]",
    "self.input_tensors = [(torch.rand(2 ** i), torch.tensor(1.0)) for i in (10, 13)]").replace(
    "return scaled(input_tensor)", "return scaled(*input_tensor)").replace(
    "return scaled_ref(input_tensor)", "return scaled_ref(*input_tensor)")


@pytest.mark.slow
def test_reference_reading_past_an_input_is_compared_where_defined(tmp_path):
    """A golden that reads past the end of an input at perf shapes computes from whatever lies
    next to that input: the probes surround inputs with poisoned guard zones, so those positions
    are found undefined and the reference judged against itself passes, with a flag saying so."""
    root = write_checkout(tmp_path / "GEAK-eval", "scaled_op", OVERREAD + SEPARATOR + OVERREAD_TEST, "Scale.",
                          OVERREAD_PERF)
    (task,), _ = load_suite("tritonbench-revised", root)
    verdict = judge_on_cpu(task, task.reference_impl, seeds=1, **dict(QUICK_PERF, perf_blocks=2))
    assert verdict.stage == "passed", f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    flags = [f for f in verdict.flags if " of perf case " in f]
    # Perf sizes are probed only when the first comparison fails, that is when the memory read
    # past the input differed between the two processes. Under the interpreter it is sometimes
    # the same in both (CI saw it once), and then there is nothing to set aside. When the probes
    # ran, they named the first perf case that needed them: of 2**10 or 2**13 elements, only the
    # first block's 256 values are defined.
    if flags:
        assert "memory outside its inputs" in flags[0], verdict.flags
        assert ("leaves 768 output value(s) of perf case input 0" in flags[0]
                or "leaves 7936 output value(s) of perf case input 1" in flags[0]), flags
    # a candidate wrong where the reference is defined still fails
    (tmp_path / "wrong.py").write_text(OVERREAD.replace("* scale, mask=mask)", "* scale + 1, mask=mask)"))
    wrong = judge_on_cpu(task, tmp_path / "wrong.py", seeds=1, **dict(QUICK_PERF, perf_blocks=2))
    assert wrong.stage == "correctness", f"{wrong.stage}: {wrong.reason}"


APPENDING_PERF = PERF.replace(
    "        self.input_tensors = [torch.rand(2 ** i, dtype=torch.float32) for i in (10, 13)]\n",
    "        self.input_tensors = []\n"
    "        for i in (10, 13):\n"
    "            self.input_tensors.append(torch.rand(2 ** i, dtype=torch.float32))\n")


@pytest.mark.slow
@pytest.mark.parametrize("perf, one_by_one", [(APPENDING_PERF, True), (PERF, False)])
def test_perf_inputs_are_built_per_case_where_the_script_allows(tmp_path, perf, one_by_one):
    """A script that appends one entry per case gets each case built alone (no CPU build of every
    shape per process); one that assigns its list at once is built its own way. Either way the
    reference and the candidate see the same inputs, and the golden passes against itself."""
    assert APPENDING_PERF != PERF
    root = write_checkout(tmp_path, "add_value", KERNEL.replace("VALUE", "10") + "\n" + "#" * 146 + "\n" + TEST,
                          "Add 10.", perf)
    (task,), _ = load_suite("tritonbench-revised", root)
    impl = task.load_implementation(str(task.reference_impl), "reference_probe")
    first, again = impl.perf_inputs(1, "cpu"), impl.perf_inputs(1, "cpu")
    assert first.shape == (8192,) and torch.equal(first, again) and first is not again
    assert (impl._eager is None) == one_by_one and impl._one_by_one == one_by_one
    verdict = judge_on_cpu(task, task.reference_impl, seeds=1, **QUICK_PERF)
    assert verdict.stage == "passed", f"{verdict.stage}: {verdict.reason}"


OVERREAD_INSIDE_TEST = '''
import torch

def test_scaled():
    x = torch.randn(1024)  # made inside the test function: no argument guards reach it
    return {"test_case_1": scaled(x, torch.ones(1))}

result_gold = test_scaled()
'''


@pytest.mark.slow
def test_reference_reading_past_a_tensor_its_test_made_is_compared_where_defined(tmp_path):
    """GEAK test functions build their inputs themselves; a golden reading past one of them
    computes from neighbouring memory. The probes place every tensor the call creates between
    poisoned zones, so those positions are found undefined and the golden passes against itself."""
    root = write_checkout(tmp_path / "GEAK-eval", "scaled_op", OVERREAD + SEPARATOR + OVERREAD_INSIDE_TEST, "Scale.")
    (task,), _ = load_suite("tritonbench-revised", root)
    verdict = judge_on_cpu(task, task.reference_impl, seeds=2, perf=False)
    assert verdict.stage == "passed", f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    # Test items are probed only when the first comparison fails: the memory read past the tensor
    # may hold the same bytes in both processes (CI saw it), and then nothing needs setting aside.
    # A candidate that differs from the golden exactly where the golden is undefined always needs
    # the probes, and passes with them.
    (tmp_path / "elsewhere.py").write_text(OVERREAD.replace(
        "scale = tl.load(scale_ptr + pid)", "scale = tl.where(pid == 0, tl.load(scale_ptr), 12345.0)"))
    elsewhere = judge_on_cpu(task, tmp_path / "elsewhere.py", seeds=2, perf=False)
    assert elsewhere.stage == "passed", f"{elsewhere.stage}: {elsewhere.reason}\n{elsewhere.detail}"
    flags = [f for f in elsewhere.flags if "golden test function" in f]
    # 1024 elements, 4 blocks: the first block's 256 values are defined, the other 768 are not
    assert flags and "leaves 768 output value(s)" in flags[0], elsewhere.flags


@pytest.mark.slow
def test_a_reference_that_hangs_is_reported_with_where_it_hung(tmp_path):
    """A golden whose test never returns (TritonBench's chunk_retention_ops compiles for minutes
    under Triton 3.6): the task is reported unrunnable, and the reason carries the stack."""
    hang = KERNEL.replace("    output = torch.empty_like(x)", "    while True:\n        pass")
    root = write_checkout(tmp_path / "GEAK-eval", "add_value", hang.replace("VALUE", "10") + "\n" + "#" * 146
                          + "\n" + TEST, "Add 10.")
    (task,), _ = load_suite("tritonbench-revised", root)
    verdict = judge_on_cpu(task, task.reference_impl, seeds=1, call_timeout=6, case_timeout=6, load_timeout=60)
    assert verdict.stage == "judge_error" and "timed out" in verdict.reason
    assert "in puzzle1" in verdict.detail + verdict.log_tail, verdict.detail


HARNESS_ONLY_PERF = PERF.replace("return puzzle1(input_tensor)", "return input_tensor + 10").replace(
    "return puzzle1_ref(input_tensor)", "return input_tensor + 10")


@pytest.mark.slow
def test_perf_cases_that_never_run_the_tasks_kernels_are_reported_not_timed(tmp_path):
    """ROCm's rmsnorm_bwd times only a forward kernel its test section defines: the task's own
    kernel never runs in its perf cases. Such a case says so and is not timed, instead of failing
    the candidate (even the reference) for "never launching its kernels"."""
    assert HARNESS_ONLY_PERF.count("input_tensor + 10") == 2
    root = write_checkout(tmp_path / "GEAK-eval", "add_value", KERNEL.replace("VALUE", "10") + SEPARATOR + TEST,
                          "Add 10.", HARNESS_ONLY_PERF)
    (task,), _ = load_suite("tritonbench-revised", root)
    verdict = judge_on_cpu(task, task.reference_impl, seeds=1, **QUICK_PERF)
    assert verdict.stage == "passed", f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    perf = [c for c in verdict.cases if c.kind == "performance"]
    assert len(perf) == 2 and all(c.ok is None and "never runs the task's own kernels" in c.reason for c in perf)
    assert verdict.speedup is None
    # the tests still require the candidate's own kernels
    (tmp_path / "torch_only.py").write_text(KERNEL.replace("VALUE", "10").replace(
        "    puzzle1_kernel[(triton.cdiv(N, 1024),)](x, output, N, BLOCK_SIZE=1024, value=10)\n    return output",
        "    return x + 10"))
    torch_only = judge_on_cpu(task, tmp_path / "torch_only.py", seeds=1, **QUICK_PERF)
    assert torch_only.stage == "correctness" and "never launched" in torch_only.reason
