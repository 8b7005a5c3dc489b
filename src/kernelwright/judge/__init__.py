"""The judge: decides whether a candidate kernel runs, is correct, and how fast it is.

Trusted side: `pool` (coordinator, static stage), `worker` (cascade, comparisons), `compare`,
`stats`, `hardware`, `static`, `verdict`. Untrusted side: `child` (runs in a forked process that
imports the candidate). `wire` is the format of the private channel between them.
"""

from .common.verdict import (
    FAILURE_KINDS,
    JUDGE_ERROR,
    PASSED,
    STAGES,
    CaseResult,
    FailureKind,
    Verdict,
    judge_error_verdict,
)
from .coordinator.pool import (
    DeviceUnavailable,
    JudgeOptions,
    JudgePool,
    PoolClosed,
    SandboxUnavailable,
    detect_backend,
)

__all__ = [
    "CaseResult", "DeviceUnavailable", "FAILURE_KINDS", "FailureKind", "JUDGE_ERROR", "JudgeOptions", "JudgePool", "PASSED", "PoolClosed", "STAGES", "SandboxUnavailable",
    "Verdict", "detect_backend", "judge_error_verdict",
]
