"""Timing statistics on hand-made block data: point estimates, intervals, aggregates."""

import math

import numpy as np
import pytest

from kernelwright.judge.worker.stats import Aggregate, CaseTiming, aggregate, case_timing

REF = [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 3.0, 3.0]]        # block medians 2, 4, 3 -> median 3
CAND = [[1.0, 1.0, 9.0], [1.5, 1.5, 1.5], [2.0, 0.1, 2.0]]       # block medians 1, 1.5, 2 -> median 1.5


def test_point_estimate_is_ratio_of_medians_of_block_medians():
    t = case_timing(REF, CAND)
    assert t.ref_block_ms == [2.0, 4.0, 3.0]
    assert t.cand_block_ms == [1.0, 1.5, 2.0]
    assert t.ref_ms == 3.0 and t.cand_ms == 1.5
    assert t.speedup == 2.0


def test_even_number_of_blocks_uses_the_midpoint_median():
    t = case_timing([[1.0], [2.0], [4.0], [8.0]], [[1.0], [1.0], [2.0], [2.0]])
    assert t.ref_ms == 3.0 and t.cand_ms == 1.5 and t.speedup == 2.0


def test_interval_contains_the_point_estimate_and_stays_within_possible_ratios():
    t = case_timing(REF, CAND)
    assert t.ci_low <= t.speedup <= t.ci_high
    ref_med, cand_med = np.array(t.ref_block_ms), np.array(t.cand_block_ms)
    assert t.ci_low >= ref_med.min() / cand_med.max()
    assert t.ci_high <= ref_med.max() / cand_med.min()
    assert t.ci_low < t.ci_high  # the blocks vary, so the interval has width


def test_pairing_cancels_a_drift_common_to_both_sides():
    # the machine slows down block by block, but block i of each side is paired: ratio is always 2
    t = case_timing([[2.0], [4.0], [3.0], [8.0]], [[1.0], [2.0], [1.5], [4.0]])
    assert t.speedup == 2.0
    assert t.ci_low == 2.0 and t.ci_high == 2.0


def test_identical_inputs_give_speedup_one_and_interval_of_the_resolution():
    blocks = [[1.0, 1.1, 0.9], [1.2, 1.3, 1.25], [0.8, 0.85, 0.9], [1.0, 1.0, 1.0]]
    t = case_timing(blocks, [list(b) for b in blocks], resolution=0.005)
    assert t.speedup == 1.0
    assert t.ci_low == pytest.approx(0.995, abs=1e-12)
    assert t.ci_high == pytest.approx(1.005, abs=1e-12)


def test_zero_resolution_on_identical_inputs_gives_a_point_interval():
    blocks = [[1.0], [2.0], [3.0]]
    t = case_timing(blocks, blocks, resolution=0.0)
    assert (t.ci_low, t.speedup, t.ci_high) == (1.0, 1.0, 1.0)


def test_resolution_widens_the_interval_multiplicatively():
    plain = case_timing(REF, CAND, resolution=0.0)
    wide = case_timing(REF, CAND, resolution=0.01)
    assert wide.ci_low == pytest.approx(plain.ci_low * 0.99)
    assert wide.ci_high == pytest.approx(plain.ci_high * 1.01)
    assert wide.speedup == plain.speedup


def test_intervals_are_reproducible():
    rng = np.random.default_rng(42)
    ref = rng.uniform(1.0, 2.0, size=(10, 5)).tolist()
    cand = rng.uniform(0.5, 1.5, size=(10, 5)).tolist()
    a, b = case_timing(ref, cand, 0.005), case_timing(ref, cand, 0.005)
    assert (a.ci_low, a.ci_high) == (b.ci_low, b.ci_high)
    assert aggregate([a, b], 0.005) == aggregate([a, b], 0.005)


def test_case_timing_to_dict():
    t = case_timing(REF, CAND)
    d = t.to_dict()
    assert d == {"ref_ms": 3.0, "cand_ms": 1.5, "speedup": 2.0, "ci95": [t.ci_low, t.ci_high],
                 "ref_block_ms": [2.0, 4.0, 3.0], "cand_block_ms": [1.0, 1.5, 2.0]}


def constant_case(ref_ms: float, cand_ms: float, blocks: int = 4) -> CaseTiming:
    return case_timing([[ref_ms]] * blocks, [[cand_ms]] * blocks)


def test_aggregate_arithmetic_and_geometric_means():
    cases = [constant_case(2.0, 1.0), constant_case(1.0, 2.0), constant_case(8.0, 2.0)]  # 2, 0.5, 4
    agg = aggregate(cases)
    assert agg.speedup == pytest.approx((2.0 + 0.5 + 4.0) / 3)
    assert agg.geomean == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    assert agg.geomean == pytest.approx(math.exp((math.log(2) + math.log(0.5) + math.log(4)) / 3))
    # constant blocks: every bootstrap mean is the mean itself
    assert agg.ci_low == pytest.approx(6.5 / 3) and agg.ci_high == pytest.approx(6.5 / 3)


def test_aggregate_am_ge_gm_and_resolution():
    cases = [constant_case(3.0, 1.0), constant_case(1.0, 3.0)]
    agg = aggregate(cases, resolution=0.005)
    assert agg.speedup == pytest.approx(5 / 3) and agg.geomean == pytest.approx(1.0)
    assert agg.ci_low == pytest.approx(5 / 3 * 0.995) and agg.ci_high == pytest.approx(5 / 3 * 1.005)
    assert agg.to_dict() == {"speedup": agg.speedup, "geomean": agg.geomean, "ci95": [agg.ci_low, agg.ci_high]}


def test_aggregate_interval_contains_the_mean_for_noisy_cases():
    cases = [case_timing(REF, CAND), case_timing(CAND, REF)]
    agg = aggregate(cases)
    assert isinstance(agg, Aggregate)
    assert agg.speedup == pytest.approx((2.0 + 0.5) / 2)
    assert agg.ci_low <= agg.speedup <= agg.ci_high


def test_aggregate_of_one_case_matches_the_case():
    t = case_timing(REF, CAND)
    agg = aggregate([t])
    assert agg.speedup == t.speedup and agg.geomean == pytest.approx(t.speedup)


def test_block_spread_is_the_slowest_block_median_over_the_fastest():
    from kernelwright.judge.worker.stats import block_spread

    assert block_spread([[1.0, 1.1, 0.9], [1.0, 1.0]]) == pytest.approx(1.0)
    assert block_spread([[0.005, 0.005], [0.075, 0.076, 0.074], [0.005]]) == pytest.approx(15.0)
    assert block_spread([]) == 1.0
