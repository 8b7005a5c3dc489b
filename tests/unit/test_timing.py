"""The timing procedure's decisions as pure functions (`judge.timing`), and the clock a reply is
waited on (`channel.ReplyClock`): no process, no GPU."""

import pytest

from kernelwright.judge.worker import timing
from kernelwright.judge.worker.child_process import MAX_LOCK_CREDIT_S, ReplyClock


def test_perf_subset_keeps_the_first_and_the_last():
    assert timing.perf_subset(4, 0) == {0, 1, 2, 3}
    assert timing.perf_subset(9, 3) == {0, 4, 8}
    assert timing.perf_subset(9, 1) == {8}


def test_the_timing_order_is_largest_outputs_first_then_by_index():
    assert timing.timing_order({0: 10, 1: 300, 2: 300}, {0: 0.1, 1: None, 2: 0.2, 3: 0.1}) == [1, 2, 0, 3]


def test_a_call_estimate_holds_the_flush_and_the_pad():
    assert timing.call_estimate_ms(0.5, 2.0, 0.1, 0.2) == pytest.approx(2.3)
    assert timing.call_estimate_ms(0.0, 0.0, 0.0, 0.0) == pytest.approx(1e-3)  # never zero


def test_input_sets_are_the_larger_sides_or_the_default():
    assert timing.input_sets(3, None, None) == 3
    assert timing.input_sets(3, 1, None) == 3
    assert timing.input_sets(3, 1, 5) == 5


def test_a_block_reuses_a_set_and_fills_its_time():
    # short calls: enough to fill block_ms, bounded by the limits, at least one set used twice
    assert timing.block_plan(0.1, 3, 10.0, 2, 50) == (50, False)
    assert timing.block_plan(2.0, 3, 10.0, 2, 50) == (5, False)
    assert timing.block_plan(4.0, 6, 10.0, 2, 50) == (7, False)  # sets + 1
    # a call as long as a block: two calls on one set per block
    assert timing.block_plan(10.0, 6, 10.0, 2, 50) == (2, True)


def test_escape_gap_limits_and_tries():
    assert timing.gap_limit_ms(0.015, 0.2) == pytest.approx(0.065)
    assert timing.gap_tries(0.2, 0.9) == timing.GAP_TRIES_SHORT
    assert timing.gap_tries(0.2, 1.0) == timing.GAP_TRIES
    assert timing.gap_readings(False, 8) == 45 and timing.gap_readings(True, 3) == 17


def test_the_idle_window_and_its_cpu_share():
    assert timing.idle_wait_s(True, 0.1) == pytest.approx(timing.IDLE_WINDOW_S - 0.1)
    assert timing.idle_wait_s(True, 1.0) == 0.0
    assert timing.idle_wait_s(False, 0.0) == 0.0  # only the first case waits
    assert not timing.idle_cpu_exceeded(0.06, 0.4)  # 0.1 x 0.4 s + 0.02 s allowed
    assert timing.idle_cpu_exceeded(0.07, 0.4)


def test_blocks_alternate_and_replace_with_fresh_seeds():
    assert [timing.reference_first(b) for b in range(4)] == [True, False, True, False]
    seeds = {timing.replace_seed(7, r, 4, b) for r in range(3) for b in range(4)}
    assert len(seeds) == 12


def test_disturbed_sides_ignore_host_synchronising_calls():
    steady, spread = [[1.0, 1.0], [1.1, 1.1]], [[1.0], [1.6]]
    assert timing.disturbed_sides([("reference", False, steady), ("candidate", False, spread)]) == ["candidate"]
    assert timing.disturbed_sides([("candidate", True, spread)]) == []


@pytest.mark.parametrize("excess,slack,disturbed,rounds,decision", [
    (0.0, 1.0, [], 0, "keep"),
    (0.0, 1.0, ["reference"], 0, "again"),
    (0.0, 1.0, ["reference"], timing.RETIME_ROUNDS, "keep"),  # flagged as unsteady instead
    (2.0, 1.0, [], 0, "again"),
    (2.0, 1.0, [], timing.RETIME_ROUNDS, "forged"),
])
def test_retime_decisions(excess, slack, disturbed, rounds, decision):
    assert timing.retime_decision(excess, slack, disturbed, rounds) == decision


def test_wall_clock_excess_ignores_a_reference_that_reports_more_than_it_took():
    excess, slack = timing.wall_clock_excess([(10.0, 12.0)], [(13.0, 10.0)])
    assert excess == pytest.approx(3.0)
    assert slack == pytest.approx(timing.WALL_SLACK_MS + 0.25 * 10.0)


def test_flush_bytes_and_phase_seconds():
    assert timing.flush_bytes("cpu", 1 << 30) == 32 << 20
    assert timing.flush_bytes("cuda", 50 << 20) == 200 << 20
    assert timing.flush_bytes("cuda", 0) == 64 << 20
    assert timing.phase_seconds([0.0, 1.0, 1.5, 4.0, 4.25]) == {"spot": 1.0, "prepare": 0.5, "blocks": 2.5,
                                                              "release": 0.25}
    assert timing.perf_seed(5, 0) == 5 + 7919


def test_the_reply_clock_charges_each_stretch_to_what_the_child_was_doing():
    clock = ReplyClock(limit=1.0, cap=2.0, compile_timeout=10.0, mark=0.0)
    assert clock.budget(0.25) == pytest.approx(0.75) and clock.phase == "running"
    clock.charge(0.25)
    clock.compiling = True
    assert clock.budget(1.25) == pytest.approx(9.0) and clock.phase == "compiling"
    clock.charge(1.25)
    clock.lock_notice("waiting")
    assert clock.phase == "waiting" and clock.budget(1.25) == pytest.approx(MAX_LOCK_CREDIT_S)
    clock.charge(2.25)
    clock.lock_notice("got")
    assert (clock.ran, clock.compiled, clock.credit) == pytest.approx((0.25, 1.0, 1.0))
    assert clock.phase == "compiling"
