"""Issue 30 item 5: `kernelwright profile` on the CPU: its table and --json on a canned verdict
(the judging call replaced), the interpreter's skipped sentence, a failing candidate's exit code."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from kernelwright.cli import app
from kernelwright.cli.profile_view import profile_table
from kernelwright.judge import Verdict

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "candidates" / "vector_add" / "good.py"
SAMPLE = ROOT / "tests" / "data" / "profile" / "sample_profile.json"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def rendered(profile) -> str:
    console = Console(record=True, width=120)
    console.print(profile_table(profile))
    return console.export_text()


def canned(monkeypatch, *, passed: bool = True, profile: dict | None = None, backend: str = "cuda"):
    """The judging call replaced by a verdict with `profile` (the judge's field, issue 30)."""
    seen: dict = {}

    def judge(task, candidate, device, level, **flags):
        seen.update(task=task.name, device=device, level=level, **flags)
        verdict = Verdict(task=task.name, candidate=str(candidate), stage="passed" if passed else "correctness",
                          call=True, correct=passed, reason="passed" if passed else "output: 3 of 4 elements outside tolerance",
                          kind="passed" if passed else "wrong_values", speedup=2.3 if passed else None,
                          device={"name": "NVIDIA H200"})
        verdict.profile = profile if profile is not None else {}
        return verdict, backend

    monkeypatch.setattr("kernelwright.cli.profile_cmds.judge_for_profile", judge)
    return seen


def test_the_table_shows_both_sides_launches_and_diagnoses():
    text = flat(rendered(json.loads(SAMPLE.read_text())))
    assert "perf case 1 (4096x4096) on NVIDIA H200" in text
    assert "candidate (launches: its own process's report)" in text and "reference" in text
    assert "softmax_kernel" in text and "4096x1x1" in text and "75% regs" in text
    assert "softmax_reference_kernel" in text and "12% regs" in text
    assert "68% of peak bandwidth" in text
    assert "memory-bound at 68% of peak bandwidth (3.26 of 4.8 TB/s): little left to gain [memory_bound]" in text
    assert "[register_spills]" in text and "long_scoreboard 52%" in text and "ncu 2024.3.2" in text
    assert "not measured: the L2 hit rate of the reference could not be read" in text


def test_the_table_of_no_profile_and_of_a_skipped_one_is_a_sentence():
    assert flat(rendered({})).strip().startswith("no profile: none was made")
    assert flat(rendered({"skipped": "ncu is not installed"})).strip() == "no profile: ncu is not installed"


def test_a_kernel_name_with_markup_prints_as_written():
    profile = json.loads(SAMPLE.read_text())
    profile["candidate"]["launches"][0]["kernel"] = "[red]k[/red]"
    assert "[red]k[/red]" in rendered(profile)


def test_profile_prints_the_table_on_a_canned_verdict(runner, monkeypatch):
    seen = canned(monkeypatch, profile=json.loads(SAMPLE.read_text()))
    result = runner.invoke(app, ["profile", str(GOOD), "--task", "vector_add", "--profile", "full", "--device", "cuda"])
    assert result.exit_code == 0, result.output
    out = flat(result.stdout)
    assert "verdict: passed" in out and "2.300x" in out and "memory-bound at 68% of peak bandwidth" in out
    assert seen["level"] == "full" and seen["device"] == "cuda"


def test_profile_json_carries_the_profile_and_the_verdicts_kind(runner, monkeypatch):
    canned(monkeypatch, profile=json.loads(SAMPLE.read_text()))
    result = runner.invoke(app, ["profile", str(GOOD), "--task", "vector_add", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["profile"] == json.loads(SAMPLE.read_text())
    assert data["kind"] == "passed" and data["stage"] == "passed" and data["passed"] is True


def test_a_failing_candidate_prints_its_reason_and_exits_as_eval_does(runner, monkeypatch):
    canned(monkeypatch, passed=False)
    result = runner.invoke(app, ["profile", str(GOOD), "--task", "vector_add"])
    assert result.exit_code == 1
    assert "output: 3 of 4 elements outside tolerance" in flat(result.stdout)
    result = runner.invoke(app, ["profile", str(GOOD), "--task", "vector_add", "--json"])
    assert result.exit_code == 1 and json.loads(result.stdout)["kind"] == "wrong_values"


def test_a_bad_level_is_a_usage_error(runner):
    result = runner.invoke(app, ["profile", str(GOOD), "--task", "vector_add", "--profile", "off"])
    assert result.exit_code == 2


def test_profile_help(runner):
    result = runner.invoke(app, ["profile", "--help"])
    assert result.exit_code == 0
    text = flat(result.stdout)
    assert "--profile" in text and "--json" in text and "Exit status" in text and "docs/profile.md" in text


@pytest.mark.slow
def test_under_the_interpreter_it_checks_and_says_a_profile_needs_a_gpu(runner):
    result = runner.invoke(app, ["profile", str(GOOD), "--task", "vector_add", "--device", "cpu", "--json",
                                 "--judge-seeds", "1", "--judge-base-seed", "5"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["passed"] is True
    assert "profiling needs a GPU" in data["profile"]["skipped"]
