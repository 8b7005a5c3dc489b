"""The profile of a verdict under the CPU interpreter (issue 30): a passing candidate's verdict
says cleanly that there is no profile under the interpreter, --no-profile leaves it empty, a bad
--profile is a usage error, and the profile test candidates are correct vector_adds."""

import json

import pytest

from kernelwright.judge.worker.profiling import INTERPRETER_SKIP
from kernelwright.tasks import resolve_task

from .conftest import CANDIDATES, judge_on_cpu

GOOD = CANDIDATES / "vector_add" / "good.py"


@pytest.mark.parametrize("name", ["strided_vector_add.py", "one_program_vector_add.py", "spilling_vector_add.py"])
def test_the_profile_candidates_pass_on_the_interpreter(name):
    verdict = judge_on_cpu(resolve_task("vector_add"), CANDIDATES / "profile" / name, seeds=1)
    assert verdict.passed, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    assert verdict.profile == {"skipped": INTERPRETER_SKIP}


def test_eval_json_says_there_is_no_profile_under_the_interpreter(kernelwright_here):
    result = kernelwright_here("eval", str(GOOD), "--task", "vector_add", "--device", "cpu", "--json",
                               "--judge-seeds", "1")
    assert result.returncode == 0, result.stderr
    profile = json.loads(result.stdout)["profile"]
    assert profile == {"skipped": "no profile under the interpreter (TRITON_INTERPRET=1): profiling needs a GPU"}


def test_no_profile_gives_an_empty_profile(kernelwright_here):
    result = kernelwright_here("eval", str(GOOD), "--task", "vector_add", "--device", "cpu", "--json",
                               "--judge-seeds", "1", "--no-profile")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["profile"] == {}


def test_a_bad_profile_level_is_a_usage_error(kernelwright_here):
    result = kernelwright_here("eval", str(GOOD), "--task", "vector_add", "--device", "cpu", "--profile", "bogus")
    assert result.returncode == 2
    assert "--profile must be one of off, basic, full, got 'bogus'" in result.stderr
