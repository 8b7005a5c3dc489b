"""The per-GPU reader-writer lock: timing (exclusive) must not starve behind a stream of
correctness checks (shared), and shared holders still overlap each other."""

import threading
import time

from kernelwright.judge.worker import device_lock


def test_writer_lets_readers_pass_for_a_while_then_goes_first(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"lock-test-{time.time_ns()}")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setattr("kernelwright.judge.worker.WRITER_PATIENCE_S", 0.5)
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
