"""Issue 30 item 4: the judge's profile in the agent's loop, on a recorded profile (CPU only).

The optimizer's prompt shows the profile of the kernel it starts from and of the reference; the
reflector's and fixer's prompts show it when a kernel failed at performance, never at correctness;
a kernel without a profile (`{}`) leaves every prompt exactly as before; the run store keeps the
profile with the attempt, so a resumed run renders it the same way."""

from __future__ import annotations

import json
from pathlib import Path

from kernelwright.agent import generator, optimizer, reflector
from kernelwright.agent.brief import brief_for
from kernelwright.agent.memory import Attempt
from kernelwright.agent.profile_text import MAX_LAUNCHES, profile_view, render_text
from kernelwright.agent.prompts import UNTRUSTED_FENCE, PromptLibrary
from kernelwright.judge import Verdict
from kernelwright.store import RunStore
from kernelwright.tasks import resolve_task

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "profile" / "sample_profile.json"
CODE = "def vector_add(x, y):\n    return x + y\n"


def sample() -> dict:
    return json.loads(SAMPLE.read_text())


def base() -> dict:
    return {"task": brief_for(resolve_task("vector_add")).as_context(), "backend_name": "NVIDIA",
            "knowledge": "", "example": None}


def passed(index: int = 0, profile: dict | None = None, speedup: float = 2.3) -> Attempt:
    return Attempt("vector_add", 0, index, "generate", 0, None, CODE, kind="passed", stage="passed",
                   speedup=speedup, profile=profile if profile is not None else {})


def failed(stage: str, kind: str, parent: int | None = 0, profile: dict | None = None) -> Attempt:
    return Attempt("vector_add", 0, 1, "optimize", 1, parent, CODE, kind=kind, stage=stage,
                   reason=f"failed at {stage}", feedback=f"verdict: failed at stage {stage} (kind {kind})",
                   profile=profile or {})


def optimize_prompt(profile: dict | None) -> str:
    start = passed(profile=profile)
    return optimizer.messages(PromptLibrary(), base(), [start], [start])[1]["content"]


def test_the_optimizer_sees_the_starting_kernels_and_the_references_profile():
    text = optimize_prompt(sample())
    assert "## The judge's profile of the kernel you start from (attempt 0, the fastest so far)" in text
    assert "### The kernel you start from" in text and "### The reference" in text
    assert "68% of peak bandwidth" in text and "29% of peak bandwidth" in text        # both sides
    assert "memory-bound at 68% of peak bandwidth (3.26 of 4.8 TB/s): little left to gain" in text
    assert "softmax_reference_kernel runs 64 programs on 132 SMs" in text            # the reference's diagnosis
    assert "softmax_kernel grid 4096x1x1 (4096 programs), 8 warps, 3 stages" in text  # a launch line
    assert "occupancy 75% (limited by registers)" in text
    assert "DRAM throughput 78%" in text and "top stalls: long_scoreboard 52%" in text  # the full profile
    assert "Not measured: the L2 hit rate of the reference could not be read" in text
    # the profile comes before the job, after the kernels
    assert text.index("### Kernel 1") < text.index("## The judge's profile") < text.index("## Your job")


def test_the_candidates_own_report_is_inside_the_untrusted_block():
    text = optimize_prompt(sample())
    lines = text.splitlines()
    opener = lines.index(UNTRUSTED_FENCE)
    assert "the candidate's own report of its launches" in lines[opener - 1]
    close = lines.index("```", opener + 1)
    inside = "\n".join(lines[opener + 1:close])
    assert "softmax_kernel grid 4096x1x1" in inside and "the recorded call: 0.0455 ms" in inside
    # the judge's own numbers and the reference's launches are not the candidate's report
    assert "68% of peak bandwidth" not in inside and "softmax_reference_kernel grid" not in inside


def test_no_profile_leaves_the_prompts_exactly_as_before():
    prompts = PromptLibrary()
    start = passed()
    plain = prompts.render("optimize", **base(), history=optimizer.history_view([start]), failed_ideas=[])
    assert optimize_prompt({}) == plain
    assert "profile" not in plain.lower()
    bad = failed("performance", "perf_mismatch")
    before = prompts.render("reflect", **base(), attempt=bad)
    assert reflector.messages(prompts, base(), bad, [start, bad])[1]["content"] == before
    before_fix = prompts.render("fix", **base(), attempt=bad, reflection="", earlier_failures=[])
    assert generator.fix_messages(prompts, base(), bad, "", (), [start, bad])[1]["content"] == before_fix


def test_a_skipped_profile_is_one_line():
    text = optimize_prompt({"skipped": "no profile under the interpreter (TRITON_INTERPRET=1): profiling needs a GPU"})
    assert "no profile under the interpreter (TRITON_INTERPRET=1): profiling needs a GPU" in text
    assert "no profile: no profile" not in text and "### The reference" not in text
    assert render_text({"skipped": "ncu is not installed"}) == "no profile: ncu is not installed"
    assert profile_view({}) is None and render_text({}) == ""


def test_the_reflector_sees_the_profile_on_a_performance_failure_only():
    start = passed(profile=sample())
    prompts = PromptLibrary()
    slow = failed("performance", "timing_cheat")
    text = reflector.messages(prompts, base(), slow, [start, slow])[1]["content"]
    assert "## The judge's profile of the kernel it started from (attempt 0) and of the reference" in text
    assert "memory-bound at 68% of peak bandwidth" in text
    fix = generator.fix_messages(prompts, base(), slow, "use a wider block", (), [start, slow])[1]["content"]
    assert "memory-bound at 68% of peak bandwidth" in fix
    wrong = failed("correctness", "wrong_values")
    for t in (reflector.messages(prompts, base(), wrong, [start, wrong])[1]["content"],
              generator.fix_messages(prompts, base(), wrong, "", (), [start, wrong])[1]["content"]):
        assert "profile" not in t.lower()


def test_a_kernel_failing_at_performance_with_its_own_profile_shows_that_one():
    own = sample()
    own["candidate"]["diagnosis"] = [{"rule": "grid_too_small", "kernel": "k", "value": 8, "text": "k runs 8 programs"}]
    slow = failed("performance", "perf_mismatch", parent=0, profile=own)
    text = reflector.messages(PromptLibrary(), base(), slow, [passed(profile=sample()), slow])[1]["content"]
    assert "## The judge's profile of this kernel and of the reference" in text and "k runs 8 programs" in text


def test_many_launches_are_bounded():
    profile = sample()
    launch = profile["candidate"]["launches"][0]
    profile["candidate"]["launches"] = [dict(launch, kernel=f"k{i}") for i in range(32)]
    profile["candidate"]["more_launches"] = 10
    text = render_text(profile)
    assert "- k0 grid" in text and f"- k{MAX_LAUNCHES - 1} grid" in text and f"- k{MAX_LAUNCHES} grid" not in text
    assert f"and {32 + 10 - MAX_LAUNCHES} more" in text
    assert len(optimize_prompt(profile)) < len(optimize_prompt({})) + 6000


def test_the_attempt_keeps_the_verdicts_profile_and_the_store_round_trips_it(tmp_path):
    verdict = Verdict(task="vector_add", candidate="/c.py", stage="passed", call=True, correct=True,
                      reason="passed", kind="passed", speedup=2.3)
    verdict.profile = sample()  # (the judge's field, issue 30: set here as the judge sets it)
    attempt = Attempt("vector_add", 0, 0, "generate", 0, None, CODE).with_verdict(verdict, "ok")
    assert attempt.profile == sample()
    with RunStore(tmp_path / "run") as store:
        store.add_attempt(attempt)
        store.add_attempt(Attempt("vector_add", 0, 1, "optimize", 1, 0, CODE, kind="passed", stage="passed"))
    with RunStore(tmp_path / "run", create=False, decode=Attempt.from_dict) as store:  # as a resumed run reads them
        back = store.attempts("vector_add", 0)
    assert back[0] == attempt and back[0].profile == sample() and back[1].profile == {}
    prompts = PromptLibrary()
    assert optimizer.messages(prompts, base(), [back[0]], back) == optimizer.messages(prompts, base(), [attempt], [attempt])


def test_a_stored_attempt_from_before_profiles_reads_back_without_one():
    record = passed().to_dict()
    del record["profile"]
    assert Attempt.from_dict(record).profile == {}
