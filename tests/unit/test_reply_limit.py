"""How large a child's reply may be: a reference's follows the host memory (a KernelBench
activation at its own size returns 6 GiB), a candidate's follows its reference's outputs, and a
frame over its child's limit is that child's failure, never read whole."""

import pytest
import torch

from kernelwright.judge.common import footprint, wire
from kernelwright.judge.worker.child_process import ChildFailure

GiB = 1 << 30


def test_a_reference_may_send_an_eighth_of_the_host_memory_between_the_default_and_the_message_limit():
    assert wire.MAX_REPLY_BYTES == 4 * GiB and wire.MAX_MESSAGE_BYTES == 16 * GiB
    assert footprint.reply_limit(available=24 * GiB) == 4 * GiB  # a small machine keeps the default
    assert footprint.reply_limit(available=48 * GiB) == 6 * GiB
    assert footprint.reply_limit(available=125 * GiB) == 125 * GiB // 8  # an H200's host: 15.6 GiB
    assert footprint.reply_limit(available=512 * GiB) == 16 * GiB
    assert footprint.reply_limit() >= wire.MAX_REPLY_BYTES  # (this machine's, now)


def test_a_candidates_reply_may_be_as_large_as_its_references_outputs_call_for():
    limit = footprint.reply_limit(available=125 * GiB)
    fields = footprint.REPLY_FIELDS_BYTES
    assert footprint.candidate_reply_limit(2 << 20, limit) == 4 * GiB  # small outputs: the default
    # a KernelBench activation at its own size: 6 GiB of outputs, twice on the repeat item
    assert footprint.candidate_reply_limit(6 * GiB, limit) == 12 * GiB + fields <= limit
    assert footprint.candidate_reply_limit(10 * GiB, limit) == limit  # never past the reference's limit


def test_a_frame_over_the_childs_limit_is_its_failure_and_one_under_it_is_read(fake_child):
    child, play = fake_child
    reply = {"op": "run", "ok": True, "outputs": [torch.zeros(1 << 19)]}  # 2 MiB of outputs
    child.max_reply_bytes = 4 << 20
    play((0.0, reply))
    got = child.recv(10, "running case 0")
    assert got["ok"] and got["outputs"][0].numel() == 1 << 19
    child.max_reply_bytes = 1 << 20
    play((0.0, reply))
    with pytest.raises(ChildFailure) as failed:  # read no further than its size (the child is killed)
        child.recv(10, "running case 0")
    assert failed.value.kind == "too_large" and "over the 1.0 MiB a reply may carry" in failed.value.reason
