"""The tuning pass: no LLM. The best verified kernel of a task-run gets its launch parameters
swept (block sizes, num_warps, num_stages, a pinned autotune config), every variant is judged,
and the fastest correct one that beats the original is kept as an attempt of its own (mode
"tune"), so a report can tell what the model gave from what the tuning gave.

    launchknobs.variants(code, n)   pure source rewrites, each differing from `code` only in the
                                    literals it must change (the rewrite rules: launchknobs.py)
    tune(...)                       judges them in parallel within a TuneBudget, keeps the winner
                                    (the keep rule: `_beats`)
"""

from __future__ import annotations

import math
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..launchknobs import Variant, variants_and_why
from .memory import Attempt, Mode
from .protocols import Judge

if TYPE_CHECKING:
    from ..judge import Verdict
    from ..tasks import Task

MIN_GAIN = 1.01            # a kept variant is at least 1% faster (see _beats)


@dataclass(frozen=True)
class TuneBudget:
    max_variants: int = 12        # variants judged at most
    max_seconds: float = 600.0    # wall-clock budget of the pass


@dataclass(frozen=True)
class TuneResult:
    attempt: Attempt | None       # the fastest correct variant that beats `best` (mode "tune"), else None
    tried: int                    # variants judged to a verdict
    passed: int                   # of which passed
    judge_seconds: float          # wall-clock seconds from the first submission to the last wait
    notes: list[str] = field(default_factory=list)   # one line per variant, then the outcome


# -- the pass ----------------------------------------------------------------------------------------
def _beats(verdict: Verdict, original: float) -> bool:
    """The keep rule. The judge interleaves the reference and the candidate and reports the
    speedup against the reference, so speedups of two verdicts of one task are comparable. A
    variant is kept when the lower end of its speedup's 95% interval lies above the original's
    measured speedup (the gain is not timing noise) and its speedup is at least 1% higher
    (MIN_GAIN: a gain worth an attempt of its own); without an interval, the 1% rule alone."""
    s = verdict.speedup
    if s is None or not math.isfinite(s) or s <= original * MIN_GAIN:
        return False
    ci = verdict.speedup_ci95
    return not ci or ci[0] > original


def _num(x: float) -> str:
    return f"{x:.3f}" if abs(x) >= 0.1 else f"{x:.3g}"   # (interpreter speedups are ~0.001x)


def _speed(verdict: Verdict) -> str:
    if verdict.speedup is None:
        return "speed not measured"
    ci = f" (95% CI {_num(verdict.speedup_ci95[0])}-{_num(verdict.speedup_ci95[1])})" if verdict.speedup_ci95 else ""
    return f"{_num(verdict.speedup)}x{ci}"


def tune(task: Task, best: Attempt | None, judge: Judge, budget: TuneBudget, next_index: int, run: int,
         line: int | None = None) -> TuneResult:
    """Judge launch-parameter variants of `best` (a verified attempt) and return the fastest
    correct one that beats it, as an Attempt of mode "tune" (index `next_index`, parent
    `best.index`, in `line`, by default `best.line`: the same approach), not yet stored. Every
    variant is submitted at once (the pool judges them in parallel); past `budget.max_seconds`
    the pass stops waiting, and variants not yet started are cancelled."""
    started = time.monotonic()
    name = getattr(task, "name", str(task))
    if best is None or not best.code or not best.passed:
        return TuneResult(None, 0, 0, 0.0, ["no verified kernel to tune"])
    if best.speedup is None or not math.isfinite(best.speedup):
        return TuneResult(None, 0, 0, 0.0, [f"attempt {best.index} has no measured speed (the judge ran without "
                                            "perf, or on the CPU without timing): nothing can be kept"])
    found, why = variants_and_why(best.code, budget.max_variants)
    if not found:
        return TuneResult(None, 0, 0, 0.0, [why])
    deadline = started + max(0.0, budget.max_seconds)
    futures: dict[Future[Verdict], tuple[int, Variant]] = {}
    verdicts: dict[int, Verdict] = {}
    notes: dict[int, str] = {}
    for i, v in enumerate(found):
        cid = f"{name}-r{run}-tune{next_index}.{i}-{uuid.uuid4().hex[:8]}"
        try:
            futures[judge.submit(task, v.code, cid)] = (i, v)
        except Exception as exc:  # noqa: BLE001 - the judge refused: this variant has no verdict
            notes[i] = f"{v.description} -> not judged: {exc!r}"[:300]
    first_submit = time.monotonic()
    waiting = set(futures)
    while waiting:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        done, waiting = wait(waiting, timeout=left, return_when=FIRST_COMPLETED)
        for f in done:
            i, v = futures[f]
            try:
                verdict = f.result()
            except Exception as exc:  # noqa: BLE001 - the pool closed, or a judge bug
                notes[i] = f"{v.description} -> the judge could not decide: {exc!r}"[:300]
                continue
            verdicts[i] = verdict
            notes[i] = f"{v.description} -> {verdict.kind}" + (f" / {_speed(verdict)}" if verdict.passed else "")
    for f in waiting:  # over the budget: what has not started never will; what runs may finish
        f.cancel()
        i, v = futures[f]
        notes[i] = f"{v.description} -> not judged: the pass's {budget.max_seconds:g} s budget ran out"
    judge_seconds = time.monotonic() - first_submit
    passed = {i: vd for i, vd in verdicts.items() if vd.passed}
    winners = [(vd.speedup, -i, i) for i, vd in passed.items() if _beats(vd, best.speedup)]
    lines = [notes[i] for i in sorted(notes)]
    if not winners:
        measured = any(vd.speedup is not None for vd in passed.values())
        why = ("no variant beats the original's" if measured or not passed else
               "the variants' speed was not measured: nothing can be kept; the original's")
        lines.append(f"{why} {_num(best.speedup)}x (attempt {best.index}) by the keep rule")
        return TuneResult(None, len(verdicts), len(passed), judge_seconds, lines)
    _, _, i = max(winners)
    verdict, variant = passed[i], found[i]
    attempt = Attempt(name, run, next_index, Mode.TUNE, best.line if line is None else line, best.index, variant.code,
                      strategy=f"tuning: {variant.description}", tokens=0, cost_usd=0.0,
                      candidate_id=verdict.candidate_id or "", created=time.time())
    attempt = attempt.with_verdict(verdict, verdict.feedback())
    lines.append(f"kept {variant.description}: {_speed(verdict)} over the original's {_num(best.speedup)}x "
                 f"(attempt {best.index})")
    return TuneResult(attempt, len(verdicts), len(passed), judge_seconds, lines)
