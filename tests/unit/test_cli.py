"""The `kernelwright` command line: `tasks` and `eval`, through typer's CliRunner.

Only two tests run the real judge (a static failure and the good vector_add candidate)."""

import json
import re
from pathlib import Path

import pytest

import kernelwright
from kernelwright.cli import app

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "candidates" / "vector_add" / "good.py"
VERDICT_KEYS = {"task", "call", "correct", "stage", "reason", "speedup", "cases"}


def flat(text: str) -> str:
    """Rich wraps long lines; compare with whitespace collapsed."""
    return re.sub(r"\s+", " ", text)


def test_this_checkout_is_under_test():
    assert Path(kernelwright.__file__).resolve().is_relative_to(ROOT / "src")


def test_tasks_table(runner):
    result = runner.invoke(app, ["tasks"])
    assert result.exit_code == 0, result.output
    for name in ("vector_add", "softmax", "rmsnorm", "matmul"):
        assert name in result.stdout
    assert "builtin tasks" in result.stdout


def test_tasks_json_lists_tasks_with_entry_points(runner):
    result = runner.invoke(app, ["tasks", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["errors"] == []
    by_name = {t["name"]: t for t in data["tasks"]}
    for name in ("vector_add", "softmax", "rmsnorm", "matmul"):
        assert name in by_name
        assert by_name[name]["entry_point"].startswith(name + "("), by_name[name]["entry_point"]
        assert by_name[name]["cases"]["visible"] >= 1
        assert Path(by_name[name]["path"]).name == f"{name}.py"


def test_tasks_unknown_suite(runner):
    result = runner.invoke(app, ["tasks", "--suite", "other"])
    assert result.exit_code == 2
    assert "unknown suite 'other'" in flat(result.stderr)


def test_eval_help(runner):
    result = runner.invoke(app, ["eval", "--help"])
    assert result.exit_code == 0
    assert "--task" in result.stdout and "--baseline" in result.stdout and "Exit status" in flat(result.stdout)


def test_eval_missing_candidate_file(runner, tmp_path):
    missing = tmp_path / "nope.py"
    result = runner.invoke(app, ["eval", str(missing), "--task", "vector_add"])
    assert result.exit_code == 2
    err = flat(result.stderr)
    # (rich may break a long tmp path anywhere, inside a word too: the path compared unbroken)
    assert "candidate file" in err and "nope.py" in re.sub(r"\s+", "", err) and "does not exist" in err
    assert result.stdout == ""


def test_eval_unknown_task_lists_known_tasks(runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "no_such_task"])
    assert result.exit_code == 2
    err = flat(result.stderr)
    assert "unknown task 'no_such_task'" in err and "known tasks:" in err
    for name in ("vector_add", "softmax", "rmsnorm", "matmul"):
        assert name in err


def test_eval_bad_task_file_is_a_usage_error(runner, tmp_path):
    task = tmp_path / "task.py"
    task.write_text("name = 'x'\n")
    result = runner.invoke(app, ["eval", str(GOOD), "--task", str(task)])
    assert result.exit_code == 2
    assert "missing required definition(s)" in flat(result.stderr)


def test_eval_bad_baseline(runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--baseline", "nope"])
    assert result.exit_code == 2
    assert "--baseline must be 'torch' or 'triton'" in flat(result.stderr)


def test_eval_option_ranges_are_checked(runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--judge-seeds", "0"])
    assert result.exit_code == 2


def test_eval_static_failure_json(runner, tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text("import torch\n\ndef vector_add(x, y):\n    return x + y\n")
    result = runner.invoke(app, ["eval", str(cand), "--task", "vector_add", "--device", "cpu", "--json"])
    assert result.exit_code == 1, result.output
    verdict = json.loads(result.stdout)
    assert VERDICT_KEYS <= set(verdict)
    assert verdict["task"] == "vector_add"
    assert verdict["stage"] == "static"
    assert verdict["reason"] == "defines no @triton.jit kernel"
    assert verdict["call"] is False and verdict["correct"] is False
    assert verdict["speedup"] is None


@pytest.mark.slow
def test_eval_good_candidate_json(runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--device", "cpu", "--json",
                                 "--judge-seeds", "1", "--judge-base-seed", "5"])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert VERDICT_KEYS <= set(verdict)
    assert verdict["task"] == "vector_add"
    assert verdict["stage"] == "passed", verdict["reason"]
    assert verdict["call"] is True and verdict["correct"] is True
    assert verdict["speedup"] is None  # no perf stage under the CPU interpreter by default
    assert verdict["cases"]
    checked = [c for c in verdict["cases"] if c["kind"] == "correctness" and c["ok"]]
    assert checked and all(len(c["seeds"]) == 1 for c in checked)
    assert not any(c["kind"] == "performance" and c["ok"] for c in verdict["cases"])


def test_print_verdict_human_output(capsys):
    from kernelwright.cli.judge_cmds import print_verdict
    from kernelwright.judge.common.verdict import CaseResult, Verdict

    verdict = Verdict(task="vector_add", candidate="c.py", stage="correctness", call=True, correct=False,
                      reason="output: 1 of 4 elements outside tolerance", detail="Traceback: boom",
                      cases=[CaseResult("correctness", "4 float32", {}, False),
                             CaseResult("correctness", "8 bfloat16", {}, None, reason="skipped under the interpreter")],
                      kind="wrong_values")
    print_verdict(verdict)
    out = flat(capsys.readouterr().out)
    assert "static ok" in out and "call ok" in out and "correctness FAILED" in out and "performance -" in out
    assert "verdict: correctness - output: 1 of 4 elements outside tolerance" in out
    assert "correctness case 8 bfloat16 skipped under the interpreter" in out
    assert "Traceback: boom" in out


def test_print_verdict_passed_with_speedup(capsys):
    from kernelwright.cli.judge_cmds import print_verdict
    from kernelwright.judge.common.verdict import CaseResult, Verdict

    perf = CaseResult("performance", "1M float32", {}, True, ref_ms=2.0, cand_ms=1.0, speedup=2.0,
                      ci95=[1.9, 2.1], roofline_ms=0.5)
    verdict = Verdict(task="vector_add", candidate="c.py", stage="passed", call=True, correct=True, reason="ok",
                      speedup=2.0, speedup_geomean=2.0, speedup_ci95=[1.9, 2.1], cases=[perf], kind="passed")
    print_verdict(verdict)
    out = flat(capsys.readouterr().out)
    assert "performance ok" in out and "verdict: passed" in out
    assert "2.000x" in out and "[1.900, 2.100]" in out and "0.5000" in out
    assert "speedup vs torch: 2.000x" in out
