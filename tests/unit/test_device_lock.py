"""The per-GPU reader-writer lock: timing (exclusive) must not starve behind a stream of
correctness checks (shared), and shared holders still overlap each other."""

import threading
import time

import pytest

from kernelwright.judge.common.gpulock import device_lock

# Sub-second windows on the wall clock (a writer's patience, drains, nudges): alone on the machine.
pytestmark = pytest.mark.serial


@pytest.fixture(autouse=True)
def _restore_compiled_kernel(monkeypatch):
    """`release_during_compile` wraps `CompiledKernel._init_handles` for good (in a child, that is
    what it is for); each test here gets the class back as it was."""
    from triton.compiler.compiler import CompiledKernel

    monkeypatch.setattr(CompiledKernel, "_init_handles", CompiledKernel.__dict__["_init_handles"])


def test_writer_lets_readers_pass_for_a_while_then_goes_first(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr("kernelwright.judge.common.gpulock.WRITER_PATIENCE_S", 0.5)
    order = []
    first_reader_in = threading.Event()
    release_first = threading.Event()

    def first_reader():
        with device_lock("cuda", exclusive=False):
            order.append("reader 1 in")
            first_reader_in.set()
            release_first.wait(5)
        order.append("reader 1 out")

    def writer():
        with device_lock("cuda", exclusive=True):
            order.append("writer in")
            time.sleep(0.05)
            order.append("writer out")

    def reader(n):
        with device_lock("cuda", exclusive=False):
            order.append(f"reader {n} in")

    threads = [threading.Thread(target=first_reader)]
    threads[0].start()
    assert first_reader_in.wait(5)
    threads.append(threading.Thread(target=writer))
    threads[1].start()
    time.sleep(0.1)  # the writer waits patiently: a reader arriving now still gets in
    threads.append(threading.Thread(target=reader, args=(2,)))
    threads[2].start()
    threads[2].join(2)
    assert "reader 2 in" in order and "writer in" not in order
    time.sleep(0.8)  # patience spent: the writer holds the turnstile, later readers queue behind it
    threads.append(threading.Thread(target=reader, args=(3,)))
    threads[3].start()
    time.sleep(0.2)
    assert "reader 3 in" not in order
    release_first.set()
    for t in threads:
        t.join(5)
    assert order.index("writer out") < order.index("reader 3 in")


def test_readers_share(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    inside = threading.Barrier(2, timeout=5)

    def reader():
        with device_lock("cuda", exclusive=False):
            inside.wait()  # both readers must be inside at once, or this times out

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(6)
    assert not inside.broken


def _exclusive_now(path) -> bool:
    """Could anyone take the lock exclusively right now?"""
    import fcntl

    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True


def test_a_child_holds_the_gpu_shared_around_its_work_but_not_while_compiling(monkeypatch, tmp_path):
    import triton.compiler

    from kernelwright.judge.common import gpulock
    from kernelwright.judge.sandbox import triton_hooks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    lock_file = gpulock.lock_base() + ".lock"
    synced = []
    seen_during_compile = []

    def fake_compile(src, **kwargs):
        seen_during_compile.append(_exclusive_now(lock_file))
        time.sleep(0.05)
        return f"compiled {src}"

    monkeypatch.setattr(triton.compiler, "compile", fake_compile)
    hold = gpulock.SharedHold("cuda", lambda: synced.append(True))
    assert triton_hooks.release_during_compile(hold)
    assert triton_hooks.release_during_compile(hold)  # installing twice wraps once

    assert _exclusive_now(lock_file)
    with hold.hold(True):
        assert not _exclusive_now(lock_file)  # a timing turn cannot start during our GPU work
        assert triton.compiler.compile("k", target=None) == "compiled k"
        assert seen_during_compile == [True]  # ...but can while we only compile
        assert hold.held and not _exclusive_now(lock_file)  # taken again for the work after it
    assert _exclusive_now(lock_file)
    assert len(synced) == 2  # queued GPU work finished before each let-go
    stats = hold.take_stats()
    assert stats["compile_s"] >= 0.05
    assert {k: v for k, v in hold.take_stats().items() if k != "longest_hold"} == {"wait_s": 0.0, "compile_s": 0.0, "yield_s": 0.0}

    # inside the worker's exclusive turn a request takes nothing, so compiling releases nothing
    with hold.hold(False):
        triton.compiler.compile("k2", target=None)
    assert seen_during_compile == [True, True] and hold.take_stats()["compile_s"] == 0.0


def test_a_waiting_timing_turn_gets_the_gpu_while_a_check_compiles(monkeypatch, tmp_path):
    """The point of releasing: a writer does not wait for a long compilation to finish."""
    import triton.compiler

    from kernelwright.judge.common import gpulock
    from kernelwright.judge.sandbox import triton_hooks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(gpulock, "WRITER_PATIENCE_S", 0.0)
    compiling = threading.Event()
    writer_done = threading.Event()

    def slow_compile(src, **kwargs):
        compiling.set()
        assert writer_done.wait(5), "the writer never got the GPU during the compilation"
        return src

    monkeypatch.setattr(triton.compiler, "compile", slow_compile)
    hold = gpulock.SharedHold("cuda", lambda: None)
    triton_hooks.release_during_compile(hold)

    def writer():
        assert compiling.wait(5)
        with device_lock("cuda", exclusive=True):
            writer_done.set()

    t = threading.Thread(target=writer)
    t.start()
    with hold.hold(True):
        triton.compiler.compile("k")
    t.join(5)
    assert writer_done.is_set()


def test_time_queued_for_the_gpu_does_not_count_against_a_timeout(fake_child):
    from kernelwright.judge.worker.child_process import ChildFailure

    child, play = fake_child
    play((0.05, {"op": "gpu_lock", "state": "waiting"}), (0.6, {"op": "gpu_lock", "state": "got"}),
         (0.1, {"op": "run", "ok": True}))
    assert child.recv(0.3, "testing") == {"op": "run", "ok": True}

    play((0.6, {"op": "run", "ok": True}))  # the same time spent working: too slow
    try:
        child.recv(0.3, "testing")
        raise AssertionError("expected a timeout")
    except ChildFailure as exc:
        assert exc.kind == "timeout" and "timed out after 0.3 s" in exc.reason


def test_a_forged_wait_notice_cannot_stop_the_clock_for_good(monkeypatch, fake_child):
    from kernelwright.judge.worker.child_process import ChildFailure

    monkeypatch.setattr("kernelwright.judge.worker.child_process.MAX_LOCK_CREDIT_S", 0.4)
    child, play = fake_child
    sender = play((0.0, {"op": "gpu_lock", "state": "waiting"}), (1.0, {"op": "run", "ok": True}))
    start = time.monotonic()
    try:
        child.recv(0.2, "testing")
        raise AssertionError("expected a timeout")
    except ChildFailure as exc:
        assert exc.kind == "timeout" and "waited more than 0.4 s for the GPU" in exc.reason
    assert time.monotonic() - start < 0.95
    sender.join(5)


def test_a_long_check_lets_a_waiting_timer_in_between_its_runs(monkeypatch, tmp_path):
    from kernelwright.judge.common import gpulock

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(gpulock, "WRITER_PATIENCE_S", 0.0)
    order = []
    hold = gpulock.SharedHold("cuda", lambda: None, on_wait=lambda state: order.append(f"check {state}"))
    writer_waiting = threading.Event()

    def writer():
        writer_waiting.set()
        with device_lock("cuda", exclusive=True):
            order.append("timer in")

    with hold.hold(True):
        order.append("run 1")
        t = threading.Thread(target=writer)
        t.start()
        assert writer_waiting.wait(5)
        time.sleep(0.2)  # the timer now queues behind this check
        assert "timer in" not in order
        hold.yield_turn()
        order.append("run 2")
    t.join(5)
    assert order.index("timer in") < order.index("run 2"), order
    assert order[order.index("run 1") + 1:].count("check waiting") <= 1


def test_writer_reports_how_long_it_drained_readers_at_the_turnstile(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr("kernelwright.judge.common.gpulock.WRITER_PATIENCE_S", 0.2)
    with device_lock("cuda", exclusive=True) as drained:
        assert drained == 0.0  # free at once: no turnstile
    reader_in, release = threading.Event(), threading.Event()

    def reader():
        with device_lock("cuda", exclusive=False):
            reader_in.set()
            release.wait(5)

    thread = threading.Thread(target=reader)
    thread.start()
    assert reader_in.wait(5)
    threading.Timer(0.6, release.set).start()  # the reader leaves 0.4 s after the patience ran out
    with device_lock("cuda", exclusive=True) as drained:
        assert 0.25 < drained < 2.0
    thread.join(5)


@pytest.mark.parametrize("yields", [True, False])
def test_a_check_steps_aside_at_its_next_launch_for_a_waiting_timer(monkeypatch, tmp_path, yields):
    """A shared holder in the middle of a long check (a GEAK test function launches many kernels)
    lets a timing turn in at its next kernel launch instead of at the end of the check."""
    from kernelwright.judge.common.gpulock import SharedHold

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr("kernelwright.judge.common.gpulock.WRITER_PATIENCE_S", 0.1)
    notices = []
    hold = SharedHold("cuda", lambda: None, notices.append, can_yield=lambda: yields)
    writer_in = []
    start = time.monotonic()

    def writer():
        with device_lock("cuda", exclusive=True):
            writer_in.append(time.monotonic() - start)
            time.sleep(0.1)

    with hold.hold(True):
        thread = threading.Thread(target=writer)
        thread.start()
        while time.monotonic() - start < 2.0:  # a 2 s check launching a kernel every 5 ms
            hold.yield_if_timer_waits()
            time.sleep(0.005)
        check_done = time.monotonic() - start
    thread.join(5)
    if yields:
        assert writer_in[0] < 0.6 and hold.take_stats()["yield_s"] >= 0.05  # it queued behind the turn
        assert notices[:2] == ["waiting", "got"]  # the worker's clock stopped while it queued
    else:  # a launch inside a graph capture never yields: the timer waits for the check
        assert writer_in[0] >= check_done - 0.05 and hold.take_stats()["yield_s"] == 0


def test_the_longest_stretch_held_without_a_look_is_reported_with_what_it_did(monkeypatch, tmp_path):
    """A check that holds the GPU for a long stretch without looking at the turnstile (no kernel
    launch, no release) keeps a waiting timing turn and every check queued behind it waiting: the
    hold reports its longest such stretch and what the process was doing from start to end."""
    from kernelwright.judge.common.gpulock import SharedHold

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    hold = SharedHold("cuda", lambda: None)
    hold.doing = "reference spot of case 3: making its inputs"
    with hold.hold(True):
        time.sleep(0.15)  # long CPU work under the hold
        hold.doing = "reference spot of case 3: the call"
        hold.yield_if_timer_waits()  # a launch: a look at the turnstile ends the stretch
        for _ in range(3):
            time.sleep(0.03)
            hold.yield_if_timer_waits()
    stats = hold.take_stats()
    assert 0.15 <= stats["longest_hold"]["seconds"] < 0.3
    assert stats["longest_hold"]["doing"] == ("from reference spot of case 3: making its inputs "
                                              "to reference spot of case 3: the call")
    assert "longest_hold" not in hold.take_stats()  # reset with the other counters


def test_a_stretch_that_starts_after_a_compile_says_so(monkeypatch, tmp_path):
    import triton.compiler

    from kernelwright.judge.common import gpulock
    from kernelwright.judge.sandbox import triton_hooks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(triton.compiler, "compile", lambda src, **kwargs: f"compiled {src}")
    hold = gpulock.SharedHold("cuda", lambda: None)
    assert triton_hooks.release_during_compile(hold)
    hold.doing = "candidate spot of case 0: the call"
    with hold.hold(True):
        triton.compiler.compile("k", target=None)
        time.sleep(0.1)  # loading the kernel, its first run...
    assert hold.take_stats()["longest_hold"]["doing"] == ("from candidate spot of case 0: the call (after a compile) "
                                                          "to candidate spot of case 0: the call")


def test_a_check_running_python_without_launches_is_nudged_to_let_a_timer_in(monkeypatch, tmp_path):
    """A check that runs Python for seconds with no kernel launch (a test function's torch loops)
    takes no look by itself: the watcher thread sees the timer waiting and nudges the main thread,
    whose signal handler steps aside between two bytecodes."""
    from kernelwright.judge.common.gpulock import SharedHold

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr("kernelwright.judge.common.gpulock.WRITER_PATIENCE_S", 0.1)
    import signal

    previous = signal.getsignal(signal.SIGRTMIN + 3)
    hold = SharedHold("cuda", lambda: None)
    try:
        assert hold.start_nudging()
        assert not hold.start_nudging()  # one watcher per hold
        writer_in = []
        start = time.monotonic()

        def writer():
            with device_lock("cuda", exclusive=True):
                writer_in.append(time.monotonic() - start)

        with hold.hold(True):
            thread = threading.Thread(target=writer)
            thread.start()
            total = 0
            while time.monotonic() - start < 2.0:  # 2 s of Python, no launch
                total += sum(range(1000))
        thread.join(5)
        assert writer_in and writer_in[0] < 0.8, writer_in
        stats = hold.take_stats()
        assert hold.nudges >= 1 and stats["yield_s"] > 0
    finally:
        signal.signal(signal.SIGRTMIN + 3, previous)


def test_nudging_can_be_turned_off(monkeypatch):
    from kernelwright.judge.common.gpulock import SharedHold

    monkeypatch.setenv("KERNELWRIGHT_NO_NUDGE", "1")
    assert not SharedHold("cuda", lambda: None).start_nudging()
    monkeypatch.delenv("KERNELWRIGHT_NO_NUDGE")
    assert not SharedHold("cpu", lambda: None).start_nudging()  # nothing to hold on the CPU


def test_writer_patience_comes_from_the_environment_and_bad_values_say_so(monkeypatch):
    from kernelwright.judge.common import gpulock

    monkeypatch.delenv("KERNELWRIGHT_WRITER_PATIENCE_S", raising=False)
    assert gpulock._writer_patience() == 0.5
    monkeypatch.setenv("KERNELWRIGHT_WRITER_PATIENCE_S", "2")
    assert gpulock._writer_patience() == 2.0
    for bad in ("soon", "-1", "1e9"):
        monkeypatch.setenv("KERNELWRIGHT_WRITER_PATIENCE_S", bad)
        with pytest.raises(ValueError, match="KERNELWRIGHT_WRITER_PATIENCE_S"):
            gpulock._writer_patience()


def test_a_kernels_launcher_is_built_outside_the_lock(monkeypatch, tmp_path):
    """Triton builds a kernel's launcher (a C extension, with the system's C compiler) and loads
    its binary at the kernel's first run, after `compile` returned: that too is CPU work, done
    with the lock let go. A kernel already loaded takes no detour."""
    import triton.compiler
    from triton.compiler.compiler import CompiledKernel

    from kernelwright.judge.common import gpulock
    from kernelwright.judge.sandbox import triton_hooks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(triton.compiler, "compile", lambda src, **kwargs: src)
    lock_file = gpulock.lock_base() + ".lock"
    seen = []

    def fake_init_handles(self):
        seen.append(_exclusive_now(lock_file))
        if self.module is None:
            time.sleep(0.02)  # the C compiler
        self.module = "loaded"

    monkeypatch.setattr(CompiledKernel, "_init_handles", fake_init_handles)
    synced = []
    hold = gpulock.SharedHold("cuda", lambda: synced.append(True))
    assert triton_hooks.release_during_compile(hold)
    assert triton_hooks.release_during_compile(hold)  # installing twice wraps once

    class Kernel:
        module = None

    kernel = Kernel()
    with hold.hold(True):
        CompiledKernel._init_handles(kernel)  # first run: built and loaded with the lock let go
        assert seen == [True] and hold.held and not _exclusive_now(lock_file)
        CompiledKernel._init_handles(kernel)  # loaded: straight through, still held
        assert seen == [True, False]
    assert len(synced) == 2  # let go once, after a synchronise; the release at the end is the other
    assert hold.take_stats()["compile_s"] > 0


def test_nothing_is_let_go_inside_a_cuda_graph_capture(monkeypatch, tmp_path):
    """A synchronise during a capture would break it: a compile there runs under the hold."""
    import triton.compiler

    from kernelwright.judge.common import gpulock
    from kernelwright.judge.sandbox import triton_hooks

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    lock_file = gpulock.lock_base() + ".lock"
    seen = []
    monkeypatch.setattr(triton.compiler, "compile", lambda src, **kwargs: seen.append(_exclusive_now(lock_file)))
    capturing = [True]
    synced = []
    hold = gpulock.SharedHold("cuda", lambda: synced.append(True), can_yield=lambda: not capturing[0])
    triton_hooks.release_during_compile(hold)
    with hold.hold(True):
        triton.compiler.compile("k")
        capturing[0] = False
        triton.compiler.compile("k")
    assert seen == [False, True]


def _drain_reports(monkeypatch, tmp_path, exclusive: bool) -> tuple[list, float, int]:
    """Another process holds the GPU lock (shared, waiting on a `sleep` child, or exclusive) for
    1.5 s while this one takes it exclusively with a 0.3 s drain report: (reports, drained, its pid)."""
    import os
    import subprocess
    import sys

    from kernelwright.judge.common import gpulock

    if not os.path.exists("/proc/locks"):
        pytest.skip("no /proc/locks here")
    visible = f"lock-test-{time.time_ns()}"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr(gpulock, "WRITER_PATIENCE_S", 0.0)
    monkeypatch.setattr(gpulock, "DRAIN_REPORT_S", 0.3)
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, pathlib, subprocess, tempfile\n"
        f"tempfile.tempdir = {str(tmp_path)!r}\n"
        f"os.environ['CUDA_VISIBLE_DEVICES'] = {visible!r}\n"
        "from kernelwright.judge.common.gpulock import device_lock\n"
        f"with device_lock('cuda', exclusive={exclusive}):\n"
        "    compiler = subprocess.Popen(['sleep', '1.5'])\n"
        f"    pathlib.Path({str(ready)!r}).touch()\n"
        "    compiler.wait()\n")])
    try:
        deadline = time.time() + 30
        while not ready.exists() and time.time() < deadline:
            time.sleep(0.02)
        assert ready.exists()
        reports = []
        with device_lock("cuda", exclusive=True, on_long_drain=reports.append) as drained:
            pass
        return reports, drained, holder.pid
    finally:
        holder.wait(30)


def test_a_long_drain_names_the_readers_it_waits_for(monkeypatch, tmp_path):
    """A timing turn that drains for long says which processes hold the GPU shared and what the
    kernel says they are doing: a check waiting for a compiler shows it as a child process."""
    reports, drained, pid = _drain_reports(monkeypatch, tmp_path, exclusive=False)
    assert drained >= 0.3
    assert len(reports) == 1 and len(reports[0]) == 1, reports
    assert reports[0][0].startswith(f"pid {pid} (") and "children: sleep" in reports[0][0], reports


def test_a_drain_behind_another_timing_turn_says_so(monkeypatch, tmp_path):
    """A writer queued behind another worker's exclusive turn is not draining slow checks: the
    report names the holder as a timing turn."""
    reports, _, pid = _drain_reports(monkeypatch, tmp_path, exclusive=True)
    assert len(reports) == 1 and reports[0][0].startswith(f"the timing turn of pid {pid} ("), reports


def _hold_exclusively_in_a_process(gpulock):
    """A process that takes this GPU's lock exclusively (a timing turn, for the lock table) and
    holds it until its stdin closes; returns it once it holds the lock."""
    import subprocess
    import sys

    base = gpulock.lock_base()
    code = ("import fcntl, sys; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, base + ".lock"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_timing_turn_elsewhere_is_seen_in_the_lock_table_and_our_own_tree_is_not(monkeypatch, tmp_path):
    import os

    from kernelwright.judge.common import gpulock, lockholders

    if not lockholders.flocks_listed():
        pytest.skip("/proc/locks does not list flocks here")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    lock, turnstile = gpulock._open_lock_files()  # the files exist, nobody holds them
    try:
        assert lockholders.timing_turn_elsewhere({os.getpid()}) is False
        holder = _hold_exclusively_in_a_process(gpulock)
        try:
            assert lockholders.timing_turn_elsewhere({os.getpid()}) is True
            # the same hold by a process of the worker's own tree (a candidate's) is no timing turn
            assert lockholders.timing_turn_elsewhere({os.getpid(), holder.pid}) is False
        finally:
            holder.stdin.close()
            holder.wait(5)
        with device_lock("cuda", exclusive=False):  # a shared hold (a check) is no timing turn either
            assert lockholders.timing_turn_elsewhere(set()) is False
    finally:
        lock.close()
        turnstile.close()


def test_waiting_for_the_gpu_is_believed_only_while_another_timing_turn_holds_it(monkeypatch, fake_child):
    from kernelwright.judge.worker import child_process as channel
    from kernelwright.judge.worker.child_process import ChildFailure

    monkeypatch.setattr(channel, "LOCK_CHECK_S", 0.05)
    child, play = fake_child
    seen = {"turn": True}
    child.turn_elsewhere = lambda: seen["turn"]
    play((0.0, {"op": "gpu_lock", "state": "waiting"}), (0.6, {"op": "gpu_lock", "state": "got"}),
         (0.1, {"op": "run", "ok": True}))
    assert child.recv(0.3, "testing") == {"op": "run", "ok": True}  # 0.6 s queued behind a real turn

    seen["turn"] = False  # the same claim with no timing turn anywhere: the clock keeps running
    sender = play((0.0, {"op": "gpu_lock", "state": "waiting"}), (1.0, {"op": "run", "ok": True}))
    start = time.monotonic()
    with pytest.raises(ChildFailure) as failed:
        child.recv(0.3, "testing")
    assert failed.value.kind == "timeout" and "timed out after 0.3 s running" in failed.value.reason
    assert "said it was queueing for the GPU while no other timing turn held it" in failed.value.reason
    assert time.monotonic() - start < 0.8
    sender.join(5)
    assert child.conn.poll(2) and child.conn.recv_bytes()  # the late reply of the child given up on

    seen["turn"] = None  # where the lock table cannot be read, the notice is believed as before
    play((0.0, {"op": "gpu_lock", "state": "waiting"}), (0.6, {"op": "gpu_lock", "state": "got"}),
         (0.1, {"op": "run", "ok": True}))
    assert child.recv(0.3, "testing") == {"op": "run", "ok": True}
