"""Verdicts: plain data that serializes to JSON. The stage names form the cascade."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STAGES = ("static", "call", "correctness", "performance")
PASSED = "passed"
JUDGE_ERROR = "judge_error"  # the judge itself could not decide (broken reference, lost worker)


@dataclass
class CaseResult:
    kind: str                      # "correctness" or "performance"
    label: str
    params: dict[str, Any]
    ok: bool | None                # None: skipped
    reason: str = ""
    seeds: list[int] = field(default_factory=list)
    launches: int | None = None
    seconds: float | None = None
    error: dict[str, Any] | None = None
    ref_ms: float | None = None
    cand_ms: float | None = None
    speedup: float | None = None
    ci95: list[float] | None = None
    roofline_ms: float | None = None
    timing: dict[str, Any] | None = None


@dataclass
class Verdict:
    task: str
    candidate: str
    stage: str                     # the stage that failed, or "passed"
    call: bool
    correct: bool
    reason: str
    device: dict[str, Any] = field(default_factory=dict)
    speedup: float | None = None   # GEAK: mean over perf cases of ref median / candidate median
    speedup_geomean: float | None = None
    speedup_ci95: list[float] | None = None
    baseline: str = "torch"
    cases: list[CaseResult] = field(default_factory=list)
    kernels: dict[str, int] = field(default_factory=dict)
    detail: str = ""               # traceback or error text, for the reflector
    log_tail: str = ""             # what the candidate printed (never parsed)
    flags: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.stage == PASSED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        data = dict(data)
        data["cases"] = [CaseResult(**c) for c in data.get("cases", [])]
        return cls(**data)
