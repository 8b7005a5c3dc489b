"""The GEAK-eval adapters read every file of a checkout: 184 TritonBench-revised tasks and 31 ROCm
files. A file that does not become a task must come with a reason (nothing is dropped silently)."""

import os

import pytest
import torch

from kernelwright.suites.geak import load_suite
from kernelwright.suites.geak_source import portable_libdevice, rocm_files, split_source, tritonbench_files
from kernelwright.judge.coordinator.static import check_source
from kernelwright.tasks import load_task_ref

from .conftest import GEAK_EVAL

needs_data = pytest.mark.skipif(not (GEAK_EVAL / "geak_eval").is_dir(), reason="GEAK-eval data not present")


@needs_data
@pytest.mark.parametrize("suite,count,files", [("tritonbench-revised", 184, tritonbench_files),
                                               ("rocm", 31, rocm_files)])
def test_every_file_is_a_task_or_has_a_reason(suite, count, files):
    tasks, problems = load_suite(suite, GEAK_EVAL)
    assert len(files(GEAK_EVAL.resolve())) == count
    assert len(tasks) + len(problems) == count
    assert all(reason for _, reason in problems)
    names = {t.name for t in tasks}
    assert len(names) == len(tasks)
    # --tasks is checked against the file names before the suite loads: every task is among them
    from kernelwright.suites.runner import suite_task_names
    assert names <= set(suite_task_names(suite, GEAK_EVAL)) and len(suite_task_names(suite, GEAK_EVAL)) == count
    for task in tasks:
        assert task.instruction and task.visible_cases
        assert task.reference_impl is not None and task.reference_impl.is_file()
        assert task.ref.startswith(f"{suite}:")
        # the suite's own reference passes the static stage (a comma-joined kernel list once did not)
        assert check_source(task.reference_impl, task.entry_point.name).ok, task.name
    if suite == "tritonbench-revised":
        assert not problems
        assert sum(1 for t in tasks if t.perf_cases) >= 175  # perf inputs found for (almost) all
        for task in tasks:  # tasks without perf inputs say why
            assert task.perf_cases or task.notes


@needs_data
def test_task_reloads_from_its_ref():
    tasks, _ = load_suite("tritonbench-revised", GEAK_EVAL)
    task = next(t for t in tasks if t.name == "add_value")
    again = load_task_ref(task.ref)
    assert again.name == "add_value" and len(again.perf_cases) == len(task.perf_cases) == 16
    assert again.entry_point.name == "puzzle1"


def test_split_and_portable_libdevice():
    kernel, test = split_source("a = 1\n" + "#" * 146 + "  \ndef test_x():\n    return {}\n")
    assert kernel == "a = 1\n" and "def test_x" in test
    assert split_source("no separator")[1] is None
    src = ("import triton.language.extra.cuda.libdevice as ld\nfrom triton.language.extra.hip import libdevice\n"
           "from triton.language.extra.hip.libdevice import isinf, isnan\n"
           "y = tl.extra.hip.libdevice.exp(x)\nz = tl.extra.cuda.libdevice.pow(x, 2)\n")
    out = portable_libdevice(src)
    assert "cuda" not in out and "hip" not in out
    assert "tl.extra.libdevice.exp" in out and "from triton.language.extra import libdevice" in out
    assert "from triton.language.extra.libdevice import isinf, isnan" in out


def test_rocm_test_modules_run_in_a_throwaway_process(tmp_path, monkeypatch):
    """Enumerating a ROCm file's parametrizations executes its top level (which may initialise
    CUDA): that must happen in a forked process, or a judge worker could not fork children."""
    from kernelwright.suites.geak_rocm import rocm_task
    from kernelwright.suites.geak_source import ROCM_DIR, ROCM_JSON

    folder = tmp_path / ROCM_DIR
    folder.mkdir(parents=True)
    (tmp_path / ROCM_JSON).write_text("[]")
    kernel = ("import os\nimport torch\nimport triton\nimport triton.language as tl\n"
              "os.environ['KW_TOP_LEVEL_RAN'] = '1'\n\n@triton.jit\ndef thing_kernel(x_ptr):\n    pass\n")
    tests = ("import pytest\nSIZES = [(2 ** i, i) for i in range(3)]\n\n"
             "@pytest.mark.parametrize('n, k', SIZES)\n@pytest.mark.parametrize('dtype', [torch.float16, torch.float32])\n"
             "def test_thing(n, k, dtype):\n    pass\n")
    (folder / "thing.py").write_text(kernel + "#" * 146 + "\n" + tests)
    monkeypatch.delenv("KW_TOP_LEVEL_RAN", raising=False)
    task = rocm_task(tmp_path, "thing")
    assert "KW_TOP_LEVEL_RAN" not in os.environ
    assert not task.notes, task.notes  # enumerated by running (the list comprehension), not by reading
    labels = [c.label for c in task.visible_cases]
    assert len(labels) == 6 and "test_thing[4-2-torch.float32]" in labels, labels
    args = dict(task.visible_cases[0].args)
    assert isinstance(args["dtype"], torch.dtype) and isinstance(args["n"], int)


ROCM_ADD = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)
''' + "#" * 146 + '''
import pytest

result_gold = {}


@pytest.mark.parametrize("n", [100, 7, 300])
def test_add(n, request):
    if n == 7:
        pytest.skip("odd sizes are not supported")
    x = torch.randn(n)
    y = torch.randn(n)
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
    result_gold[request.node.name] = out.clone()
'''


@pytest.mark.slow
def test_inputs_a_rocm_test_skips_are_recorded_as_skipped_not_failed(tmp_path, monkeypatch):
    from kernelwright.suites import geak_rocm
    from kernelwright.suites.geak_rocm import rocm_task
    from kernelwright.suites.geak_source import ROCM_DIR, ROCM_JSON

    from .conftest import judge_on_cpu

    folder = tmp_path / ROCM_DIR
    folder.mkdir(parents=True)
    (tmp_path / ROCM_JSON).write_text("[]")
    (folder / "add.py").write_text(ROCM_ADD)
    task = rocm_task(tmp_path, "add")
    # the enumeration is cached by content: a process that cannot fork an enumerator (a judge
    # child with CUDA initialised) reads the same cases
    monkeypatch.setattr(geak_rocm, "_run_enumerator", lambda *a: (_ for _ in ()).throw(RuntimeError("no fork")))
    again = rocm_task(tmp_path, "add")
    assert [c.label for c in again.visible_cases] == [c.label for c in task.visible_cases]
    assert not again.notes

    verdict = judge_on_cpu(task, folder / "add.py", seeds=2, perf=False)
    assert verdict.passed, verdict.reason
    skipped = [c for c in verdict.cases if c.ok is None]
    assert [c.label for c in skipped] == ["test_add[7]"] and "odd sizes" in skipped[0].reason
    assert sum(1 for c in verdict.cases if c.ok) == 2


def test_kernels_defined_in_a_test_section_compile_from_the_executed_text(tmp_path):
    """GEAK's ROCm layernorm/rmsnorm_bwd define @triton.jit kernels below the separator: Triton
    reads a kernel's source through inspect, so the executed text must be findable by its name."""
    import inspect

    from kernelwright.suites.adapter import exec_source

    namespace: dict = {}
    exec_source("import triton\n\n@triton.jit\ndef helper_kernel(x_ptr):\n    pass\n", "<thing test code>", namespace)
    assert "def helper_kernel" in namespace["helper_kernel"].src
    # for a real file, the rewritten text (portable libdevice) is what Triton sees, not the disk
    path = tmp_path / "golden.py"
    path.write_text("def f():\n    return 'on disk'\n")
    exec_source("def f():\n    return 'rewritten'\n", str(path), namespace)
    assert "rewritten" in inspect.getsource(namespace["f"])


def test_a_rocm_perf_op_that_returns_a_launch_handle_is_checked_on_the_tensors_it_writes():
    from kernelwright.suites.geak_rocm import _with_outputs

    x, out = torch.ones(4), torch.zeros(4)
    kernel_args = [x, out, 4]
    op = lambda: (kernel_args[1].copy_(kernel_args[0] * 2), object())[1]  # noqa: E731 - like GEAK's op_lambda
    outputs = _with_outputs(op)()
    assert len(outputs) == 2 and torch.equal(outputs[1], torch.full((4,), 2.0))
    assert torch.equal(_with_outputs(lambda: x + 1)(), x + 1)  # a returned tensor is used as it is
