"""A check's GPU work happens while its process holds the GPU lock: encoding a reply copies its
tensors off the GPU and returning cached memory unmaps it, and either one inside another worker's
timing turn disturbs what that turn measures. Only writing to the pipe comes after letting go
(blocking on it while holding the lock could deadlock against the worker)."""

import contextlib
from types import SimpleNamespace

from kernelwright.judge.common.options import ChildOptions
from kernelwright.judge.common.requests import RunItem, RunRequest
from kernelwright.judge.sandbox.reference import ReferenceHarness


class RecordingShare:
    def __init__(self, events: list) -> None:
        self.events, self.held, self.enabled, self.doing = events, False, True, ""

    @contextlib.contextmanager
    def hold(self, wanted: bool):
        if wanted:
            self.held = True
            self.events.append("acquire")
        try:
            yield
        finally:
            self.release()

    def release(self) -> None:
        if self.held:
            self.held = False
            self.events.append("release")

    def take_stats(self) -> dict:
        return {}


def harness(events: list, results: list[bool]) -> ReferenceHarness:
    h = ReferenceHarness.__new__(ReferenceHarness)  # no device, no task: only the request's bookkeeping is exercised
    h.is_gpu = True
    h.options = ChildOptions()  # (the worker's: no reply limit of its own here)
    h.share = RecordingShare(events)
    h.torch = SimpleNamespace(cuda=SimpleNamespace(empty_cache=lambda: events.append(
        "empty_cache" + (" (held)" if h.share.held else " (NOT HELD)"))))
    h.conn = SimpleNamespace(send_bytes=lambda data: events.append(
        "write" + (" (NOT RELEASED)" if h.share.held else "")))
    answers = iter(results)
    h._run_reference_item = lambda item: {"ok": next(answers), "case": item.case}

    def encode(obj):
        events.append("encode" + (" (held)" if h.share.held else " (NOT HELD)"))
        return b"reply"

    h._encode = encode
    return h


def run_request(n_items: int, gpu_lock: bool) -> RunRequest:
    return RunRequest(items=[RunItem(case=k, seed=0) for k in range(n_items)], gpu_lock=gpu_lock)


def test_items_are_encoded_and_the_cache_returned_under_the_lock():
    events: list = []
    harness(events, [True, True]).op_run(run_request(2, gpu_lock=True))
    assert events == ["acquire", "encode (held)", "release", "write",
                      "acquire", "encode (held)", "empty_cache (held)", "release", "write"]


def test_a_failed_item_returns_the_cache_under_the_lock_and_stops():
    events: list = []
    harness(events, [False, True]).op_run(run_request(2, gpu_lock=True))
    assert events == ["acquire", "encode (held)", "empty_cache (held)", "release", "write"]


def test_inside_the_workers_own_turn_nothing_is_taken():
    events: list = []
    harness(events, [True]).op_run(run_request(1, gpu_lock=False))
    assert events == ["encode (NOT HELD)", "empty_cache (NOT HELD)", "write"]


def test_a_gpu_fault_that_breaks_the_cache_release_still_sends_the_reply():
    """After an illegal memory access the CUDA context is gone and `empty_cache` raises; the
    failed item's reply (which says what faulted) must still reach the worker. Raising there made
    the child exit with status 70 and the verdict lost the reason (H200, tenth session)."""
    events: list = []
    h = harness(events, [False])

    def broken_cache():
        events.append("empty_cache raised")
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    h.torch = SimpleNamespace(cuda=SimpleNamespace(empty_cache=broken_cache))
    h.op_run(run_request(1, gpu_lock=True))
    assert events == ["acquire", "encode (held)", "empty_cache raised", "release", "write"]


def test_a_fault_surfacing_while_encoding_becomes_an_error_reply():
    """Copying the outputs off the GPU is where an asynchronous fault may surface: the item is
    then reported as failed (with the error) rather than killing the process without a reply."""
    events: list = []
    sent: list = []
    h = harness(events, [True, True])
    encoded: list = []

    def encode(obj):
        encoded.append(obj)
        if obj.get("ok"):
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return b"error reply"

    h._encode = encode
    h.conn = SimpleNamespace(send_bytes=sent.append)
    h.op_run(run_request(2, gpu_lock=True))
    assert sent == [b"error reply"]  # and the second item was not run
    error = encoded[-1]
    assert error["ok"] is False and "illegal memory access" in error["error"]
    assert error.get("reference_failed") is True  # the harness plays the reference
