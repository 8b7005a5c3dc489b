"""A check's GPU work happens while its process holds the GPU lock: encoding a reply copies its
tensors off the GPU and returning cached memory unmaps it, and either one inside another worker's
timing turn disturbs what that turn measures. Only writing to the pipe comes after letting go
(blocking on it while holding the lock could deadlock against the worker)."""

import contextlib
from types import SimpleNamespace

from kernelwright.judge.child import Harness


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


def harness(events: list, results: list[bool]) -> Harness:
    h = Harness.__new__(Harness)  # no device, no task: only the request's bookkeeping is exercised
    h.role, h.is_gpu = "reference", True
    h.share = RecordingShare(events)
    h.torch = SimpleNamespace(cuda=SimpleNamespace(empty_cache=lambda: events.append(
        "empty_cache" + (" (held)" if h.share.held else " (NOT HELD)"))))
    h.conn = SimpleNamespace(send_bytes=lambda data: events.append(
        "write" + (" (NOT RELEASED)" if h.share.held else "")))
    answers = iter(results)
    h._run_reference_item = lambda item: {"ok": next(answers), "case": item["case"]}

    def encode(obj):
        events.append("encode" + (" (held)" if h.share.held else " (NOT HELD)"))
        return b"reply"

    h._encode = encode
    return h


def test_items_are_encoded_and_the_cache_returned_under_the_lock():
    events: list = []
    harness(events, [True, True]).op_run({"items": [{"case": 0}, {"case": 1}], "gpu_lock": True})
    assert events == ["acquire", "encode (held)", "release", "write",
                      "acquire", "encode (held)", "empty_cache (held)", "release", "write"]


def test_a_failed_item_returns_the_cache_under_the_lock_and_stops():
    events: list = []
    harness(events, [False, True]).op_run({"items": [{"case": 0}, {"case": 1}], "gpu_lock": True})
    assert events == ["acquire", "encode (held)", "empty_cache (held)", "release", "write"]


def test_inside_the_workers_own_turn_nothing_is_taken():
    events: list = []
    harness(events, [True]).op_run({"items": [{"case": 0}], "gpu_lock": False})
    assert events == ["encode (NOT HELD)", "empty_cache (NOT HELD)", "write"]
