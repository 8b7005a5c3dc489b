"""Issue 18, what a new user hits first: `doctor` on a CPU machine, every problem at once, help
text, exit codes, `--json` usage errors, `tasks` and `tasks show`, `eval`'s headline for cases
left unchecked and its refusal to time under the interpreter."""

import json
import os
import re
from pathlib import Path

import pytest

from kernelwright.cli import app

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "candidates" / "vector_add" / "good.py"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


# --- doctor (item 2) -----------------------------------------------------------------------------

def _no_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)


def test_doctor_on_a_cpu_machine_reports_the_interpreter_as_supported(runner, monkeypatch):
    _no_gpu(monkeypatch)
    for args in (["doctor"], ["doctor", "--device", "cpu"], ["doctor", "--device", "auto"]):
        result = runner.invoke(app, args)
        out = flat(result.stdout)
        assert result.exit_code == 0, result.output
        assert "FAIL" not in out and "CPU interpreter, a supported mode" in out, out


def test_doctor_device_cuda_without_a_gpu_fails_with_the_fix(runner, monkeypatch):
    _no_gpu(monkeypatch)
    result = runner.invoke(app, ["doctor", "--device", "cuda"])
    assert result.exit_code == 1
    assert "FAIL gpu" in result.stdout and "--device cpu" in flat(result.stdout)
    assert runner.invoke(app, ["doctor", "--device", "tpu"]).exit_code == 2


def test_doctor_reports_a_missing_key_and_a_missing_package_together(runner, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openai" else real(name, *a))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = runner.invoke(app, ["doctor", "--no-gpu", "--model", "openai/gpt-4.1"], env={"OPENAI_API_KEY": ""})
    out = flat(result.stdout)
    assert result.exit_code == 1, result.output
    assert "OPENAI_API_KEY is not set: export it" in out
    assert "'openai' package" in out and "pip install 'kernelwright[llm]'" in out
    assert "2 of 2 checks failed" in out


def _scipy(monkeypatch, installed: bool):
    import importlib.metadata
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (real("json") if installed else None) if name == "scipy" else real(name, *a))
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.99")


def test_doctor_names_scipy_for_the_rocm_suite(runner, monkeypatch):
    """Issue 29: the ROCm suite's test_randn.py needs scipy (the `rocm` extra): `doctor --suite
    rocm` fails on it with the fix; plain `doctor` notes it without failing."""
    _no_gpu(monkeypatch)
    _scipy(monkeypatch, installed=False)
    result = runner.invoke(app, ["doctor", "--device", "cpu", "--suite", "rocm"])
    out = flat(result.stdout)
    assert result.exit_code == 1, result.output
    assert "FAIL scipy: not installed, and the ROCm suite's tasks need it" in out and "'.[rocm]'" in out
    assert "1 of 4 checks failed: scipy" in out
    result = runner.invoke(app, ["doctor", "--device", "cpu"])
    out = flat(result.stdout)
    assert result.exit_code == 0 and "FAIL" not in out, result.output
    assert "note: scipy is not installed" in out and "doctor --suite rocm" in out
    assert "scipy" not in flat(runner.invoke(app, ["doctor", "--device", "cpu", "--suite", "builtin"]).stdout)
    _scipy(monkeypatch, installed=True)
    result = runner.invoke(app, ["doctor", "--device", "cpu", "--suite", "rocm"])
    assert result.exit_code == 0 and "ok scipy: scipy 1.99: the ROCm suite" in flat(result.stdout), result.output
    assert "scipy" not in flat(runner.invoke(app, ["doctor", "--device", "cpu"]).stdout)
    assert runner.invoke(app, ["doctor", "--suite", "nope"]).exit_code == 2


# --- help text and --json usage errors (item 7) --------------------------------------------------

def test_flag_help_has_no_stray_bool(runner):
    for command in (["eval", "--help"], ["judge-suite", "--help"], ["tasks", "--help"], ["doctor", "--help"]):
        result = runner.invoke(app, command, env={"COLUMNS": "160"})
        assert result.exit_code == 0, result.output
        assert "<bool>" not in result.stdout, command
        assert "--json" in result.stdout or command[0] == "doctor"


@pytest.mark.parametrize("args", [
    ["eval", str(GOOD), "--task", "vector_add", "--json", "--no-such-flag"],     # click: unknown option
    ["eval", str(GOOD), "--json"],                                               # click: missing --task
    ["eval", str(GOOD), "--task", "no_such_task", "--json"],                     # ours: unknown task
    ["tasks", "--suite", "nope", "--json"],
    ["judge-suite", "--suite", "nope", "--candidates", "reference", "--json"],
])
def test_json_usage_errors_print_an_object_on_stdout(args, capsys, monkeypatch):
    from kernelwright.cli import main

    monkeypatch.setattr("sys.argv", ["kernelwright", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    data = json.loads(captured.out)
    assert data["exit_code"] == 2 and data["error"]


# --- tasks (items 7 and 10) ----------------------------------------------------------------------

def test_tasks_help_lists_every_suite_and_checkout(runner):
    for command in (["tasks", "--help"], ["eval", "--help"], ["tasks", "show", "--help"]):
        out = flat(runner.invoke(app, command, env={"COLUMNS": "200"}).stdout)
        for suite in ("builtin", "tritonbench-revised", "rocm", "kernelbench", "tritonbench-t"):
            assert suite in out, (command, suite)
        assert "KernelBench" in out and "TritonBench" in out and "your GEAK-eval checkout" not in out


def test_tasks_json_labels_builtin_tasks_builtin(runner):
    data = json.loads(runner.invoke(app, ["tasks", "--json"]).stdout)
    assert data["tasks"] and {t["suite"] for t in data["tasks"]} == {"builtin"}


def test_tasks_table_never_cuts_names(runner):
    from kernelwright.tasks import builtin_task_paths

    result = runner.invoke(app, ["tasks"], env={"COLUMNS": "60"})
    assert result.exit_code == 0
    for name in builtin_task_paths():
        assert name in result.stdout, name


def test_tasks_show_prints_instruction_entry_point_and_cases(runner):
    from kernelwright.tasks import resolve_task

    task = resolve_task("softmax")
    result = runner.invoke(app, ["tasks", "show", "softmax"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert flat(task.instruction) in out and task.entry_point.signature in out
    for case in task.visible_cases + task.perf_cases:
        assert case.label in out
    assert f"hidden cases: {len(task.hidden_cases)}" in out
    assert all(c.label not in out for c in task.hidden_cases if c not in task.visible_cases + task.perf_cases)
    data = json.loads(runner.invoke(app, ["tasks", "show", "softmax", "--json"]).stdout)
    assert data["instruction"] == task.instruction and data["suite"] == "builtin"
    assert "hidden_cases" not in data and len(data["visible_cases"]) == len(task.visible_cases)


def test_unknown_task_names_get_a_suggestion(runner):
    result = runner.invoke(app, ["tasks", "show", "softmx"])
    assert result.exit_code == 2 and "did you mean softmax?" in flat(result.stderr).lower()


def test_tasks_of_a_checkout_with_an_unreadable_file_exit_0_naming_the_file_once(runner, tmp_path):
    from kernelwright.suites.tritonbench_t import DATA_DIR
    from tests.test_tritonbench_t_adapter import OPERATOR, SEPARATOR, TEST

    data = tmp_path / "TritonBench" / DATA_DIR
    data.mkdir(parents=True)
    (data / "shifted_tanh.py").write_text(OPERATOR + SEPARATOR + TEST)
    (data / "no_test.py").write_text("import torch\n\ndef f(x):\n    return x\n")
    result = runner.invoke(app, ["tasks", "--suite", "tritonbench-t", "--path", str(tmp_path / "TritonBench"),
                                 "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [t["name"] for t in report["tasks"]] == ["shifted_tanh"]
    (error,) = report["errors"]
    assert error.startswith("no_test.py: ") and error.count("no_test.py") == 1, error


# --- eval: unchecked cases (item 4, CLI side), --perf on the CPU (item 3), exit status (item 7) ---

@pytest.mark.slow
def test_eval_headline_and_json_say_when_cases_were_left_unchecked(runner):
    """vector_add has a bfloat16 case, which the interpreter skips: passed, but not all checked."""
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--device", "cpu", "--judge-seeds", "1",
                                 "--json"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["stage"] == "passed" and verdict["all_cases_checked"] is False
    assert any("bfloat16" in c["label"] and c["reason"].startswith("skipped") for c in verdict["unchecked"])


def test_print_verdict_headline_counts_unchecked_cases(capsys):
    from kernelwright.cli.judge_cmds import print_verdict
    from kernelwright.judge.common.verdict import CaseResult, Verdict

    verdict = Verdict(task="t", candidate="c.py", stage="passed", call=True, correct=True, reason="passed",
                      cases=[CaseResult("correctness", "4 float32", {}, True),
                             CaseResult("correctness", "8 bfloat16", {}, None, reason="skipped under the interpreter")],
                      kind="passed")
    print_verdict(verdict)
    assert "verdict: passed, 1 of 2 correctness case(s) not checked" in flat(capsys.readouterr().out)


def test_eval_perf_under_the_interpreter_is_refused_with_an_estimate(runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "softmax", "--device", "cpu", "--perf"])
    assert result.exit_code == 2
    err = flat(result.stderr)
    assert "--perf under Triton's CPU interpreter refused" in err and "--force" in err
    assert re.search(r"at least \d+ calls at perf sizes .* about \d+-\d+ min", err), err
    suite = runner.invoke(app, ["judge-suite", "--suite", "builtin", "--candidates", "reference", "--device", "cpu",
                                "--perf", "--tasks", "softmax"])
    assert suite.exit_code == 2 and "--force" in flat(suite.stderr)


BROKEN_REFERENCE_TASK = '''
import os
import torch
from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn
name = "broken_ref"
instruction = "x + y"
entry_point = "vector_add(x, y)"
def make_inputs(case, gen):
    return randn(gen, case.shape, case.dtype), randn(gen, case.shape, case.dtype)
def reference(x, y):
    if BROKEN:
        raise RuntimeError("this reference is broken")
    return x + y
visible_cases = [Case("float32", shape=(64,))]
'''


@pytest.mark.slow
def test_exit_status_2_for_a_rejected_task_file_and_3_when_the_judge_cannot_decide(runner, tmp_path, monkeypatch):
    """The README's exit codes, as the tool gives them: a task file whose reference fails on its own
    cases is rejected before judging (2, like any bad task file); a reference that fails only while
    judging (here: only in the judge's processes, as one that needs a GPU it lacks) leaves the
    judge unable to decide (3)."""
    monkeypatch.setenv("KW_TEST_CLI_PID", str(os.getpid()))
    always = tmp_path / "always.py"
    always.write_text(BROKEN_REFERENCE_TASK.replace("BROKEN", "True"))
    result = runner.invoke(app, ["eval", str(GOOD), "--task", str(always), "--device", "cpu"])
    assert result.exit_code == 2 and "reference failed" in flat(result.stderr)
    judged = tmp_path / "judged.py"
    judged.write_text(BROKEN_REFERENCE_TASK.replace("BROKEN", "os.getpid() != int(os.environ['KW_TEST_CLI_PID'])"))
    result = runner.invoke(app, ["eval", str(GOOD), "--task", str(judged), "--device", "cpu", "--judge-seeds", "1", "--json"])
    assert result.exit_code == 3, result.output
    assert json.loads(result.stdout)["stage"] == "judge_error"


# --- item 8: the ROCm files need pytest at run time ---------------------------------------------

def test_pytest_is_a_runtime_dependency_for_the_rocm_suite():
    """GEAK's ROCm files are pytest modules (`import pytest` at the top, parametrize marks that the
    adapter reads): after a plain `pip install -e .`, `judge-suite --suite rocm` must load them."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(re.match(r"pytest\b", dep) for dep in project["dependencies"])
    assert "import pytest" in (ROOT / "src" / "kernelwright" / "suites" / "geak_rocm.py").read_text()


# --- item 7: `config` shows every setting ----------------------------------------------------------

def test_config_shows_every_registered_setting_and_the_judge_environment(runner, tmp_path, monkeypatch):
    from kernelwright.config import ENV_KNOBS, import_setting_modules, registered_settings

    monkeypatch.chdir(tmp_path)
    import_setting_modules()
    result = runner.invoke(app, ["config", "--json", "--all"], env={"KERNELWRIGHT_TRACE": "1"})
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert {spec.key for spec in registered_settings()} <= set(shown)
    assert {f"env.{k.name}" for k in ENV_KNOBS} <= set(shown)
    assert shown["env.KERNELWRIGHT_TRACE"]["value"] == "1"
    assert shown["env.KERNELWRIGHT_TRACE"]["source"] == "env (KERNELWRIGHT_TRACE)"
    table = runner.invoke(app, ["config"], env={"COLUMNS": "200"})
    assert "KERNELWRIGHT_COMPILE_THREADS" in table.stdout and "llm.model" in table.stdout


# --- item 10: TritonBench-T / GEAK results keep the test's own names -------------------------------

def test_flattened_results_keep_the_result_keys():
    """The judge can name a failing result `test_case_2[0]` instead of `output 1` (it reads
    `.names` of what the adapter's call returns)."""
    import torch

    from kernelwright.suites.adapter import flatten_results

    flat_results = flatten_results({"test_case_1": torch.ones(2), "test_case_2": (torch.zeros(1), 3.0), "x": None})
    assert len(flat_results) == 3 and isinstance(flat_results, list)
    assert flat_results.names == ["test_case_1", "test_case_2[0]", "test_case_2[1]"]
    assert flatten_results([torch.ones(1), torch.ones(1)]).names == ["output 0", "output 1"]


@pytest.mark.slow
def test_eval_perf_with_force_times_under_the_interpreter(runner):
    tiny = ROOT / "tests" / "tasks" / "tiny_add.py"
    cand = ROOT / "tests" / "candidates" / "tiny_add" / "good.py"
    result = runner.invoke(app, ["eval", str(cand), "--task", str(tiny), "--device", "cpu", "--perf", "--force",
                                 "--blocks", "2", "--judge-seeds", "1", "--json"])
    assert result.exit_code == 0, result.output
    assert "at least 24 calls at perf sizes" in flat(result.stderr)
    assert json.loads(result.stdout)["speedup"] is not None


# --- the standalone scripted server (issue 29) ---------------------------------------------------

def test_the_standalone_scripted_server_logs_each_request_and_counts_them_on_exit(tmp_path):
    """`--log`: a line per request on stderr (path, model, the script entry that answered);
    Ctrl-C: how many requests it received."""
    import signal
    import subprocess
    import sys
    import urllib.request

    script = tmp_path / "script.json"
    script.write_text(json.dumps({"sequence": [{"content": "ok"}], "rules": [{"match": "fix", "status": 500}],
                                  "default": {"content": "hello"}}))
    proc = subprocess.Popen([sys.executable, "-m", "kernelwright.llm.testing.scripted_server", "--script",
                             str(script), "--log"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    try:
        url = proc.stdout.readline().split()[-1]
        for prompt in ("hi", "please fix", "hi"):
            body = json.dumps({"model": "m1", "messages": [{"role": "user", "content": prompt}]}).encode()
            request = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request, timeout=10).read()
            except urllib.error.HTTPError:
                pass  # the scripted 500
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    lines = err.splitlines()
    assert "#1 POST /v1/chat/completions model=m1: sequence[0] (200)" in lines, err
    assert "#2 POST /v1/chat/completions model=m1: rules[0] /fix/ (500)" in lines, err
    assert "#3 POST /v1/chat/completions model=m1: default (200)" in lines, err
    assert lines[-1] == "scripted server stopped: 3 requests received", err
