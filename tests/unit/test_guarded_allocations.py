"""Probes place the tensors a call creates itself between poisoned zones (judge/poison.py)."""

import pytest
import torch

from kernelwright.judge.sandbox.poison import guarded_allocations, in_guard_zone

ZONE = 4096


def _bytes_around(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    storage = torch.tensor([], dtype=torch.uint8).set_(t.untyped_storage())
    start = t.storage_offset() * t.element_size()
    end = start + t.numel() * t.element_size()
    return storage[start - ZONE:start], storage[end:end + ZONE]


def test_tensors_made_inside_the_call_sit_between_poisoned_zones_with_their_values_kept():
    torch.manual_seed(0)
    expected = torch.randn(10)
    torch.manual_seed(0)
    with guarded_allocations(torch, "cpu", 0xAB, ZONE):
        x = torch.randn(10)
        y = torch.empty_like(x).fill_(2.0)
        z = x.new_zeros(3)
    assert torch.equal(x, expected) and torch.equal(y, torch.full((10,), 2.0)) and not z.any()
    for t in (x, y, z):
        before, after = _bytes_around(t)
        assert bool((before == 0xAB).all()) and bool((after == 0xAB).all())


def test_results_of_ordinary_ops_and_moves_within_the_device_are_left_alone():
    x = torch.randn(8)
    with guarded_allocations(torch, "cpu", 0xAB, ZONE):
        y = x * 2
        z = x.to(torch.float64)
    assert y.untyped_storage().nbytes() == 8 * 4 and z.untyped_storage().nbytes() == 8 * 8


def test_a_read_past_the_end_sees_the_poison():
    with guarded_allocations(torch, "cpu", 0xFF, ZONE):
        x = torch.arange(4, dtype=torch.int32)
    past = torch.tensor([], dtype=torch.int32).set_(x.untyped_storage(), x.storage_offset(), (5,))
    assert past.tolist() == [0, 1, 2, 3, -1]  # the 5th element is the 0xFF zone


def test_tensors_that_cannot_be_copied_are_passed_through():
    expanded = torch.ones(1).expand(4)  # overlapping strides
    assert in_guard_zone(torch, expanded, 0xFF, ZONE) is expanded
    assert in_guard_zone(torch, "not a tensor", 0xFF, ZONE) == "not a tensor"


@pytest.mark.gpu
def test_on_the_gpu_factories_and_host_to_device_moves_are_guarded():
    with guarded_allocations(torch, "cuda", 0xFF, ZONE):
        made = torch.arange(4, dtype=torch.int32, device="cuda")
        moved = torch.arange(4, dtype=torch.int32).cuda()
        kept = made.to("cuda")  # already there: no new memory, left alone
    for t in (made, moved):
        past = torch.tensor([], dtype=torch.int32, device="cuda").set_(t.untyped_storage(), t.storage_offset(), (5,))
        assert past.tolist() == [0, 1, 2, 3, -1]
    assert kept.data_ptr() == made.data_ptr()
