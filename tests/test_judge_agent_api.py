"""The judge's interface for agents: `JudgePool.submit` (source text in, a future verdict out),
a failure kind on every verdict (set from structured data, never from text the candidate can
write), and `Verdict.feedback`, the bounded text a reflector reads."""

import json
import stat
import time
from concurrent.futures import wait

import pytest

from kernelwright.judge import FailureKind, JudgeOptions, JudgePool, PoolClosed, Verdict
from kernelwright.judge.worker.compare import compare_outputs
from kernelwright.judge.coordinator.static import MAX_SOURCE_BYTES
from kernelwright.judge.common.verdict import FAILURE_KINDS, filter_traceback, shorten
from kernelwright.tasks import load_task_file, resolve_task

from .conftest import CANDIDATES, QUICK_PERF

VECTOR_ADD = CANDIDATES / "vector_add"
# candidate file -> the kind its verdict must carry (on the CPU interpreter)
KINDS = {
    "good": "passed",
    "syntax_error": "syntax_error",
    "no_entry": "missing_entry_point",
    "no_kernel": "no_triton_kernel",
    "raises_at_import": "import_error",
    "exit_at_import": "import_error",
    "compile_error": "compile_error",
    "raises": "runtime_error",
    "prints_pass": "wrong_values",
    "claims_out_of_memory": "wrong_values",  # prints torch's OOM message, is simply wrong
    "fake_oom_error": "runtime_error",  # raises its own class named OutOfMemoryError
    "wrong_shape": "wrong_shape_dtype",
    "wrong_dtype": "wrong_shape_dtype",
    "unwritten_output": "unwritten_output",
    "mutates_input": "mutated_input",
    "torch_fallback": "no_kernel_launch",
    "cached_by_pointer": "cached_result",
    "nondeterministic": "nondeterministic",
    "host_infinite_loop": "timeout",
    "os_exit": "crash",
    "abort": "crash",
    "segfault": "crash",
}


@pytest.fixture(scope="module")
def submitted():
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=1, seed=7, perf=False, load_timeout=60, call_timeout=4, case_timeout=4)
    with JudgePool("cpu", workers=2, options=options) as pool:
        futures = {name: pool.submit(task, (VECTOR_ADD / f"{name}.py").read_text(), candidate_id=f"id/{name}")
                   for name in KINDS}
        verdicts = {name: future.result(timeout=300) for name, future in futures.items()}
        sources = pool._sources
    return verdicts, sources


@pytest.mark.slow
@pytest.mark.parametrize("name", list(KINDS))
def test_every_verdict_has_the_right_kind(submitted, name):
    verdict = submitted[0][name]
    assert verdict.kind == KINDS[name], f"{name}: {verdict.stage} {verdict.kind}: {verdict.reason}"
    assert verdict.kind in FAILURE_KINDS
    assert verdict.candidate_id == f"id/{name}"


@pytest.mark.slow
def test_the_failing_case_carries_the_kind(submitted):
    verdict = submitted[0]["wrong_shape"]
    failing = [c for c in verdict.cases if c.ok is False]
    assert failing and failing[0].failure == "wrong_shape_dtype"


@pytest.mark.slow
def test_submitted_sources_are_private_and_removed_on_close(submitted):
    _, sources = submitted
    assert sources is not None and not sources.exists()  # the pool removed its directory at close
    assert stat.S_IMODE(sources.parent.stat().st_mode) == 0o700


@pytest.mark.slow
def test_a_crash_says_what_the_process_printed_last(submitted):
    verdict = submitted[0]["abort"]
    assert "double free or corruption" in verdict.reason
    assert "case 1000 float32 (seed" in verdict.reason  # and which case it was running
    assert "double free or corruption" in verdict.feedback()


@pytest.mark.slow
def test_detail_shows_the_candidate_frames_not_the_harness(submitted):
    verdict = submitted[0]["raises"]
    assert "raises-" in verdict.detail and "raise ValueError" in verdict.detail
    assert "kernelwright/judge/" not in verdict.detail  # no harness frame, whichever module
    assert "ValueError: block size must be a power of two" in verdict.detail


@pytest.mark.slow
def test_feedback_is_compact_and_names_what_failed(submitted):
    verdicts = submitted[0]
    wrong = verdicts["prints_pass"].feedback()
    assert "stage correctness (kind wrong_values)" in wrong
    assert "failing case: correctness 1000 float32" in wrong and "seeds [7]" in wrong
    assert "max abs error" in wrong and "elements wrong" in wrong
    hung = verdicts["host_infinite_loop"].feedback()
    assert "host_infinite_loop-" in hung and "kernelwright/judge" not in hung  # its own frame, not ours
    for verdict in verdicts.values():
        text = verdict.feedback(max_chars=600)
        assert len(text) <= 600 and f"kind {verdict.kind}" in text.splitlines()[0]
    assert verdicts["good"].feedback().startswith("verdict: passed")


def test_submit_after_close_raises_pool_closed():
    task = resolve_task("vector_add")
    pool = JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, perf=False))
    pool.close()
    future = pool.submit(task, (VECTOR_ADD / "good.py").read_text())
    with pytest.raises(PoolClosed):
        future.result(timeout=5)


@pytest.mark.slow
@pytest.mark.parametrize("started", [False, True], ids=["while-workers-start", "while-judging"])
def test_closing_settles_every_waiting_submission(started):
    """Submissions queued behind the workers when the pool closes raise PoolClosed; none hangs
    and none gets a verdict it was never judged for."""
    task = resolve_task("vector_add")
    slow = (VECTOR_ADD / "host_infinite_loop.py").read_text()
    pool = JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, perf=False, call_timeout=30))
    if started:
        pool.start()
    futures = [pool.submit(task, slow) for _ in range(4)]
    time.sleep(1.0)
    pool.close()
    done, not_done = wait(futures, timeout=30)
    assert not not_done
    for future in futures:
        with pytest.raises(PoolClosed):
            future.result()


def test_source_over_the_limit_is_a_static_verdict():
    task = resolve_task("vector_add")
    huge = "x = 1\n" * (MAX_SOURCE_BYTES // 6 + 10)
    with JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, perf=False)) as pool:
        verdict = pool.submit(task, huge, candidate_id="huge").result(timeout=30)
        not_text = pool.submit(task, b"def vector_add(): pass").result(timeout=30)
    assert verdict.stage == "static" and verdict.kind == "too_large" and verdict.candidate_id == "huge"
    assert not_text.stage == "static" and not_text.kind == "syntax_error"


@pytest.mark.slow
def test_perf_stage_failures_have_kinds():
    task = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
    options = JudgeOptions(seeds=1, seed=3, **QUICK_PERF)
    with JudgePool("cpu", workers=2, options=options) as pool:
        cached, cheat = pool.judge_many([(task, CANDIDATES / "tiny_add" / "cached_in_timing.py"),
                                         (task, CANDIDATES / "tiny_add" / "perf_size_cheat.py")])
    assert (cached.stage, cached.kind) == ("performance", "cached_result"), cached.reason
    assert (cheat.stage, cheat.kind) == ("performance", "perf_mismatch"), cheat.reason
    assert cheat.candidate_id  # judge_many's verdicts get ids too


def test_stored_verdicts_read_back_the_same_and_a_kind_is_required():
    stored = {"task": "t", "candidate": "c.py", "stage": "correctness", "call": True, "correct": False,
              "reason": "x", "cases": [{"kind": "correctness", "label": "a", "params": {}, "ok": False}],
              "kind": "wrong_values"}
    verdict = Verdict.from_dict(stored)
    assert verdict.kind is FailureKind.WRONG_VALUES and verdict.candidate_id == "" and verdict.cases[0].failure == ""
    # the JSON of a verdict is what it was when kinds were strings: the kind's value
    text = json.dumps(verdict.to_dict())
    assert json.loads(text)["kind"] == "wrong_values"
    again = Verdict.from_dict(json.loads(text))
    assert again == verdict and json.dumps(again.to_dict()) == text
    assert Verdict("t", "c", "static", False, False, "r", kind="syntax_error").kind is FailureKind.SYNTAX_ERROR
    # a verdict stored before verdicts had kinds is no longer given one from its stage
    for old in ({k: v for k, v in stored.items() if k != "kind"}, dict(stored, kind="")):
        with pytest.raises(ValueError, match="without a kind"):
            Verdict.from_dict(old)
    with pytest.raises(ValueError):
        Verdict.from_dict(dict(stored, kind="no_such_kind"))
    with pytest.raises(TypeError):
        Verdict("t", "c", "static", False, False, "r")  # every verdict is given its kind


def test_feedback_cuts_the_middle_of_long_text():
    text = "start " + "x" * 5000 + " end"
    short = shorten(text, 300)
    assert len(short) <= 300 and short.startswith("start") and short.endswith("end") and "cut" in short
    verdict = Verdict("t", "/c.py", "call", False, False, "r" * 10_000, kind="runtime_error")
    assert len(verdict.feedback(1000)) <= 1000


def test_traceback_filter_keeps_the_chosen_frames_only():
    tb = ('Traceback (most recent call last):\n'
          '  File "/lib/kernelwright/judge/child.py", line 10, in run\n'
          '    fn(*args)\n'
          '  File "/c.py", line 3, in f\n'
          '    raise ValueError("bad")\n'
          '    ^^^^^^^^^^^^^^^^^^^^^^^\n'
          'ValueError: bad\n')
    kept = filter_traceback(tb, lambda path: path == "/c.py")
    assert "child.py" not in kept and "  [1 other frame(s) omitted]" in kept
    assert '  File "/c.py", line 3, in f\n    raise ValueError("bad")' in kept and kept.endswith("ValueError: bad")


def test_unwritten_output_is_told_by_the_poison_bytes_not_by_nan():
    import torch

    ref = torch.ones(8)
    poisoned = ref.clone()
    poisoned.view(torch.uint8)[:8] = 0xFF  # two elements never written
    computed_nan = ref.clone()
    computed_nan[:2] = float("nan")  # a NaN the kernel computed (0x7FC00000)
    meta = [{"shape": [8], "dtype": "float32"}]

    def tolerance(dtype):
        return type("T", (), {"atol": 1e-5, "rtol": 1e-5})

    assert compare_outputs([poisoned], [ref], meta, tolerance).kind == "unwritten_output"
    assert compare_outputs([computed_nan], [ref], meta, tolerance).kind == "wrong_values"
    ints = torch.arange(4, dtype=torch.int32)
    assert compare_outputs([torch.full((4,), -1, dtype=torch.int32)], [ints], [{"shape": [4], "dtype": "int32"}],
                           tolerance).kind == "unwritten_output"


def test_error_kinds_come_from_the_exception_classes_the_child_reports():
    """The GPU-only kinds (the CPU interpreter cannot produce them), from the child's structured
    fields: class names with their bases and causes, the device error code, a broken context."""
    from triton.compiler.errors import CompileTimeAssertionFailure

    from kernelwright.judge.sandbox.replies import exception_types
    from kernelwright.judge.worker.failures import error_kind

    def reply(exc, **extra):
        return {"ok": False, "error": str(exc), "error_types": exception_types(exc), **extra}

    try:
        try:
            raise CompileTimeAssertionFailure(None, None, "BLOCK must be 16")
        except Exception as inner:
            raise RuntimeError("autotuning failed") from inner
    except RuntimeError as exc:
        wrapped = exc
    assert error_kind(reply(wrapped), importing=False) == "compile_error"  # found through the cause
    assert error_kind(reply(MemoryError()), importing=False) == "out_of_memory"
    import torch

    oom = torch.OutOfMemoryError("CUDA out of memory")
    assert "torch.OutOfMemoryError" in exception_types(oom)
    assert error_kind(reply(oom), importing=False) == "out_of_memory"
    assert error_kind(reply(RuntimeError("CUDA error: out of memory"), error_code=2), importing=False) == "out_of_memory"
    fault = reply(RuntimeError("CUDA error: an illegal memory access was encountered"), device_fault=True)
    assert error_kind(fault, importing=False) == "gpu_fault"
    text_only = reply(RuntimeError("CUDA error: an illegal memory access; CUDA out of memory; CompilationError"))
    assert error_kind(text_only, importing=False) == "runtime_error"  # the message is never read
    assert error_kind(text_only, importing=True) == "import_error"
    forged = {"ok": False, "error_types": "torch.OutOfMemoryError", "device_fault": "yes"}  # not a list, not True
    assert error_kind(forged, importing=False) == "runtime_error"
