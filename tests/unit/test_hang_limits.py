"""The worker's clock: compiling (between a child's compile notices) is bounded by its own
limit, running by a short one, autotuning adds an allowance up to a cap; forged notices buy at
most those bounds. The child's other end is played by the test (no fork)."""

import threading
import time

import pytest

from kernelwright.judge.common.options import JudgeOptions
from kernelwright.judge.sandbox.compilewatch import CompileWatch
from kernelwright.judge.worker.child_process import ChildFailure, running_limit

# Timeouts of 0.3-0.5 s that must fire within 1.5 s of wall clock: alone on the machine.
pytestmark = pytest.mark.serial


@pytest.fixture
def fake(fake_child):
    return fake_child


START, END, TUNE = {"op": "compile", "state": "start"}, {"op": "compile", "state": "end"}, {"op": "tune"}
DONE = {"op": "run", "ok": True}


def timed_out(child, *args, **kwargs) -> ChildFailure:
    with pytest.raises(ChildFailure) as caught:
        child.recv(*args, **kwargs)
    assert caught.value.kind == "timeout"
    return caught.value


def test_a_slow_compile_is_not_cut_off_by_the_running_limit(fake):
    child, play = fake
    child.compile_timeout = 5.0
    play((0.05, START), (0.8, END), (0.1, DONE))  # 0.8 s compiling, 0.15 s running
    assert child.recv(0.3, "testing") == DONE


def test_running_after_a_compile_is_still_bounded(fake):
    child, play = fake
    child.compile_timeout = 5.0
    play((0.0, START), (0.3, END), (2.0, DONE))  # then a hang
    start = time.monotonic()
    failure = timed_out(child, 0.3, "running case x")
    assert time.monotonic() - start < 1.5
    assert failure.reason.startswith("timed out after 0.3 s running (plus 0.3 s compiling), its running limit (")
    assert failure.described.endswith("? while running case x")  # what it was doing: once, by the caller
    assert "infinite loop" in failure.reason


def test_a_compile_that_never_ends_and_a_forged_start_are_bounded(fake):
    child, play = fake
    child.compile_timeout = 0.4
    play((0.0, START), (2.0, DONE))
    start = time.monotonic()
    failure = timed_out(child, 10.0, "running case x")
    assert time.monotonic() - start < 1.5
    assert "timed out after 0.4 s compiling Triton kernels, the compile limit" in failure.reason


def test_compile_time_is_per_reply_and_spans_add_up(fake):
    child, play = fake
    child.compile_timeout = 0.5
    play((0.0, START), (0.3, END), (0.0, START), (0.3, END), (0.0, DONE))  # 0.6 s in two spans
    assert "0.5 s compiling" in timed_out(child, 5.0, "x").reason


def test_tuning_adds_running_time_up_to_the_cap(fake):
    child, play = fake
    child.tune_config_s = 0.3
    play((0.0, TUNE), (0.0, TUNE), (0.0, TUNE), (0.7, DONE))
    assert child.recv(0.3, "testing", cap=2.0) == DONE
    play((0.0, TUNE), (0.0, TUNE), (0.0, TUNE), (0.7, DONE))  # a cap of 0.5 s allows less
    grown = timed_out(child, 0.3, "testing", cap=0.5).reason
    assert "timed out after 0.5 s running" in grown and "raised for the autotuner's configs" in grown
    assert child.conn.poll(1.0) and child.conn.recv_bytes()  # the late reply, given up on
    play((0.0, TUNE), (0.7, DONE))  # without a cap, no allowance
    assert "timed out after 0.3 s running" in timed_out(child, 0.3, "testing").reason


def test_lock_queueing_inside_a_compile_counts_for_neither(fake):
    child, play = fake
    child.compile_timeout = 0.3
    play((0.0, START), (0.1, {"op": "gpu_lock", "state": "waiting"}), (0.6, {"op": "gpu_lock", "state": "got"}),
         (0.1, END), (0.1, DONE))
    assert child.recv(0.3, "testing") == DONE


def test_a_malformed_notice_is_a_protocol_failure(fake):
    child, play = fake
    play((0.0, {"op": "compile", "state": "forever"}))
    with pytest.raises(ChildFailure) as caught:
        child.recv(2.0, "testing")
    assert caught.value.kind == "protocol" and "compile notice" in caught.value.reason


def test_the_running_limit_scales_from_the_reference():
    opts = JudgeOptions(run_timeout=30.0, run_timeout_factor=50.0)
    assert running_limit(opts, 300.0, None)[0] == 30.0
    assert running_limit(opts, 300.0, 0.01)[0] == 30.0
    limit, note = running_limit(opts, 300.0, 2.0)
    assert limit == 100.0 and "2 s on this item" in note
    assert running_limit(opts, 60.0, 2.0)[0] == 60.0  # the stage's cap
    assert running_limit(opts, 8.0, 1.0)[0] == 8.0  # never past the stage's cap


def test_compile_watch_tells_the_outermost_span_from_the_main_thread_only():
    told = []
    watch = CompileWatch(told.append)
    with watch.span():
        with watch.span():
            pass
        t = threading.Thread(target=lambda: watch.span().__enter__())
        t.start()
        t.join()
    watch.tuning_config()
    assert told == [START, END, TUNE]
    assert watch.seconds >= 0.0
