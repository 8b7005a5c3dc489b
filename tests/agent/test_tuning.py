"""The tuning pass (agent/tuning.py) and its source rewrites (launchknobs.py), byte for byte; the keep rule and the
budget with a fake judge; and once end to end with the real judge on the CPU interpreter."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

import pytest

from .agent_support import TINY_ADD, kernel
from kernelwright.agent.memory import Attempt
from kernelwright.agent.tuning import TuneBudget, TuneResult, tune
from kernelwright.judge.common.verdict import Verdict
from kernelwright.launchknobs import variants
from kernelwright.tasks import Task


def changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    """(old line, new line) pairs of a variant: the only lines that differ."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert len(a) == len(b), "a rewrite never adds or removes lines here"
    return [(x, y) for x, y in zip(a, b) if x != y]


# -- variants(): launch keywords ---------------------------------------------------------------------
LAUNCH = kernel(body="add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4, num_stages=2)")
LAUNCH_LINE = "    add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4, num_stages=2)\n"


def test_launch_keywords_single_changes_first_then_pairs_then_farther():
    found = variants(LAUNCH, 100)
    descriptions = [v.description for v in found]
    assert descriptions[:6] == ["BLOCK=2048", "num_warps=8", "num_stages=3", "BLOCK=512", "num_warps=2",
                                "num_stages=1"]
    assert descriptions[6:9] == ["BLOCK=2048, num_warps=8", "BLOCK=2048, num_stages=3", "num_warps=8, num_stages=3"]
    assert set(descriptions[12:]) == {"num_warps=16", "num_warps=1", "num_stages=4", "num_stages=5"}
    assert len(set(descriptions)) == len(descriptions) == len({v.code for v in found}) == 16
    # every rewrite touches the launch line only, exactly where it must; the grid's 1024 moves with BLOCK
    expected = {
        "BLOCK=2048": LAUNCH_LINE.replace("1024", "2048"),
        "BLOCK=512": LAUNCH_LINE.replace("1024", "512"),
        "num_warps=8": LAUNCH_LINE.replace("num_warps=4", "num_warps=8"),
        "num_stages=1": LAUNCH_LINE.replace("num_stages=2", "num_stages=1"),
        "BLOCK=2048, num_warps=8": LAUNCH_LINE.replace("1024", "2048").replace("num_warps=4", "num_warps=8"),
    }
    by_description = {v.description: v for v in found}
    for description, line in expected.items():
        assert changed_lines(LAUNCH, by_description[description].code) == [(LAUNCH_LINE, line)]
    assert [v.description for v in variants(LAUNCH, 3)] == descriptions[:3]
    assert variants(LAUNCH, 0) == []


def test_grid_literal_stays_when_two_block_sizes_share_its_value():
    code = '''import triton
import triton.language as tl

@triton.jit
def mm(a, b, c, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pass

def run(a, b, c, M, N):
    mm[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, BLOCK_M=64, BLOCK_N=64)
'''
    by_description = {v.description: v.code for v in variants(code, 100)}
    line = "    mm[(triton.cdiv(M, 64), triton.cdiv(N, 64))](a, b, c, M, N, BLOCK_M=64, BLOCK_N=64)\n"
    assert changed_lines(code, by_description["BLOCK_M=128"]) == [(line, line.replace("BLOCK_M=64", "BLOCK_M=128"))]
    assert set(by_description) == {"BLOCK_M=128", "BLOCK_N=128", "BLOCK_M=32", "BLOCK_N=32",
                                   "BLOCK_M=128, BLOCK_N=128", "BLOCK_M=32, BLOCK_N=32"}


def test_positional_constexpr_and_a_grid_variable():
    code = '''import triton
import triton.language as tl

@triton.jit
def k(x_ptr, n, BLOCK_SIZE: tl.constexpr, other):
    pass

def run(x, n):
    grid = (triton.cdiv(n, 256),)
    k[grid](x, n, 256, 256)
'''
    found = variants(code, 100)
    assert [v.description for v in found] == ["BLOCK_SIZE=512", "BLOCK_SIZE=128"]
    assert changed_lines(code, found[0].code) == [
        ("    grid = (triton.cdiv(n, 256),)\n", "    grid = (triton.cdiv(n, 512),)\n"),
        ("    k[grid](x, n, 256, 256)\n", "    k[grid](x, n, 512, 256)\n")]  # `other` is not a constexpr


def test_two_launch_sites_name_their_kernel():
    code = '''import triton

def run(x, n):
    partial[(64,)](x, n, BLOCK=256, num_warps=4)
    finish[(1,)](x, num_warps=1)
'''
    assert [v.description for v in variants(code, 5)] == [
        "partial: BLOCK=512", "partial: num_warps=8", "finish: num_warps=2", "partial: BLOCK=128",
        "partial: num_warps=2"]
    pairs = [v.description for v in variants(code, 100) if "," in v.description]
    assert pairs[:3] == ["partial: BLOCK=512, num_warps=8", "partial: BLOCK=512, finish: num_warps=2",
                         "partial: num_warps=8, finish: num_warps=2"]


# -- variants(): a constant assigned once ---------------------------------------------------------------
CONSTANT = '''import torch
import triton
import triton.language as tl

BLOCK = 1024  # élan: a non-ASCII comment keeps byte offsets honest


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    warps = 4
    add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK, num_warps=warps)
    return out
'''


def test_constant_assigned_once_is_rewritten_where_it_is_assigned():
    found = variants(CONSTANT, 100)
    by_description = {v.description: v.code for v in found}
    assert [v.description for v in found][:4] == ["BLOCK=2048", "warps=8", "BLOCK=512", "warps=2"]
    assert changed_lines(CONSTANT, by_description["BLOCK=512"]) == [
        ("BLOCK = 1024  # élan: a non-ASCII comment keeps byte offsets honest\n",
         "BLOCK = 512  # élan: a non-ASCII comment keeps byte offsets honest\n")]
    assert changed_lines(CONSTANT, by_description["warps=16"]) == [("    warps = 4\n", "    warps = 16\n")]


def test_names_assigned_twice_or_declared_global_are_not_constants():
    twice = CONSTANT.replace("    warps = 4\n", "    warps = 4\n    if n > 4096:\n        warps = 8\n")
    assert {v.description for v in variants(twice, 100)} == {"BLOCK=2048", "BLOCK=512"}
    glob = CONSTANT + "\n\ndef set_block(b):\n    global BLOCK\n    BLOCK = b\n"
    assert all(not v.description.startswith("BLOCK") for v in variants(glob, 100))
    parameter = CONSTANT.replace("def vector_add(x, y):", "def vector_add(x, y, BLOCK=1024):")
    assert all(not v.description.startswith("BLOCK") for v in variants(parameter, 100))


# -- variants(): autotune --------------------------------------------------------------------------------
AUTOTUNE = '''import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 128}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=8, num_stages=2),
        triton.Config({"BLOCK_SIZE": 512}, 4, 3),
        triton.Config({"BLOCK_SIZE": 1024}),
    ],
    key=["n"],
)
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


def scale(x):
    out = torch.empty_like(x)
    n = x.numel()
    scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, out, n)
    return out
'''
CONFIG_LINES = AUTOTUNE.splitlines(keepends=True)[6:12]   # "    configs=[" ... "    ],"


def pinned(config: str) -> str:
    head = AUTOTUNE.split("    configs=[")[0]
    tail = AUTOTUNE.split("    ],\n", 1)[1]
    return f"{head}    configs=[{config}],\n{tail}"


def test_autotune_pins_each_config_then_changes_warps_and_stages():
    found = variants(AUTOTUNE, 100)
    assert [v.description for v in found][:4] == [
        "autotune: only config 1 of 4 (BLOCK_SIZE=128, num_warps=4)",
        "autotune: only config 2 of 4 (BLOCK_SIZE=256, num_warps=8, num_stages=2)",
        "autotune: only config 3 of 4 (BLOCK_SIZE=512, num_warps=4, num_stages=3)",
        "autotune: only config 4 of 4 (BLOCK_SIZE=1024)"]
    assert found[1].code == pinned('triton.Config({"BLOCK_SIZE": 256}, num_warps=8, num_stages=2)')
    # the rest of the file is byte-identical: only the list literal changed
    assert found[0].code.startswith(AUTOTUNE.split("[\n        triton")[0] + "[triton.Config")
    assert found[0].code.endswith(AUTOTUNE.split("    ],", 1)[1])
    by_description = {v.description: v.code for v in found}
    changed = {
        "autotune: only config 1 of 4 (BLOCK_SIZE=128, num_warps=4) with num_warps=8":
            'triton.Config({"BLOCK_SIZE": 128}, num_warps=8)',
        "autotune: only config 2 of 4 (BLOCK_SIZE=256, num_warps=8, num_stages=2) with num_stages=3":
            'triton.Config({"BLOCK_SIZE": 256}, num_warps=8, num_stages=3)',
        "autotune: only config 3 of 4 (BLOCK_SIZE=512, num_warps=4, num_stages=3) with num_warps=2":
            'triton.Config({"BLOCK_SIZE": 512}, 2, 3)',
        # a parameter the config leaves at its default is added (num_warps 4, num_stages 3)
        "autotune: only config 4 of 4 (BLOCK_SIZE=1024) with num_stages=4":
            'triton.Config({"BLOCK_SIZE": 1024}, num_stages=4)',
        "autotune: only config 1 of 4 (BLOCK_SIZE=128, num_warps=4) with num_stages=2":
            'triton.Config({"BLOCK_SIZE": 128}, num_warps=4, num_stages=2)',
    }
    for description, config in changed.items():
        assert by_description[description] == pinned(config), description
    # 4 pins + 4 configs x (warps up/down, stages up/down)
    assert len(found) == 4 + 16
    assert [v.description for v in variants(AUTOTUNE, 5)] == [v.description for v in found[:5]]


def test_long_autotune_lists_are_only_pinned_and_a_single_config_is_left_alone():
    configs = "".join(f'        triton.Config({{"BLOCK_SIZE": {b}}}, num_warps=4),\n' for b in (64, 128, 256, 512, 1024))
    long_list = AUTOTUNE.replace("".join(CONFIG_LINES[1:5]), configs)
    assert [v.description for v in variants(long_list, 100)] == [
        f"autotune: only config {i} of 5 (BLOCK_SIZE={b}, num_warps=4)" for i, b in
        enumerate((64, 128, 256, 512, 1024), 1)]
    single = AUTOTUNE.replace("".join(CONFIG_LINES[2:5]), "")
    assert [v.description for v in variants(single, 100)] == [
        "autotune: only config 1 of 1 (BLOCK_SIZE=128, num_warps=4) with num_warps=8",
        "autotune: only config 1 of 1 (BLOCK_SIZE=128, num_warps=4) with num_stages=4",
        "autotune: only config 1 of 1 (BLOCK_SIZE=128, num_warps=4) with num_warps=2",
        "autotune: only config 1 of 1 (BLOCK_SIZE=128, num_warps=4) with num_stages=2"]


# -- variants(): nothing to tune ---------------------------------------------------------------------
def test_unparseable_or_untunable_files_give_no_variants():
    assert variants("def broken(:\n    pass\n", 12) == []
    assert variants("\x00", 12) == []
    assert variants("x = " + "(" * 5000 + ")" * 5000 + "\n", 12) == []   # too deeply nested to parse
    nothing = kernel(body="add_kernel[(triton.cdiv(n, b),)](x, y, out, n, BLOCK=b)").replace(
        "    n = x.numel()\n", "    n = x.numel()\n    b = triton.next_power_of_2(min(n, 1024))\n")
    assert variants(nothing, 12) == []
    assert variants("import torch\n\ndef f(x):\n    return x * 2\n", 12) == []
    # a value that is not a power of two is not a block size
    odd = kernel(body="add_kernel[(triton.cdiv(n, 1000),)](x, y, out, n, BLOCK=1000)")
    assert variants(odd, 12) == []


# -- tune() with a fake judge ------------------------------------------------------------------------
class FakeTask:
    name = "fake"


def verdict(speedup: float | None, ci: tuple[float, float] | None = None, passed: bool = True,
            cid: str = "") -> Verdict:
    return Verdict(task="fake", candidate=cid, stage="passed" if passed else "correctness", call=True,
                   correct=passed, reason="ok" if passed else "values differ", speedup=speedup,
                   speedup_geomean=speedup, speedup_ci95=list(ci) if ci else None,
                   kind="passed" if passed else "wrong_values", candidate_id=cid,
                   stage_seconds={"total": 1.5})


class FakeJudge:
    """Answers by the variant's changed launch line: {marker in code: verdict} (None: never answers)."""

    def __init__(self, answers: dict[str, Verdict | None], delay: float = 0.0) -> None:
        self.answers, self.delay = answers, delay
        self.submitted: list[tuple[str, str | None]] = []
        self.futures: list[Future] = []

    def submit(self, task: Task, code: str, candidate_id: str | None = None) -> Future[Verdict]:
        self.submitted.append((code, candidate_id))
        future: Future = Future()
        self.futures.append(future)
        marker = next((m for m in self.answers if m in code), None)
        answer = self.answers.get(marker) if marker else verdict(None, passed=False)
        if answer is not None:
            def settle():
                if future.set_running_or_notify_cancel():
                    future.set_result(Verdict(**{**answer.__dict__, "candidate_id": candidate_id}))
            if self.delay:
                threading.Timer(self.delay, settle).start()
            else:
                settle()
        return future


def best_attempt(code: str = LAUNCH, speedup: float | None = 1.0) -> Attempt:
    return Attempt("fake", 0, 4, "optimize", 2, 3, code, strategy="one program per block", kind="passed",
                   stage="passed", call=True, correct=True, speedup=speedup, speedup_ci95=(0.95, 1.05))


def test_tune_keeps_the_fastest_variant_that_beats_the_original():
    judge = FakeJudge({"BLOCK=2048, num_warps=8": verdict(1.6, (1.5, 1.7)),
                       "BLOCK=2048, num_warps=4": verdict(1.3, (1.2, 1.4)),
                       "num_warps=8, num_stages=2": verdict(1.9, (0.8, 3.0)),   # fast but noisy: not kept
                       "BLOCK=512, num_warps=4": verdict(5.0, passed=False)})  # fast but wrong
    result = tune(FakeTask(), best_attempt(), judge, TuneBudget(max_variants=7), next_index=9, run=0)
    assert isinstance(result, TuneResult) and len(judge.submitted) == 7
    assert result.tried == 7 and result.passed == 3
    a = result.attempt
    assert a is not None and (a.mode, a.index, a.parent, a.line, a.run) == ("tune", 9, 4, 2, 0)
    assert a.strategy == "tuning: BLOCK=2048, num_warps=8" and "BLOCK=2048, num_warps=8" in a.code
    assert a.passed and a.speedup == 1.6 and a.speedup_ci95 == (1.5, 1.7) and a.tokens == 0 and a.cost_usd == 0
    assert a.candidate_id == judge.submitted[6][1] and a.candidate_id.startswith("fake-r0-tune9.6-")
    assert "speedup over the torch baseline: 1.600x" in a.feedback and a.judge_s == 1.5
    assert len({cid for _, cid in judge.submitted}) == 7
    assert len(result.notes) == 8
    assert result.notes[0] == "BLOCK=2048 -> passed / 1.300x (95% CI 1.200-1.400)"
    assert result.notes[3] == "BLOCK=512 -> wrong_values"
    assert result.notes[-1].startswith("kept BLOCK=2048, num_warps=8: 1.600x")


def test_tune_keeps_nothing_that_does_not_beat_the_original():
    # within noise of the original (interval reaches below it), or under the 1% floor
    judge = FakeJudge({"BLOCK=2048": verdict(1.2, (0.99, 1.4)), "num_warps=8": verdict(1.005, (1.001, 1.009)),
                       "num_stages=3": verdict(0.7, (0.6, 0.8))})
    result = tune(FakeTask(), best_attempt(), judge, TuneBudget(max_variants=3), 9, 0)
    assert result.attempt is None and result.tried == 3 and result.passed == 3
    assert result.notes[-1] == "no variant beats the original's 1.000x (attempt 4) by the keep rule"
    # without an interval, the 1% rule alone
    judge = FakeJudge({"BLOCK=2048": verdict(1.02)})
    assert tune(FakeTask(), best_attempt(), judge, TuneBudget(max_variants=1), 9, 0).attempt.speedup == 1.02


def test_tune_without_measured_speed_or_anything_to_tune_judges_nothing():
    judge = FakeJudge({})
    result = tune(FakeTask(), best_attempt(speedup=None), judge, TuneBudget(), 9, 0)
    assert result.attempt is None and result.tried == 0 and not judge.submitted
    assert "no measured speed" in result.notes[0] and "nothing can be kept" in result.notes[0]
    result = tune(FakeTask(), best_attempt("import torch\n"), judge, TuneBudget(), 9, 0)
    assert result.attempt is None and not judge.submitted and "no tunable launch parameter" in result.notes[0]
    result = tune(FakeTask(), best_attempt("def (:"), judge, TuneBudget(), 9, 0)
    assert "does not parse" in result.notes[0]
    failed = best_attempt()
    from dataclasses import replace
    result = tune(FakeTask(), replace(failed, kind="wrong_values"), judge, TuneBudget(), 9, 0)
    assert result.notes == ["no verified kernel to tune"] and not judge.submitted
    # variants that pass without timing: nothing can be kept
    judge = FakeJudge({"BLOCK=": verdict(None)})
    result = tune(FakeTask(), best_attempt(), judge, TuneBudget(max_variants=2), 9, 0)
    assert result.attempt is None and result.passed == 2 and "not measured" in result.notes[-1]


@pytest.mark.serial  # a 0.3 s budget measured on the wall clock (0.25-2 s)
def test_tune_respects_the_time_budget():
    judge = FakeJudge({"BLOCK=2048": verdict(1.5, (1.4, 1.6)), "num_warps=8": None, "num_stages=3": None})
    start = time.monotonic()
    result = tune(FakeTask(), best_attempt(), judge, TuneBudget(max_variants=3, max_seconds=0.3), 9, 0)
    assert time.monotonic() - start < 2
    assert result.tried == 1 and result.attempt is not None and result.attempt.speedup == 1.5
    assert result.notes[1] == "num_warps=8 -> not judged: the pass's 0.3 s budget ran out"
    assert all(f.cancelled() for f in judge.futures[1:])   # never started: they never will
    assert 0.25 < result.judge_seconds < 2
    # answers that come after the budget are not waited for
    slow = FakeJudge({"BLOCK=": verdict(2.0, (1.9, 2.1))}, delay=1.0)
    result = tune(FakeTask(), best_attempt(), slow, TuneBudget(max_variants=2, max_seconds=0.2), 9, 0)
    assert result.attempt is None and result.tried == 0 and len(slow.submitted) == 2


def test_tune_survives_a_judge_that_fails():
    class Closed(FakeJudge):
        def submit(self, task, code, candidate_id=None):
            future: Future = Future()
            future.set_exception(RuntimeError("the judge pool is closed"))
            return future

    result = tune(FakeTask(), best_attempt(), Closed({}), TuneBudget(max_variants=2), 9, 0)
    assert result.attempt is None and result.tried == 0
    assert "the judge could not decide" in result.notes[0]


# -- once for real: the CPU judge -------------------------------------------------------------------
@pytest.mark.slow
def test_tune_end_to_end_with_the_cpu_judge():
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.tasks import load_task_file

    quick_perf = JudgeOptions(seeds=1, perf=True, perf_blocks=3, block_ms=3, warmup_ms=3, min_calls_per_block=2,
                              max_perf_cases=1)
    task = load_task_file(TINY_ADD)
    code = kernel(body="add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024, num_warps=4)")
    with JudgePool("cpu", workers=2, options=quick_perf) as pool:
        pool.start()
        original = pool.submit(task, code, "tiny_add-original").result()
        assert original.passed and original.speedup is not None
        best = Attempt("tiny_add", 0, 0, "generate", 0, None, code, kind="passed").with_verdict(
            original, original.feedback())
        start = time.monotonic()
        result = tune(task, best, pool, TuneBudget(max_variants=3, max_seconds=120), next_index=1, run=0)
    assert time.monotonic() - start < 120
    assert isinstance(result, TuneResult) and result.tried == 3
    assert [n.split(" -> ")[0] for n in result.notes[:3]] == ["BLOCK=2048", "num_warps=8", "BLOCK=512"]
    assert result.passed == 3     # every variant is a correct kernel (BLOCK and the grid move together)
    if result.attempt is not None:
        assert result.attempt.mode == "tune" and result.attempt.passed and result.attempt.parent == 0
        assert result.attempt.speedup > original.speedup
