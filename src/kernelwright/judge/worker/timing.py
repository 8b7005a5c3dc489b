"""The timing procedure's decisions, as pure functions of plain numbers: which perf cases are
timed, how many calls a block holds, when an escape gap or a round of blocks is measured again,
when a side's idle CPU or the worker's own clock says a timing was forged. `performance` asks the
children and acts on these answers; nothing here touches a process.
The checks at the end fail a candidate on what its timing replies give away: patched timers, work
left running, device work escaping the timed stream, a report the worker's clock contradicts, a
time below the roofline.
"""

from __future__ import annotations

import math

from .failures import CaseFailed
from .stats import block_spread

# One side's slowest block median over its fastest, past which a perf case is timed again (at most
# RETIME_ROUNDS more times). In two TritonBench A/A runs on the H200 (3,239 case sides that do not
# wait for the GPU on the host) undisturbed sides stayed within 1.42x, 99.7% within 1.27x;
# disturbed ones were 2.9-15x apart.
BLOCK_SPREAD_LIMIT = 1.5


RETIME_ROUNDS = 2


# How many times a late escape gap (device work after the timed stream) is measured again on both
# sides, interleaved, before it fails a case: work hidden on a side stream is late every time, a
# host that wakes up late from a synchronise (other workers compiling) is not.
GAP_TRIES, GAP_TRIES_SHORT = 3, 8


# The worker's own clock around each timing block is the check a candidate cannot reach from its
# process: the wall time a block took beyond the device time it reported (flushes, pads, host round
# trips) must not exceed the reference's by more than WALL_SLACK_MS per block, half of that
# overhead of the reference and a quarter of the candidate's reported time (`wall_clock_excess`).
# A candidate that reports a tenth of its time shows nine times it there; host jitter does not.
WALL_SLACK_MS = 5.0


# While the reference warms up, the candidate has no request: its processes (every thread, every
# process it started, in any group or session) may use at most this share of that window on the
# CPU (plus IDLE_CPU_GRACE_S: the clock ticks in 10 ms), else it left work running after its calls.
# The first perf case's window lasts at least IDLE_WINDOW_S.
IDLE_CPU_SHARE, IDLE_CPU_GRACE_S, IDLE_WINDOW_S = 0.1, 0.02, 0.4


def perf_subset(n: int, limit: int | None) -> set[int]:
    """Indices of the perf cases to time: all, or `limit` spread evenly from first to last."""
    if not limit or n <= limit:
        return set(range(n))
    if limit == 1:
        return {n - 1}
    return {round(i * (n - 1) / (limit - 1)) for i in range(limit)}


def perf_seed(first_seed: int, pi: int) -> int:
    """The seed of perf case `pi`'s inputs (the check and the timing make the same ones)."""
    return first_seed + 7919 * (pi + 1)


def flush_bytes(device: str, l2_bytes: int) -> int:
    """How much memory the L2 flush before each timed call writes."""
    return max(4 * l2_bytes, 64 << 20) if device != "cpu" else 32 << 20


def timing_order(perf_bytes: dict[int, int], checked) -> list[int]:
    """The checked perf cases in the order they are timed. Largest outputs first: an autotuner
    whose key leaves out the size keeps the config it picks on the first shape timed, and on a tiny
    shape that pick is noise (two runs of the same reference settled 1.2-1.5x apart); on the
    largest it is real."""
    return sorted(checked, key=lambda i: (-perf_bytes.get(i, 0), i))


def idle_wait_s(first_case: bool, elapsed: float) -> float:
    """How much longer to watch the idle candidate: the first perf case's window lasts at least
    IDLE_WINDOW_S."""
    return IDLE_WINDOW_S - elapsed if first_case and elapsed < IDLE_WINDOW_S else 0.0


def idle_cpu_exceeded(used_s: float, window_s: float) -> bool:
    """Whether the candidate's processes used more CPU than an idle process may in the window."""
    return used_s > IDLE_CPU_SHARE * window_s + IDLE_CPU_GRACE_S


def call_estimate_ms(ref_est_ms: float, cand_est_ms: float, flush_ms: float, pad_ms: float) -> float:
    """One timed call's cost: the slower side's kernel plus the L2 flush and the pad before it."""
    return max(ref_est_ms, cand_est_ms, 1e-3) + flush_ms + pad_ms


def input_sets(default: int, ref_sets: int | None, cand_sets: int | None) -> int:
    """The input sets a block cycles: the more of the two sides' (each makes as many as fit its
    memory budget; None: the default)."""
    return max(default if ref_sets is None else ref_sets, default if cand_sets is None else cand_sets)


def block_plan(est_ms: float, sets: int, block_ms: float, min_calls: int, max_calls: int) -> tuple[int, bool]:
    """(calls per block, whether each block uses one input set). At least one input set is used
    twice per block: a result cached by address is caught. Calls longer than a block need no more
    than two: both on one set (block b uses set b), so the reuse is still there and the sets still
    rotate, from block to block. Cycling every set in every block cost twice the exclusive time for
    nothing (attention_forward_triton: 16 s of one 28 s turn, on 4 calls of 0.5 s per block)."""
    slow = est_ms >= block_ms
    n = 2 if slow else int(min(max_calls, max(min_calls, sets + 1, math.ceil(block_ms / est_ms))))
    return n, slow


def gap_limit_ms(escape_ms: float, cand_est_ms: float) -> float:
    """How much later than the reference's the candidate's device work may end after its timed
    stream. Both gaps hold the same host round trip (sync, record); what is left is device work
    the candidate's timed events did not cover."""
    return escape_ms + 0.25 * cand_est_ms


def gap_tries(ref_est_ms: float, cand_est_ms: float) -> int:
    """How many times a late gap is measured again. Short calls get more tries: a try costs
    milliseconds there, and a late wake-up (tens of microseconds) is the size of their limit
    (fused_recurrent_retention, against itself, failed at 0.026 and 0.036 ms excess in two H200
    suite runs with 3 tries; it passed in earlier runs)."""
    return GAP_TRIES_SHORT if max(ref_est_ms, cand_est_ms) < 1.0 else GAP_TRIES


def gap_readings(cand_slow: bool, tries: int) -> int:
    """How many gap readings each side's least one was taken from (the warm-up's, then 5 a try)."""
    return (2 if cand_slow else 5) + 5 * tries


def replace_seed(seed: int, round_no: int, blocks: int, block: int) -> int:
    """The seed of the inputs replaced before block `block` of round `round_no`."""
    return seed * 131 + round_no * blocks + block


def reference_first(block: int) -> bool:
    """Whether the reference is timed first in this block (the sides alternate)."""
    return block % 2 == 0


def wall_clock_excess(ref_blocks: list[tuple[float, float]], cand_blocks: list[tuple[float, float]]) -> tuple[float, float]:
    """(excess, slack) in ms from each side's blocks as (wall ms the worker measured around the
    request, sum of the call times the child reported). A block's wall time holds its calls plus
    what both sides do alike (the L2 flushes and pads before each call, replacing the inputs, the
    round trip); `excess` is how much more of the candidate's wall time its reported times leave
    unexplained than the reference's do. A timing block is forged (patched timers or harness, a
    made-up reply) when `excess` > `slack`."""
    ref_over = max(sum(w - r for w, r in ref_blocks), 0.0)  # (a trusted side's wall time holds its calls)
    cand_over = sum(w - r for w, r in cand_blocks)
    # (noise in either side's device time is in its wall time and its report alike, and cancels)
    slack = WALL_SLACK_MS * max(len(cand_blocks), 1) + 0.5 * ref_over \
        + 0.25 * sum(r for _, r in cand_blocks)
    return cand_over - ref_over, slack


def disturbed_sides(sides: list[tuple[str, bool, list[list[float]]]]) -> list[str]:
    """Of (who, host_sync, blocks) per side, who had blocks land more than BLOCK_SPREAD_LIMIT
    apart. Host-synchronising calls vary with CPU load by nature and are flagged instead."""
    return [who for who, host_sync, blocks in sides if not host_sync and block_spread(blocks) > BLOCK_SPREAD_LIMIT]


def retime_decision(excess: float, slack: float, disturbed: list[str], rounds: int) -> str:
    """After round `rounds` (0 first) of a case's blocks: "keep" it, time it "again", or
    "forged" (the worker's clock disagreed with the candidate's report in every round)."""
    if excess <= slack and (not disturbed or rounds == RETIME_ROUNDS):
        return "keep"
    if excess > slack and rounds == RETIME_ROUNDS:
        return "forged"
    return "again"


def phase_seconds(marks: list[float]) -> dict[str, float]:
    """Where one case's perf time went, from the monotonic marks between its phases."""
    return dict(zip(("spot", "prepare", "blocks", "release"),
                    (round(b - a, 4) for a, b in zip(marks, marks[1:]))))


def patched_failure(label: str, names: list[str]) -> CaseFailed:
    listed = ", ".join(n[:80] for n in names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return CaseFailed("performance", f"{label}: the candidate replaced timing functions in its process "
                      f"({listed}): its own timings cannot be trusted", kind="timer_patched")


def check_warmup(label: str, prep) -> None:
    """The candidate's warm-up (`messages.PerfPrepared`) launched a kernel in every call."""
    if prep.warmup_launches < prep.warmup_calls:
        raise CaseFailed("performance", f"{label}: {prep.warmup_launches} kernel launches in "
                         f"{prep.warmup_calls} warm-up calls (results cached across calls?)",
                         kind="cached_result")


def check_idle_cpu(label: str, used: float, window: float, processes: int) -> None:
    """The candidate's processes (`processes` in its tree) used no more than an idle share of the
    CPU in the `window` seconds it had no request: else it left work running after its calls."""
    if idle_cpu_exceeded(used, window):
        raise CaseFailed("performance", f"{label}: the candidate's processes used {used:.2f} s of CPU in the "
                         f"{window:.2f} s after its calls returned, with no call in flight (threads or "
                         f"processes it left running: {processes} process(es) in its tree); they "
                         "would run next to the timing of the reference", kind="background_work")


def check_escape_gap(label: str, gap_excess: float, gap_limit: float, readings: int) -> None:
    """The candidate's device work ended at most `gap_limit` ms later after its timed stream than
    the reference's, in the least of `readings` readings on each side."""
    if gap_excess > gap_limit:
        raise CaseFailed("performance", f"{label}: work kept running {gap_excess:.3f} ms after the timed stream "
                         f"finished, the least of {readings} readings on each side (side streams or threads "
                         "escaping the timer)", kind="timing_cheat")


def check_candidate_block(label: str, block, n: int) -> None:
    """One of the candidate's timing blocks (`messages.TimedBlock` of `n` calls): its timers are
    its own, and every call launched a kernel."""
    if block.patched:
        raise patched_failure(label, block.patched)
    if block.launches < n:
        raise CaseFailed("performance", f"{label}: only {block.launches} kernel launches in {n} "
                         "timed calls (results cached across calls?)", kind="cached_result")


def timing_mismatch(label: str, excess: float, slack: float, reported: float, blocks: int) -> CaseFailed:
    """The failure of a candidate whose blocks took longer on the worker's clock than it reported,
    in every round (`timing.wall_clock_excess`)."""
    return CaseFailed("performance", f"{label}: the candidate's timing blocks took {excess:.1f} ms more on the "
                      f"judge's own clock than its reported times ({reported:.1f} ms in all) explain, "
                      f"beyond what the reference's blocks left unexplained (allowed {slack:.1f} ms), in "
                      f"{RETIME_ROUNDS + 1} rounds of {blocks} blocks: its process reported less "
                      "time than it took (patched timers or harness, or a forged reply)",
                      kind="timing_mismatch")


def check_roofline(result, label: str, cand_ms: float, bound: float | None, slack: float, hardware: str) -> None:
    """The candidate's time is not below what the hardware allows for the task's cost model
    (`bound` ms, divided by `slack`); else its case `result` fails, and the stage with it."""
    if bound is not None and cand_ms < bound / slack:
        result.ok, result.failure = False, "timing_cheat"
        result.reason = (f"measured {cand_ms:.4f} ms, below the {bound:.4f} ms that "
                         f"{hardware} allows for this cost model")
        raise CaseFailed("performance", f"{label}: faster than the hardware allows "
                         f"({cand_ms:.4f} ms < roofline {bound:.4f} ms): "
                         "suspect a cheat, a cached result or a wrong cost model", kind="timing_cheat")
