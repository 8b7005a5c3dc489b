"""Task files: every malformed file is a TaskFileError naming the file and the problem; the Case
model; the public view; and how task names and paths are resolved."""

import json
import textwrap
from pathlib import Path

import pytest

from kernelwright.tasks import (Case, EntryPoint, Task, TaskFileError, TaskNotFound, Tolerance, load_task_file,
                                resolve_task)

BASE = {
    "header": "import torch\nfrom kernelwright.tasks import Case",
    "name": 'name = "my_task"',
    "instruction": 'instruction = "Add one to x."',
    "entry_point": 'entry_point = "add_one(x: torch.Tensor) -> torch.Tensor"',
    "make_inputs": "def make_inputs(case, gen):\n    return (torch.randn(case.shape, generator=gen),)",
    "reference": "def reference(x):\n    return x + 1",
    "visible_cases": "visible_cases = [Case(shape=[4])]",
}


def write_task(tmp_path: Path, drop=(), filename="task.py", **extra: str) -> Path:
    parts = {k: v for k, v in BASE.items() if k not in drop}
    parts.update(extra)
    path = tmp_path / filename
    path.write_text("\n".join(textwrap.dedent(v) for v in parts.values()) + "\n")
    return path


def load_error(path: Path) -> TaskFileError:
    with pytest.raises(TaskFileError) as info:
        load_task_file(path)
    err = info.value
    assert err.path == path.resolve()
    assert str(err).startswith(f"{path.resolve()}: ")  # the message names the file
    return err


def test_a_minimal_valid_task_loads(tmp_path):
    task = load_task_file(write_task(tmp_path))
    assert isinstance(task, Task)
    assert task.name == "my_task" and task.entry_point.name == "add_one"
    assert task.visible_cases == [Case(shape=[4])]
    assert task.hidden_cases == [] and task.perf_cases == [] and task.tolerances == {}
    assert task.cost is None and task.triton_reference is None and task.difficulty is None
    assert task.reference_in_float64 is True and task.deterministic is False and task.mutable_args == ()
    assert task.source_path == (tmp_path / "task.py").resolve()


def test_loading_is_cached_per_path(tmp_path):
    path = write_task(tmp_path)
    assert load_task_file(path) is load_task_file(str(path))


def test_optional_definitions_are_read(tmp_path):
    (tmp_path / "ref_kernel.py").write_text("# triton reference\n")
    path = write_task(
        tmp_path,
        hidden="hidden_cases = [Case(shape=[8])]",
        perf="perf_cases = (Case('float16', shape=[1024]),)",
        tol="tolerances = {'float16': (1e-2, 2e-2), 'float32': {'atol': 1e-6}}",
        cost="def cost(case):\n    return {'bytes': 8}",
        triton="triton_reference = 'ref_kernel.py'",
        misc="difficulty = 3\ntags = ['elementwise']\nmutable_args = [0]\ndeterministic = True\n"
             "reference_in_float64 = False",
    )
    task = load_task_file(path)
    assert task.hidden_cases == [Case(shape=[8])] and task.perf_cases == [Case("float16", shape=[1024])]
    assert task.tolerances == {"float16": Tolerance(1e-2, 2e-2), "float32": Tolerance(1e-6, 0.0)}
    assert task.tolerance_for("float16") == Tolerance(1e-2, 2e-2)
    assert task.tolerance_for("bfloat16") == Tolerance(8e-3, 1.6e-2)  # the default
    assert task.tolerance_for("int32") == Tolerance(0.0, 0.0)          # integers: exact
    assert task.cost(task.visible_cases[0]) == {"bytes": 8}
    assert task.triton_reference == (tmp_path / "ref_kernel.py").resolve()
    assert task.difficulty == 3 and task.tags == ("elementwise",) and task.mutable_args == (0,)
    assert task.deterministic is True and task.reference_in_float64 is False
    assert task.correctness_cases == [Case(shape=[4]), Case(shape=[8])]


def test_missing_file(tmp_path):
    err = load_error(tmp_path / "nope.py")
    assert err.problem == "no such file"


def test_a_directory_is_not_a_task_file(tmp_path):
    (tmp_path / "dir.py").mkdir()
    assert load_error(tmp_path / "dir.py").problem == "no such file"


def test_not_a_python_file(tmp_path):
    path = write_task(tmp_path, filename="task.txt")
    assert "must be a Python file ending in .py" in load_error(path).problem


def test_syntax_error_names_the_line(tmp_path):
    path = write_task(tmp_path, broken="def oops(:\n    pass")
    err = load_error(path)
    line = path.read_text().splitlines().index("def oops(:") + 1
    assert err.problem.startswith(f"syntax error at line {line}:")


def test_exception_at_import_is_reported(tmp_path):
    path = write_task(tmp_path, broken="raise RuntimeError('cannot build the task')")
    err = load_error(path)
    assert err.problem == "raised while importing: RuntimeError: cannot build the task"


def test_missing_required_definitions_are_listed(tmp_path):
    err = load_error(write_task(tmp_path, drop=("instruction", "reference")))
    assert err.problem == "missing required definition(s): instruction, reference; see docs/tasks.md"


def test_missing_required_definition_with_did_you_mean_hint(tmp_path):
    path = write_task(tmp_path, drop=("visible_cases",), typo="visible_case = [Case(shape=[4])]")
    err = load_error(path)
    assert "missing required definition(s): visible_cases (did you mean 'visible_case'?)" in err.problem


@pytest.mark.parametrize("typo,meant", [("hiden_cases", "hidden_cases"), ("perf_case", "perf_cases"),
                                        ("tolerance", "tolerances"), ("mutable_arg", "mutable_args")])
def test_typo_of_an_optional_name_is_rejected_with_a_hint(tmp_path, typo, meant):
    path = write_task(tmp_path, typo=f"{typo} = []")
    err = load_error(path)
    assert err.problem == f"unknown definition {typo!r}; did you mean {meant!r}?"


def test_unrelated_helpers_and_private_names_are_allowed(tmp_path):
    path = write_task(tmp_path, helpers="import math\n_visible = 1\nSIZES = [1, 2]\ndef helper():\n    pass")
    assert load_task_file(path).name == "my_task"


@pytest.mark.parametrize("attr,value", [
    ("visible_cases", "[{'shape': [4]}]"),
    ("visible_cases", "Case(shape=[4])"),
    ("hidden_cases", "[Case(shape=[4]), 3]"),
    ("perf_cases", "'Case'"),
    ("perf_cases", "None"),
])
def test_case_lists_must_hold_cases(tmp_path, attr, value):
    err = load_error(write_task(tmp_path, **{attr: f"{attr} = {value}"}))
    assert err.problem == f"{attr} must be a list of kernelwright.tasks.Case"


def test_visible_cases_must_not_be_empty(tmp_path):
    err = load_error(write_task(tmp_path, visible_cases="visible_cases = []"))
    assert err.problem == "visible_cases must hold at least one case"


@pytest.mark.parametrize("value,problem", [
    ("{'float33': (1e-3, 1e-3)}", "tolerances: unknown dtype 'float33'"),
    ("{'float32': (-1e-3, 1e-3)}", "tolerances['float32'] must be finite and non-negative"),
    ("{'float32': {'atol': 1e-3, 'rtol': -1}}", "tolerances['float32'] must be finite and non-negative"),
    ("{'float32': (1e-3,)}", "tolerances['float32'] must be (atol, rtol)"),
    ("{'float32': (1e-3, 1e-3, 1e-3)}", "tolerances['float32'] must be (atol, rtol)"),
    ("{'float32': 1e-3}", "tolerances['float32'] must be (atol, rtol)"),
    ("{'float32': ('a', 'b')}", "tolerances['float32'] must be (atol, rtol)"),
])
def test_bad_tolerances(tmp_path, value, problem):
    err = load_error(write_task(tmp_path, tol=f"tolerances = {value}"))
    assert err.problem.startswith(problem)


def test_nan_tolerance_is_rejected(tmp_path):
    err = load_error(write_task(tmp_path, tol="tolerances = {'float32': (float('nan'), 1e-3)}"))
    assert err.problem == "tolerances['float32'] must be finite and non-negative"


def test_tolerances_not_a_mapping(tmp_path):
    err = load_error(write_task(tmp_path, tol="tolerances = 5"))
    assert err.problem.startswith("tolerances must be a dict")


def test_cost_must_be_callable(tmp_path):
    err = load_error(write_task(tmp_path, cost="cost = {'flops': 1}"))
    assert err.problem.startswith("cost must be a function")


def test_missing_triton_reference(tmp_path):
    err = load_error(write_task(tmp_path, triton="triton_reference = 'kernels/ref.py'"))
    assert err.problem.startswith("triton_reference 'kernels/ref.py' does not exist")
    assert str((tmp_path / "kernels" / "ref.py").resolve()) in err.problem


@pytest.mark.parametrize("value", ["0", "6", "'3'", "2.5", "-1"])
def test_difficulty_out_of_range(tmp_path, value):
    err = load_error(write_task(tmp_path, misc=f"difficulty = {value}"))
    assert err.problem.startswith("difficulty must be an integer 1-5")


@pytest.mark.parametrize("value", ["[-1]", "['0']", "(0, 1.0)", "'01'"])
def test_bad_mutable_args(tmp_path, value):
    err = load_error(write_task(tmp_path, misc=f"mutable_args = {value}"))
    assert err.problem == "mutable_args must be a tuple of argument positions"


def test_mutable_args_not_a_sequence(tmp_path):
    err = load_error(write_task(tmp_path, misc="mutable_args = 2"))
    assert err.problem == "mutable_args must be a tuple of argument positions"


@pytest.mark.parametrize("value,problem", [
    ("'1add(x)'", "is not 'name(args) -> result'"),
    ("'add one(x)'", "is not 'name(args) -> result'"),
    ("''", "is not 'name(args) -> result'"),
    ("42", "entry_point must be a string"),
])
def test_bad_entry_point(tmp_path, value, problem):
    err = load_error(write_task(tmp_path, entry_point=f"entry_point = {value}"))
    assert problem in err.problem


@pytest.mark.parametrize("field,value,problem", [
    ("name", "name = 'my task'", "name must be an identifier-like string"),
    ("name", "name = 3", "name must be an identifier-like string"),
    ("instruction", "instruction = '   '", "instruction must be a non-empty string"),
    ("make_inputs", "make_inputs = [1]", "make_inputs must be a function"),
    ("reference", "reference = None", "reference must be a function"),
])
def test_bad_basic_fields(tmp_path, field, value, problem):
    err = load_error(write_task(tmp_path, **{field: value}))
    assert err.problem.startswith(problem)


def test_hyphenated_name_is_allowed(tmp_path):
    assert load_task_file(write_task(tmp_path, name="name = 'my-task'")).name == "my-task"


def test_failed_load_is_not_cached(tmp_path):
    path = write_task(tmp_path, drop=("reference",))
    load_error(path)
    write_task(tmp_path)
    assert load_task_file(path).name == "my_task"


# --- EntryPoint ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,name", [
    ("softmax(x: torch.Tensor) -> torch.Tensor", "softmax"),
    ("  rmsnorm(x, weight, eps=1e-6)  ", "rmsnorm"),
    ("f", "f"),
    ("g(a,\n  b) -> tuple", "g"),
])
def test_entry_point_parse(text, name):
    ep = EntryPoint.parse(text)
    assert ep.name == name and ep.signature == text.strip()


# --- Case ----------------------------------------------------------------------------------------

def test_case_attribute_access_and_get():
    case = Case("float16", shape=[2, 3], M=64, eps=1e-6)
    assert case.dtype == "float16" and case.shape == (2, 3) and case.M == 64 and case.eps == 1e-6
    assert case.get("M") == 64 and case.get("N") is None and case.get("N", 7) == 7
    with pytest.raises(AttributeError, match="has no parameter 'N'"):
        case.N


def test_case_is_immutable():
    case = Case(shape=[4])
    with pytest.raises(AttributeError, match="immutable"):
        case.shape = (5,)
    with pytest.raises(AttributeError, match="immutable"):
        case.dtype = "float16"
    assert case.shape == (4,) and case.dtype == "float32"


def test_case_unknown_dtype():
    with pytest.raises(ValueError, match="unknown dtype 'float128'"):
        Case("float128", shape=[1])


def test_case_torch_dtype():
    import torch

    assert Case("bfloat16", n=1).torch_dtype is torch.bfloat16


def test_case_labels():
    assert Case("float16", shape=[2, 3], eps=1e-06).label == "2x3 eps=1e-06 float16"
    assert Case(M=1, N=2).label == "M=1 N=2 float32"
    assert Case(shape=[8], label="tiny").label == "tiny"
    assert repr(Case(shape=[8], label="tiny")) == "Case(tiny)"


def test_case_to_dict_turns_tuples_into_lists():
    case = Case("int8", shape=[2, 3], blocks=[[1, 2], [3]], label="x")
    d = case.to_dict()
    assert d == {"label": "x", "dtype": "int8", "shape": [2, 3], "blocks": [[1, 2], [3]]}
    assert json.loads(json.dumps(d)) == d


def test_case_equality_and_hash():
    a = Case("float32", shape=[2, 3], M=4)
    b = Case("float32", shape=(2, 3), M=4, label="other label")
    assert a == b and hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != Case("float16", shape=[2, 3], M=4)
    assert a != Case("float32", shape=[2, 3], M=5)
    assert a != {"shape": [2, 3], "M": 4}


# --- public view ---------------------------------------------------------------------------------

def test_public_view_never_contains_hidden_cases(tmp_path):
    path = write_task(tmp_path, hidden="hidden_cases = [Case(shape=[31337], secret_param=271828)]",
                      perf="perf_cases = [Case(shape=[4096])]", tol="tolerances = {'float32': (1e-4, 1e-3)}",
                      misc="difficulty = 2")
    view = load_task_file(path).public_view()
    text = json.dumps(view)
    assert "31337" not in text and "271828" not in text and "hidden" not in text
    assert set(view) == {"name", "instruction", "entry_point", "visible_cases", "perf_cases", "tolerances",
                         "difficulty"}
    assert view["visible_cases"] == [{"label": "4 float32", "dtype": "float32", "shape": [4]}]
    assert view["perf_cases"] == [{"label": "4096 float32", "dtype": "float32", "shape": [4096]}]
    assert view["tolerances"] == {"float32": {"atol": 1e-4, "rtol": 1e-3}}
    assert view["entry_point"] == "add_one(x: torch.Tensor) -> torch.Tensor" and view["difficulty"] == 2


def test_builtin_public_views_have_no_hidden_cases():
    for name in ("vector_add", "softmax", "rmsnorm", "matmul"):
        task = resolve_task(name)
        text = json.dumps(task.public_view())
        assert task.hidden_cases, name
        for case in task.hidden_cases:
            if case not in task.visible_cases and case not in task.perf_cases:
                assert json.dumps(case.label) not in text, (name, case.label)


# --- resolve_task --------------------------------------------------------------------------------

def test_resolve_builtin_name():
    task = resolve_task("vector_add")
    assert task.name == "vector_add" and task.source_path.name == "vector_add.py"


def test_resolve_path(tmp_path):
    path = write_task(tmp_path)
    assert resolve_task(str(path)).name == "my_task"
    assert resolve_task(path).name == "my_task"


def test_resolve_relative_path(tmp_path, monkeypatch):
    write_task(tmp_path, filename="mine.py")
    monkeypatch.chdir(tmp_path)
    assert resolve_task("mine.py").source_path == (tmp_path / "mine.py").resolve()


def test_resolve_unknown_name_lists_known_tasks():
    with pytest.raises(TaskNotFound) as info:
        resolve_task("vector_addd")
    message = str(info.value)
    assert message.startswith("unknown task 'vector_addd'; known tasks: ")
    for name in ("vector_add", "softmax", "rmsnorm", "matmul"):
        assert name in message
    assert "Pass a path" in message


@pytest.mark.parametrize("text", ["nope.py", "some/dir/task", "./missing_task.py"])
def test_resolve_missing_path(tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskNotFound, match=f"task file {text!r} does not exist"):
        resolve_task(text)


def test_builtin_name_wins_over_a_same_named_directory(tmp_path, monkeypatch):
    (tmp_path / "vector_add").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_task("vector_add").name == "vector_add"
