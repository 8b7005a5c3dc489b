"""Timing statistics: block medians, paired-bootstrap confidence intervals, aggregates.

The reference and the candidate are timed in interleaved blocks; block i of one is paired with
block i of the other, so slow drifts of the machine (clocks, temperature) cancel in the ratio.
The bootstrap interval only sees variation between blocks; `resolution` widens it by the judge's
systematic error (two processes running the same kernel differ by a few tenths of a percent,
measured by the A/A benchmark), so that no interval claims more precision than the method has.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000


@dataclass
class CaseTiming:
    ref_ms: float          # median of the reference's block medians
    cand_ms: float
    speedup: float         # ref_ms / cand_ms
    ci_low: float          # 95% paired-bootstrap interval of the speedup
    ci_high: float
    ref_block_ms: list[float]
    cand_block_ms: list[float]

    def to_dict(self) -> dict:
        return {
            "ref_ms": self.ref_ms, "cand_ms": self.cand_ms, "speedup": self.speedup,
            "ci95": [self.ci_low, self.ci_high],
            "ref_block_ms": self.ref_block_ms, "cand_block_ms": self.cand_block_ms,
        }


def block_spread(blocks: list[list[float]]) -> float:
    """Slowest block median over fastest: how far apart one side's blocks of a case landed."""
    medians = [float(np.median(b)) for b in blocks if len(b)]
    if not medians:
        return 1.0
    low = min(medians)
    return max(medians) / low if low > 0 else float("inf")


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)  # fixed: the interval of given data is reproducible


def case_timing(ref_blocks: list[list[float]], cand_blocks: list[list[float]],
                resolution: float = 0.0) -> CaseTiming:
    ref_med = np.array([np.median(b) for b in ref_blocks])
    cand_med = np.array([np.median(b) for b in cand_blocks])
    ref_ms, cand_ms = float(np.median(ref_med)), float(np.median(cand_med))
    idx = _rng().integers(0, len(ref_med), size=(BOOTSTRAP_RESAMPLES, len(ref_med)))
    ratios = np.median(ref_med[idx], axis=1) / np.median(cand_med[idx], axis=1)
    low, high = np.percentile(ratios, [2.5, 97.5])
    low, high = low * (1 - resolution), high * (1 + resolution)
    return CaseTiming(ref_ms, cand_ms, ref_ms / cand_ms, float(low), float(high),
                      [float(x) for x in ref_med], [float(x) for x in cand_med])


@dataclass
class Aggregate:
    speedup: float          # GEAK's: arithmetic mean over cases of ref median / candidate median
    geomean: float
    ci_low: float           # 95% bootstrap interval of the arithmetic mean, resampling blocks per case
    ci_high: float

    def to_dict(self) -> dict:
        return {"speedup": self.speedup, "geomean": self.geomean, "ci95": [self.ci_low, self.ci_high]}


def aggregate(cases: list[CaseTiming], resolution: float = 0.0) -> Aggregate:
    speedups = np.array([c.speedup for c in cases])
    rng = _rng(1)
    means = np.zeros(BOOTSTRAP_RESAMPLES)
    for c in cases:
        r, k = np.array(c.ref_block_ms), np.array(c.cand_block_ms)
        idx = rng.integers(0, len(r), size=(BOOTSTRAP_RESAMPLES, len(r)))
        means += np.median(r[idx], axis=1) / np.median(k[idx], axis=1)
    means /= len(cases)
    low, high = np.percentile(means, [2.5, 97.5])
    low, high = low * (1 - resolution), high * (1 + resolution)
    return Aggregate(float(speedups.mean()), float(np.exp(np.log(speedups).mean())), float(low), float(high))
