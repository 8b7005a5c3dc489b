"""Issue 29 item 10: GEAK's ROCm suite on a CPU-only machine lists all 31 files as tasks. Where a
file cannot be run to enumerate its parametrizations (gemm.py calls the GPU driver at module
level, test_gemm_no_scf.py asks for a CUDA capability), they are read from the decorators' source
by `static_values`, which follows comprehensions, itertools and the module's own helpers without
running any of it; test_randn.py needs scipy (the `rocm` extra) and says so when it is missing."""

import ast
import importlib.util
import json

import pytest

from kernelwright.cli import app
from kernelwright.suites import geak_rocm
from kernelwright.suites.geak_source import ROCM_DIR, rocm_files, split_source
from kernelwright.suites.static_values import NotStatic, StaticValues

from .conftest import GEAK_EVAL

pytestmark = pytest.mark.skipif(not (GEAK_EVAL / "geak_eval").is_dir(), reason="GEAK-eval data not present")
HAS_SCIPY = importlib.util.find_spec("scipy") is not None


@pytest.fixture
def runner():
    """typer's CliRunner with stderr apart (as tests/unit/conftest.py's)."""
    import inspect

    from typer.testing import CliRunner

    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)
    return CliRunner()


def test_tasks_lists_all_31_rocm_tasks_on_the_cpu(runner):
    result = runner.invoke(app, ["tasks", "--suite", "rocm", "--path", str(GEAK_EVAL), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["errors"] == [] and len(data["tasks"]) == 31
    names = {t["name"] for t in data["tasks"]}
    assert {"gemm", "test_gemm_no_scf", "test_randn"} <= names
    unsupported = {t["name"]: t["unsupported"] for t in data["tasks"] if t["unsupported"]}
    if HAS_SCIPY:  # `pip install -e ".[rocm]"`
        assert "test_randn" not in unsupported
    else:  # listed all the same, saying what it needs and how to install it
        assert "scipy" in unsupported["test_randn"] and "pip install -e '.[rocm]'" in unsupported["test_randn"]
        table = runner.invoke(app, ["tasks", "--suite", "rocm", "--path", str(GEAK_EVAL)])
        assert "test_randn: needs the Python module(s) scipy" in " ".join(table.stderr.split())


def _read(stem: str):
    kernel, test = split_source((GEAK_EVAL / ROCM_DIR / f"{stem}.py").read_text())
    tree = ast.parse(test)
    values = StaticValues()
    values.module_env(ast.parse(kernel))
    values.module_env(tree)
    tests = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]
    return kernel, test, values, tests


def test_the_static_reader_agrees_with_pytests_own_marks():
    """Every file that can be run here to read pytest's marks: the decorators' source, evaluated
    statically, gives the same parametrizations in the same order (so a case has one label on a
    GPU machine, which runs the file, and on a CPU, which reads it), or is refused (NotStatic:
    test_chained_dot_fp8's perf configs depend on the torch build). Never a different answer."""
    compared, refused = 0, []
    for path in rocm_files(GEAK_EVAL.resolve()):
        kernel, test, values, tests = _read(path.stem)
        try:
            by_running = geak_rocm._parametrizations_by_running(path, kernel, test)
        except Exception:  # noqa: BLE001 - cannot run here (a GPU call, a missing module)
            continue
        for fn in tests:
            if fn.name not in by_running:
                continue
            try:
                static = geak_rocm._parametrizations(fn, values)
            except NotStatic:
                refused.append(f"{path.stem}.{fn.name}")
                continue
            assert static == by_running[fn.name], (path.name, fn.name)
            compared += 1
    # 79 test functions run without the optional modules (one more where scipy is installed, the
    # `rocm` extra); fewer means the reader or the running of files broke, not the environment
    assert compared >= 79 and refused == ["test_chained_dot_fp8.test_performance"], (compared, refused)


def test_the_files_that_cannot_run_here_are_read_from_their_source():
    expected = {"gemm": {"test_correctness": 11 * 11 * 4, "test_performance": 11 * 3},
                "test_gemm_no_scf": {"test_gemm_no_scf": 32, "test_performance": 20},
                "test_randn": {"test_rand": 16, "test_performance": 13 * 2 * 2 * 2}}
    for stem, counts in expected.items():
        _, _, values, tests = _read(stem)
        got = {fn.name: len(geak_rocm._parametrizations(fn, values)) for fn in tests if fn.name in counts}
        assert got == counts, stem
    _, _, values, tests = _read("gemm")
    first = geak_rocm._parametrizations(next(fn for fn in tests if fn.name == "test_correctness"), values)[0]
    assert first == {"M": 1024, "N": 1024, "K": 1024, "in_dtype_a": "fp16", "in_dtype_b": "fp16",
                     "out_dtype": "fp16", "col_a": True, "col_b": True}
