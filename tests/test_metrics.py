"""Metrics against hand-computed examples (no GPU, no torch)."""

import itertools
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from kernelwright.metrics import (  # noqa: E402
    Metric, TaskOutcome, best_of, call_accuracy, execution_accuracy, fast_p, format_table,
    geak_speedup, geomean_speedup, pass_at_k, pass_at_k_suite, summarize,
)

T = TaskOutcome
# 5 tasks: call 4/5, correct 3/5, speedups of the correct ones 2.0, 0.5, 1.6.
FIVE = [
    T("a", True, True, 2.0),
    T("b", True, True, 0.5),
    T("c", True, True, 1.6),
    T("d", True, False, None),
    T("e", False, False, None),
]
UNSUP = T.not_run("f", "unsupported", "bfloat16 needs a GPU")


def test_accuracies_by_hand():
    m = call_accuracy(FIVE)
    assert (m.numerator, m.denominator, m.value) == (4, 5, 0.8)
    assert m.denominator_note == "5 tasks"
    m = execution_accuracy(FIVE)
    assert (m.numerator, m.denominator, m.value) == (3, 5, 0.6)


def test_speedups_by_hand():
    m = geak_speedup(FIVE)
    assert m.denominator == 3 and m.value == pytest.approx((2.0 + 0.5 + 1.6) / 3)
    assert m.numerator == pytest.approx(4.1)
    assert m.denominator_note.startswith("3 correct tasks with a measured speedup, of 5 tasks")
    g = geomean_speedup(FIVE)
    assert g.denominator == 3 and g.value == pytest.approx(1.6 ** (1 / 3))  # 2 * 0.5 * 1.6 = 1.6


def test_speedup_none_without_correct_tasks():
    m = geak_speedup(FIVE[3:])
    assert m.value is None and m.denominator == 0
    assert geomean_speedup(FIVE[3:]).value is None


def test_fast_p_by_hand():
    # speedup > p strictly, over all 5 tasks: 2.0 is not fast_2.
    got = {p: fast_p(FIVE, p) for p in (0, 1, 1.5, 2)}
    assert {p: m.numerator for p, m in got.items()} == {0: 3, 1: 2, 1.5: 2, 2: 0}
    assert all(m.denominator == 5 for m in got.values())
    assert got[1.5].name == "fast_1.5" and got[1.5].value == pytest.approx(0.4)


def test_fast_p_untimed_correct_task():
    # A correct task without a measured speedup is fast for p = 0 only (fast_0 == exec accuracy).
    tasks = [T("a", True, True, None), T("b", True, True, 3.0)]
    assert fast_p(tasks, 0).numerator == 2 == execution_accuracy(tasks).numerator
    assert fast_p(tasks, 1).numerator == 1
    m = geak_speedup(tasks)
    assert m.denominator == 1 and "1 correct but untimed left out" in m.denominator_note


def test_nothing_timed_gives_none_with_why_not_zero():
    # correct tasks, none timed: fast_p (p > 0) is unknown, not "0% fast"; fast_0 is exec accuracy
    tasks = [T("a", True, True, None), T("b", True, False, None)]
    f1 = fast_p(tasks, 1)
    assert (f1.value, f1.numerator, f1.denominator, f1.why) == (None, None, 2, "no correct task was timed")
    assert fast_p(tasks, 0).value == 0.5 and fast_p(tasks, 0).why is None
    g = geak_speedup(tasks)
    assert (g.value, g.numerator, g.why) == (None, None, "no correct task was timed")
    assert geak_speedup(FIVE[3:]).why == "no correct task" and fast_p(FIVE[3:], 1).value == 0.0
    # a run known to time nothing: every speed metric None with that reason, even with no correct task
    s = {m.name: m for m in summarize({t.task: [t] for t in FIVE[3:]}, untimed="CPU interpreter").metrics}
    assert s["fast_1"].value is None and s["fast_1"].why == "nothing was timed (CPU interpreter)"
    assert s["fast_0"].value == 0.0 and s["GEAK speedup"].why == "nothing was timed (CPU interpreter)"
    assert "| fast_1 | n/a | -/2 | 2 tasks (nothing was timed (CPU interpreter)) |" in format_table(list(s.values()))
    # with a measured speedup, `untimed` changes nothing
    timed = {m.name: m for m in summarize({t.task: [t] for t in FIVE}, untimed="CPU interpreter").metrics}
    assert timed["fast_1"].numerator == 2 and timed["fast_1"].why is None


def test_unsupported_counted_as_failure_by_default():
    tasks = FIVE + [UNSUP]
    m = call_accuracy(tasks)
    assert (m.numerator, m.denominator) == (4, 6)
    assert m.denominator_note == "6 tasks; 1 unsupported counted as failures"
    assert execution_accuracy(tasks).denominator == 6
    assert fast_p(tasks, 1).denominator == 6


def test_unsupported_excluded_only_with_flag():
    tasks = FIVE + [UNSUP]
    m = call_accuracy(tasks, exclude_unsupported=True)
    assert (m.numerator, m.denominator) == (4, 5)
    assert m.denominator_note == "5 tasks; 1 unsupported excluded (--exclude-unsupported)"
    e = execution_accuracy(tasks, exclude_unsupported=True)
    assert (e.numerator, e.denominator) == (3, 5)


def test_unsupported_flags_ignore_stale_fields():
    # Even if an unsupported outcome claims call/correct, it is not judged, so it fails.
    odd = T("x", True, True, 9.0, status="unsupported", reason="no fp8 here")
    assert call_accuracy([odd]).numerator == 0
    assert geak_speedup([odd]).denominator == 0


def test_judge_error_and_missing_are_failures_in_denominator():
    grouped = {t.task: [t] for t in FIVE}
    grouped["g"] = [T.not_run("g", "judge_error", "reference crashed")]
    grouped["h"] = []  # no candidate at all
    for flag in (False, True):  # the flag only ever removes unsupported tasks
        m = execution_accuracy(grouped, exclude_unsupported=flag)
        assert (m.numerator, m.denominator) == (3, 7)
        assert "1 judge errors counted as failures" in m.denominator_note
        assert "1 missing counted as failures" in m.denominator_note


def test_reason_required():
    with pytest.raises(ValueError, match="needs a reason"):
        T("x", False, False, None, status="unsupported")
    with pytest.raises(ValueError, match="status must be"):
        T("x", False, False, None, status="skipped")


def test_best_of_several_candidates():
    cands = [T("a", True, True, 1.2), T("a", True, False, 5.0), T("a", True, True, 3.0),
             T.not_run("a", "judge_error", "worker lost")]
    b = best_of("a", cands)
    assert b.judged and b.call and b.correct and b.speedup == 3.0  # 5.0 was not correct
    # A flat list with repeated task names is grouped: one task, correct, speedup 3.0.
    assert execution_accuracy(cands).denominator == 1
    assert geak_speedup(cands).value == 3.0
    assert best_of("z", []).status == "missing"


def brute_pass_at_k(n, c, k):
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(samples[i] for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n,c", [(5, 2), (5, 1), (6, 3), (4, 4), (7, 0)])
def test_pass_at_k_matches_enumeration(n, c):
    for k in range(1, n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_hand_values_and_edges():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(10, 0, 3) == 0.0
    assert pass_at_k(10, 10, 3) == 1.0
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)  # large n stays stable
    with pytest.raises(ValueError, match="at least k=3 candidates"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def _cands(task, n, c, call=None):
    call = n if call is None else call
    return [T(task, i < max(c, call), i < c, 1.5 if i < c else None) for i in range(n)]


def test_pass_at_k_suite():
    grouped = {"t1": _cands("t1", 5, 2), "t2": _cands("t2", 5, 0, call=1), "t3": _cands("t3", 5, 5)}
    m = pass_at_k_suite(grouped, 2)
    assert m.denominator == 3 and m.value == pytest.approx((0.7 + 0 + 1) / 3)
    assert m.name == "pass@2"
    c = pass_at_k_suite(grouped, 1, criterion="call")
    assert c.value == pytest.approx((1 + 0.2 + 1) / 3) and c.name == "pass@1 (call)"
    grouped["t4"] = []  # missing: scores 0 and stays in the denominator
    m = pass_at_k_suite(grouped, 2)
    assert m.denominator == 4 and m.value == pytest.approx(1.7 / 4)
    with pytest.raises(ValueError, match="'t1'.*at least k=6"):
        pass_at_k_suite(grouped, 6)


def test_pass_at_k_suite_counts_a_run_without_candidate_as_a_failed_sample():
    # 3 runs, one stopped before it produced anything (a budget, or its task-run failed): n stays
    # 3 with that run failing, so pass@3 is defined and a lucky pair of runs is not all that counts
    grouped = {"t1": [T("t1", True, True, 1.2), T("t1", True, True, 1.1), T.not_run("t1", "missing")]}
    assert pass_at_k_suite(grouped, 3).value == pytest.approx(1.0)
    assert pass_at_k_suite(grouped, 1).value == pytest.approx(2 / 3)
    grouped = {"t1": [T("t1", True, True, 1.2), T.not_run("t1", "missing"), T.not_run("t1", "missing")]}
    assert pass_at_k_suite(grouped, 2).value == pytest.approx(1 - 1 / 3)


def test_pass_at_k_suite_unsupported():
    grouped = {"t1": _cands("t1", 4, 2), "f": [UNSUP]}
    assert pass_at_k_suite(grouped, 1).value == pytest.approx(0.5 / 2)  # unsupported scores 0
    m = pass_at_k_suite(grouped, 1, exclude_unsupported=True)
    assert m.denominator == 1 and m.value == pytest.approx(0.5)


def test_from_verdict_dict_and_object():
    d = {"task": "softmax", "candidate": "c0.py", "stage": "passed", "call": True, "correct": True,
         "reason": "", "speedup": 1.8, "speedup_geomean": 1.7, "cases": []}
    o = TaskOutcome.from_verdict(d)
    assert o == T("softmax", True, True, 1.8)
    err = TaskOutcome.from_verdict({**d, "stage": "judge_error", "reason": "reference raised"})
    assert (err.status, err.reason, err.correct, err.speedup) == ("judge_error", "reference raised", False, None)
    fail = TaskOutcome.from_verdict(SimpleNamespace(task="mm", stage="correctness", call=True,
                                                    correct=False, reason="mismatch", speedup=None))
    assert fail.judged and fail.call and not fail.correct
    un = TaskOutcome.from_verdict({"task": "fp8", "status": "unsupported", "reason": "needs sm90"})
    assert (un.status, un.reason) == ("unsupported", "needs sm90")


def test_summarize_and_table():
    grouped = {t.task: [t] for t in FIVE + [UNSUP]}
    s = summarize(grouped, ks=(1,))
    names = [m.name for m in s.metrics]
    assert names == ["call accuracy", "execution accuracy", "GEAK speedup", "geomean speedup",
                     "fast_0", "fast_1", "fast_1.5", "fast_2", "pass@1"]
    assert all(isinstance(m, Metric) for m in s.metrics)
    assert s.metrics[1].denominator == 6 and s.metrics[-1].value == pytest.approx(3 / 6)
    assert [(o.task, o.reason) for o in s.not_judged] == [("f", "bfloat16 needs a GPU")]
    table = format_table(s)
    assert "| execution accuracy | 0.5 | 3/6 | 6 tasks; 1 unsupported counted as failures |" in table
    assert "- f: unsupported: bfloat16 needs a GPU" in table
    sx = summarize(grouped, exclude_unsupported=True)
    assert sx.metrics[1].denominator == 5
    assert "- f: unsupported (excluded): bfloat16 needs a GPU" in format_table(sx)
    assert "| geomean speedup | 1.17 | -/3 |" in format_table(sx.metrics)


def test_no_torch_import():
    code = "import sys, kernelwright.metrics; assert 'torch' not in sys.modules, 'torch imported'"
    r = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(SRC)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
