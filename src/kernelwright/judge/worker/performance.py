"""The performance stage: the checked perf cases timed in one exclusive GPU turn per task, the
reference's and the candidate's blocks interleaved, each side paused while the other is timed.
The decisions (how many calls, when to measure again, what counts as forged) are `timing`'s; the
integrity checks on the replies are `checks`'; this module asks the children, in an order that
matters for the fidelity of the times (do not reorder the requests or the lock holds).
"""

from __future__ import annotations

import time

from ..common import procs
from ..common.hardware import roofline_ms, spec_for
from ..common.requests import (
    GapsRequest,
    PerfPrepareRequest,
    PerfReleaseRequest,
    Request,
    RetuneRequest,
    TimeBlockRequest,
)
from ..common.verdict import CaseResult
from .correctness import check_timed_configuration, spot_check
from .failures import ask, child_failure
from .interfaces import TimingWorker
from .state import Judging
from .stats import aggregate, case_timing
from .timing import (
    BLOCK_SPREAD_LIMIT,
    RETIME_ROUNDS,
    block_plan,
    call_estimate_ms,
    check_candidate_block,
    check_escape_gap,
    check_idle_cpu,
    check_roofline,
    check_warmup,
    disturbed_sides,
    flush_bytes,
    gap_limit_ms,
    gap_readings,
    gap_tries,
    idle_wait_s,
    input_sets,
    patched_failure,
    phase_seconds,
    reference_first,
    replace_seed,
    retime_decision,
    timing_mismatch,
    timing_order,
    wall_clock_excess,
)

STAGE = "performance"


def run_performance(worker: TimingWorker, j: Judging, checked: dict[int, float | None]) -> None:
    """Time the checked perf cases: reference and candidate blocks interleaved, exclusive GPU."""

    task, opts, verdict = j.task, j.opts, j.verdict
    ref, cand = j.children()
    timeout = opts.perf_timeout
    spec = spec_for(worker.info.get("name"))
    flush = flush_bytes(worker.device, int(worker.info.get("l2_bytes") or 0))
    timings = []
    retuned_apart: list[int] = []  # cases the candidate's autotuners decided differently when alone
    if checked:
        # One exclusive turn per task: a turn per perf case made every worker queue behind each
        # one (the writer waits for all readers in flight), and throughput fell by half.
        with worker.timing_turn(verdict), worker.alone_with(cand, opts):
            # autotuning choices made next to other workers are dropped: tuned again, alone
            retuned = {who: ask(side, RetuneRequest(), timeout, "resetting autotuners", STAGE).autotuners
                       for who, side in (("ref", ref), ("cand", cand))}
            for pi in timing_order(j.perf_bytes, checked):
                CaseTimer(worker, j, pi, flush, retuned).run(checked, timings, spec)
                if verdict.cases[-1].timing["tuned"]["cand"] != j.spot_tuned.get(pi, {}):
                    retuned_apart.append(pi)
    # What was timed must have been checked: where the autotuner, tuned alone, picked another
    # configuration than the one the perf-size check ran (the picks stay cached), check again.
    # Outside the turn: the other workers need not wait for it.
    for pi in sorted(retuned_apart):
        check_timed_configuration(worker, j, pi)
    # untimed cases were recorded during the check: list every perf case in the task's order
    order = {case.label: i for i, case in enumerate(task.perf_cases)}
    perf = sorted((c for c in verdict.cases if c.kind == "performance"), key=lambda c: order.get(c.label, 0))
    verdict.cases = [c for c in verdict.cases if c.kind != "performance"] + perf
    if timings:
        agg = aggregate(timings, opts.resolution)
        verdict.speedup, verdict.speedup_geomean = agg.speedup, agg.geomean
        verdict.speedup_ci95 = [agg.ci_low, agg.ci_high]


class CaseTimer:
    """Warm up and time one perf case (the caller holds the GPU exclusively). `run` goes through
    the steps in order; each step leaves what it measured on the timer for the case's record."""

    def __init__(self, worker: TimingWorker, j: Judging, pi: int, flush: int, retuned: dict) -> None:
        self.worker, self.j, self.pi, self.retuned = worker, j, pi, retuned
        self.opts = j.opts
        self.ref, self.cand = j.children()
        self.timeout = self.opts.perf_timeout
        self.case = j.task.perf_cases[pi]
        self.label = f"perf case {self.case.label}"
        self.seed = j.perf_seed(pi)
        self.seeds = [self.seed + k for k in range(self.opts.perf_input_sets)]
        self.prep_request = PerfPrepareRequest(case=pi, seeds=self.seeds, flush_bytes=flush,
                                               warmup_ms=self.opts.warmup_ms)
        self.child_s: dict[str, float] = {}  # the children's own phase seconds
        self.walls: dict[str, list[tuple[float, float]]] = {}  # side -> (wall ms, reported ms) per block

    def _ask(self, side, request: Request, doing: str):
        return ask(side, request, self.timeout, doing, STAGE)

    def run(self, checked: dict[int, float | None], timings: list, spec) -> None:

        pi = self.pi
        if checked[pi] is None:  # ran out of memory next to other workers: check it now, alone
            mark = time.monotonic()
            spot_check(self.worker, self.j, pi)
            checked[pi] = round(time.monotonic() - mark, 4)
        now = time.monotonic()
        marks = [now - checked[pi], now]  # phases: where a suite's perf time goes
        self._warm_up()
        marks.append(time.monotonic())
        check_warmup(self.label, self.cand_prep)
        self._plan()
        self._escape_gaps()
        self.child_s = {f"{who}_{k}": v for who, prep in (("ref", self.ref_prep), ("cand", self.cand_prep))
                        for k, v in prep.phase_s.items()}
        ref_blocks, cand_blocks = self._time_rounds()
        marks.append(time.monotonic())
        for side in (self.ref, self.cand):
            self._ask(side, PerfReleaseRequest(), "releasing perf inputs")
        marks.append(time.monotonic())

        timing = case_timing(ref_blocks, cand_blocks, self.opts.resolution)
        timings.append(timing)
        result = self._result(timing, marks)
        self.j.verdict.cases.append(result)
        self._flag_unreliable()
        if spec is not None and self.j.task.cost is not None:
            bound = roofline_ms(spec, self.j.task.cost(self.case), self.case.dtype)
            result.roofline_ms = bound
            check_roofline(result, self.label, timing.cand_ms, bound, self.opts.roofline_slack, spec.name)

    def _warm_up(self) -> None:
        """Both sides warmed up, the candidate first; while the reference warms up the candidate
        has no request, and whatever CPU its processes use meanwhile is work it left running
        after its calls (threads, subprocesses)."""
        cand = self.cand
        self.cand_prep = self._ask(cand, self.prep_request, f"warming up on {self.label}")
        if self.cand_prep.patched:
            raise patched_failure(self.label, self.cand_prep.patched)
        tree = self.worker.candidate_tree(cand)
        cpu_before, idle_from = procs.cpu_seconds(tree), time.monotonic()
        self.ref_prep = self._ask(self.ref, self.prep_request, f"warming up on {self.label}")
        first_case = not any(c.kind == "performance" and c.timing for c in self.j.verdict.cases)
        wait = idle_wait_s(first_case, time.monotonic() - idle_from)
        if wait > 0:
            time.sleep(wait)
        self.window = time.monotonic() - idle_from
        cpu_after = procs.cpu_seconds(set(tree) | set(self.worker.candidate_tree(cand)))
        self.used = sum(t - cpu_before.get(p, 0.0) for p, t in cpu_after.items())
        check_idle_cpu(self.label, self.used, self.window, len(cpu_after))
        # Both sides get the same GPU-side pad before each timed call (the larger host need).
        self.pad_ms = max(self.ref_prep.pad_ms, self.cand_prep.pad_ms)

    def _plan(self) -> None:
        """How many calls a block holds, and over how many input sets (`timing.block_plan`)."""
        opts, ref_prep, cand_prep = self.opts, self.ref_prep, self.cand_prep
        est = call_estimate_ms(ref_prep.est_ms, cand_prep.est_ms, ref_prep.flush_ms, self.pad_ms)
        self.sets = input_sets(opts.perf_input_sets, ref_prep.sets, cand_prep.sets)
        self.n, self.slow = block_plan(est, self.sets, opts.block_ms, opts.min_calls_per_block,
                                       opts.max_calls_per_block)

    def _escape_gaps(self) -> None:
        """The device work each side left running after its timed stream, measured again while
        the candidate's is late. The gap ends when the host wakes from a sync: under CPU load
        (other workers compiling) a clean call can look late (A/A runs saw 0.02-0.03 ms). Hidden
        work is there every time, jitter is not: measure again, interleaved, and keep each side's
        cleanest reading."""
        ref_prep, cand_prep = self.ref_prep, self.cand_prep
        gap_limit = gap_limit_ms(self.opts.escape_ms, cand_prep.est_ms)
        ref_gap, cand_gap = ref_prep.gap_ms, cand_prep.gap_ms
        tries = gap_tries(ref_prep.est_ms, cand_prep.est_ms)
        for _ in range(tries):
            if cand_gap - ref_gap <= gap_limit:
                break
            ref_gap = min(ref_gap, self._ask(self.ref, GapsRequest(n=5), self.label).gap_ms)
            cand_gap = min(cand_gap, self._ask(self.cand, GapsRequest(n=5), self.label).gap_ms)
        check_escape_gap(self.label, cand_gap - ref_gap, gap_limit, gap_readings(cand_prep.slow, tries))
        self.ref_gap, self.cand_gap = ref_gap, cand_gap

    def _time_rounds(self) -> tuple[list, list]:
        """Rounds of blocks until one is kept. A side whose blocks land far apart was disturbed
        during some of them (on the H200, 4 of 1,663 cases of a TritonBench run: one to three
        blocks of a 5-8 us kernel measured 37-100 us, and one such case made a reference 3x faster
        than itself). Host-synchronising calls vary with CPU load by nature and are flagged
        instead. The case is timed again, in the same turn, and the first round whose blocks agree
        is kept. A round whose candidate blocks took far longer on the worker's clock than the
        candidate reported (see `wall_clock_excess`) is timed again too; every round so is a
        forged timing."""
        rounds = 0
        while True:
            ref_blocks, cand_blocks = self._time_blocks(rounds)
            self.disturbed = disturbed_sides([("reference", self.ref_prep.host_sync, ref_blocks),
                                              ("candidate", self.cand_prep.host_sync, cand_blocks)])
            self.excess, self.slack = wall_clock_excess(self.walls["ref"], self.walls["cand"])
            decision = retime_decision(self.excess, self.slack, self.disturbed, rounds)
            if decision == "keep":
                break
            if decision == "forged":
                reported = sum(r for _, r in self.walls["cand"])
                raise timing_mismatch(self.label, self.excess, self.slack, reported, self.opts.perf_blocks)
            rounds += 1
        self.rounds = rounds
        return ref_blocks, cand_blocks

    def _time_blocks(self, round_no: int) -> tuple[list, list]:
        """One round: `perf_blocks` blocks a side, the sides alternating which goes first."""
        ref, cand = self.ref, self.cand
        ref_blocks: list = []
        cand_blocks: list = []
        self.walls.clear()
        for b in range(self.opts.perf_blocks):
            order = [(ref, ref_blocks, cand), (cand, cand_blocks, ref)]
            seed = replace_seed(self.seed, round_no, self.opts.perf_blocks, b)
            for side, blocks, other in (order if reference_first(b) else order[::-1]):
                block, wall_ms = self._time_block(side, other, b, seed)
                self.walls.setdefault("cand" if side is cand else "ref", []).append((wall_ms, sum(block.times_ms)))
                blocks.append(block.times_ms)
                for k, v in block.phase_s.items():
                    self.child_s[f"block_{k}"] = round(self.child_s.get(f"block_{k}", 0.0) + v, 4)
        return ref_blocks, cand_blocks

    def _time_block(self, side, other, b: int, seed: int):
        """One timing block of `side`, with `other` paused, and the wall ms it took on the
        worker's clock."""
        cand, n = self.cand, self.n
        stopped = self.worker.pause_candidate(other) if other is cand else other.pause()
        try:
            asked = time.monotonic()
            request = TimeBlockRequest(n=n, replace_seed=seed, pad_ms=self.pad_ms, only_set=b if self.slow else None)
            block = self._ask(side, request, f"timing {self.label}")
            # from the request written: whatever the worker does before it (the look at the lock
            # table before a candidate's request outside the timing turn, `lockguard`) is never the
            # candidate's time; `asked` for a child that records no `sent_at`
            wall_ms = (time.monotonic() - max(asked, side.sent_at)) * 1e3
        finally:
            if other is cand:
                self.worker.resume_candidate(cand, stopped)
            else:
                other.resume()
        if len(block.times_ms) != n:
            raise child_failure(side, STAGE, f"timing {self.label}", f"unreadable reply: {len(block.times_ms)} "
                                f"times for {n} timed calls", "protocol")
        if side is cand:
            check_candidate_block(self.label, block, n)
        return block, wall_ms

    def _result(self, timing, marks: list[float]) -> CaseResult:
        opts, ref_prep, cand_prep = self.opts, self.ref_prep, self.cand_prep
        return CaseResult("performance", self.case.label, self.case.to_dict(), True, seeds=self.seeds,
                          seconds=round(marks[-1] - marks[0], 4), ref_ms=timing.ref_ms, cand_ms=timing.cand_ms,
                          speedup=timing.speedup, ci95=[timing.ci_low, timing.ci_high],
                          timing={"calls_per_block": self.n, "blocks": opts.perf_blocks, "input_sets": self.sets,
                                  "one_set_per_block": self.slow,
                                  "ref_block_ms": timing.ref_block_ms, "cand_block_ms": timing.cand_block_ms,
                                  "escape_gap_ms": {"ref": self.ref_gap, "cand": self.cand_gap},
                                  "wall_excess_ms": [round(self.excess, 3), round(self.slack, 3)],
                                  "idle_cpu_s": [round(self.used, 3), round(self.window, 3)],
                                  "pad_ms": self.pad_ms, "autotuners_reset": self.retuned,
                                  "host_sync": {"ref": ref_prep.host_sync, "cand": cand_prep.host_sync},
                                  "tuned": {"ref": ref_prep.tuned, "cand": cand_prep.tuned},
                                  "timed_again": self.rounds, "unsteady": self.disturbed,
                                  "phase_s": phase_seconds(marks), "child_phase_s": self.child_s})

    def _flag_unreliable(self) -> None:
        """The verdict's notes on speedups less reliable than pure device times (once each)."""
        flags, label = self.j.verdict.flags, self.label
        if self.disturbed and not any(f.startswith("unsteady timing") for f in flags):
            flags.append(
                f"unsteady timing ({' and '.join(self.disturbed)}, first at {label}): block times differed more "
                f"than {BLOCK_SPREAD_LIMIT:g}x even when timed {RETIME_ROUNDS + 1} times (something else ran on the "
                "GPU or host, or the call's time depends on more than its inputs' shapes); this speedup is less "
                "reliable")
        waits = [who for who, prep in (("reference", self.ref_prep), ("candidate", self.cand_prep)) if prep.host_sync]
        if waits and not any(f.startswith("host-synchronising") for f in flags):
            flags.append(
                f"host-synchronising calls ({' and '.join(waits)}, first at {label}): the call waits for the GPU "
                "inside (.item(), a size read back, a synchronize), so its time includes host latency and "
                "varies with CPU load; such speedups are less reliable than pure device times")
