"""Per-task memory: the attempts of one task-run, as immutable records.

GEAK keeps only the last attempt and edits its history in place; here every attempt is a frozen
`Attempt` that is stored as soon as it exists and never changed. The memory is the tuple of
attempts; every prompt is a view of it (the failing line being debugged, the correct kernels
sorted by performance), computed, never stored.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

if TYPE_CHECKING:
    from ..judge import Verdict

# Why an attempt has no verdict: the model gave no usable code, or the call itself failed.
NO_CODE = "no_code"
LLM_ERROR = "llm_error"



class Mode(str, Enum):
    """How an attempt came about. A mode is its string ("fix" == Mode.FIX, str() and JSON give
    "fix"), which is what the run store keeps, so stored attempts read back unchanged."""

    GIVEN = "given"          # the user's kernel (optimize): judged first, not an iteration
    GENERATE = "generate"    # the first attempt of a task-run
    FRESH = "fresh"          # a new approach, after the debugging trap
    FIX = "fix"              # a fix of a failing attempt, with the reflector's analysis
    OPTIMIZE = "optimize"    # a faster kernel, from the correct ones so far
    TUNE = "tune"            # the tuning pass's kept variant (no LLM call)
    CROSSOVER = "crossover"  # --search evolve: two correct kernels of the archive combined

    def __str__(self) -> str:
        return self.value

    @property
    def by_llm(self) -> bool:
        """Written by the model: counts as one of the run's iterations."""
        return self not in (Mode.GIVEN, Mode.TUNE)


@dataclass(frozen=True)
class CaseTiming:
    label: str
    ref_ms: float | None
    cand_ms: float | None
    speedup: float | None
    ci95: tuple[float, float] | None
    roofline_ms: float | None
    # each side's (fastest, slowest) block median over the timed blocks: the spread of its latency
    # (None in records stored before these fields, and where the verdict kept no block times)
    ref_range: tuple[float, float] | None = None
    cand_range: tuple[float, float] | None = None


@dataclass(frozen=True)
class Attempt:
    task: str
    run: int
    index: int                    # position in the run, from 0
    mode: Mode                    # a plain string is taken too (and made a Mode)
    line: int                     # the approach it belongs to; a fresh strategy starts a new line
    parent: int | None            # the attempt it fixes or optimizes
    code: str | None              # None when the answer held no usable code
    strategy: str = ""            # the model's stated plan (from its answer)
    reflection: str = ""          # the reflector's analysis that led to this attempt
    answer: str = ""              # the model's raw answer (bounded)
    candidate_id: str = ""
    kind: str = NO_CODE           # the verdict's failure kind, "passed", NO_CODE or LLM_ERROR
    stage: str = ""               # the judge's failing stage, or "passed"
    call: bool = False
    correct: bool = False
    speedup: float | None = None  # GEAK's mean speedup, verified by the judge
    speedup_geomean: float | None = None
    speedup_ci95: tuple[float, float] | None = None
    timings: tuple[CaseTiming, ...] = ()
    flags: tuple[str, ...] = ()   # the judge's notes (host-synchronising calls, ...)
    reason: str = ""              # the judge's (or the parser's) one-line reason
    feedback: str = ""            # bounded feedback text for the next prompt
    tokens: int = 0               # tokens of the LLM calls that produced it
    cost_usd: float = 0.0
    judge_s: float = 0.0
    created: float = 0.0
    # the judge's profile of the kernel (Verdict.profile, docs/profile.md): {} when none was made
    # (profiling off, a failing kernel, a record stored before profiles). Not hashed: a dict.
    profile: dict[str, Any] = field(default_factory=dict, hash=False)
    shrink: float | None = None   # the verdict's --shrink F: judged at shrunk sizes (None: its own)
    # --search evolve: what the attempt was built from, by archive keys ("optimize of r1a3;
    # inspirations r0a2, r2a5"): a parent from another island is not this run's `parent`
    origin: str = ""

    def __post_init__(self) -> None:
        if type(self.mode) is not Mode:
            object.__setattr__(self, "mode", Mode(self.mode))

    @property
    def passed(self) -> bool:
        return self.kind == "passed"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Attempt":
        data = dict(data)
        data["timings"] = tuple(CaseTiming(**{**t, **{k: tuple(t[k]) if t.get(k) else None
                                                     for k in ("ci95", "ref_range", "cand_range")}})
                                for t in data.get("timings", ()))
        data["flags"] = tuple(data.get("flags", ()))
        if data.get("speedup_ci95"):
            data["speedup_ci95"] = tuple(data["speedup_ci95"])
        return cls(**data)

    def with_verdict(self, verdict: Verdict, feedback: str) -> "Attempt":
        """A copy carrying the judge's verdict (the attempt is stored only once it has one)."""
        timings = tuple(
            CaseTiming(c.label, c.ref_ms, c.cand_ms, c.speedup, _interval(c.ci95), c.roofline_ms,
                       _block_range(c.timing, "ref_block_ms"), _block_range(c.timing, "cand_block_ms"))
            for c in verdict.cases if c.kind == "performance" and c.cand_ms is not None)
        return replace(
            self, candidate_id=verdict.candidate_id or self.candidate_id, kind=verdict_kind(verdict),
            stage=verdict.stage, call=bool(verdict.call), correct=bool(verdict.correct),
            speedup=verdict.speedup, speedup_geomean=verdict.speedup_geomean,
            speedup_ci95=_interval(verdict.speedup_ci95), timings=timings,
            flags=tuple(verdict.flags), reason=(verdict.reason or "").splitlines()[0][:500] if verdict.reason else "",
            feedback=feedback, judge_s=float(verdict.stage_seconds.get("total", 0.0)),
            # (getattr: a verdict of a judge without profiles has no such field)
            profile=dict(getattr(verdict, "profile", None) or {}), shrink=getattr(verdict, "shrink", None))


def _block_range(timing: dict[str, Any] | None, key: str) -> tuple[float, float] | None:
    """(min, max) of one side's block medians in a case's timing record, or None."""
    values = [v for v in (timing or {}).get(key) or () if isinstance(v, (int, float))]
    return (min(values), max(values)) if values else None


def _interval(ci: Sequence[float] | None) -> tuple[float, float] | None:
    """A verdict's 95% interval (a list of two) as the attempt keeps it."""
    return cast("tuple[float, float]", tuple(ci)) if ci else None


def undecided(attempt: Attempt) -> bool:
    """Whether the judge could not decide this attempt for reasons of its own or the machine's
    (stage judge_error; its kind says why: judge_error, or problem_too_large when the problem's
    inputs do not fit this machine). Not a candidate whose judging kept killing the judge: that
    is the candidate's failure, and a fix may cure it."""
    from ..judge.common.verdict import KILLED_JUDGE

    return attempt.stage == "judge_error" and KILLED_JUDGE not in attempt.flags


def verdict_kind(verdict: Verdict) -> str:
    """The judge's machine-readable failure kind (set by the trusted side), as the attempt keeps it."""
    return verdict.kind.value


def performance_key(attempt: Attempt) -> tuple[float, int]:
    """Ascending order of performance: slower first, the fastest last (GEAK's order). A correct
    kernel without a measured speedup (CPU interpreter) sorts as the slowest, older first."""
    speed = attempt.speedup if attempt.speedup is not None and math.isfinite(attempt.speedup) else -1.0
    return (speed, -attempt.index)


@dataclass(frozen=True)
class TaskMemory:
    """All attempts of one task-run, in order. `add` returns a new memory."""

    attempts: tuple[Attempt, ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, attempts: Iterable[Attempt]) -> "TaskMemory":
        ordered = tuple(sorted(attempts, key=lambda a: a.index))
        for i, a in enumerate(ordered):
            if a.index != i:
                raise ValueError(f"attempt indexes of {a.task} run {a.run} are not 0..n-1 (found {a.index} at {i})")
        return cls(ordered)

    def add(self, attempt: Attempt) -> "TaskMemory":
        if attempt.index != len(self.attempts):
            raise ValueError(f"attempt {attempt.index} added after {len(self.attempts)} attempts")
        return TaskMemory(self.attempts + (attempt,))

    def __len__(self) -> int:
        return len(self.attempts)

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def line(self) -> int:
        return self.last.line if self.last else 0

    def correct(self) -> list[Attempt]:
        """Correct kernels in ascending order of performance (the fastest last)."""
        return sorted((a for a in self.attempts if a.passed), key=performance_key)

    def best(self) -> Attempt | None:
        """The fastest verified kernel; else None (never an unverified one)."""
        correct = self.correct()
        return correct[-1] if correct else None

    def failed_fixes(self) -> int:
        """Failed fixes since the current line's last passing attempt or its start: the count
        the debugging trap watches."""
        count = 0
        for a in reversed(self.attempts):
            if a.line != self.line or a.passed or a.mode != Mode.FIX:
                break
            count += 1
        return count

    def line_attempts(self, line: int | None = None) -> list[Attempt]:
        line = self.line if line is None else line
        return [a for a in self.attempts if a.line == line]

    def abandoned_strategies(self) -> list[str]:
        """One line per earlier approach that never passed, for a fresh start's prompt."""
        out = []
        for line in sorted({a.line for a in self.attempts}):
            attempts = self.line_attempts(line)
            if any(a.passed for a in attempts):
                continue
            first = attempts[0]
            what = (first.strategy or "an approach").strip().splitlines()[0][:200] if first.strategy else "an approach"
            out.append(f"{what} (failed {len(attempts)} times; last: {attempts[-1].reason[:160]})")
        return out
