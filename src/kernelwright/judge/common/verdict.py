"""Verdicts: plain data that serializes to JSON. The stage names form the cascade."""

from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Callable

STAGES = ("static", "call", "correctness", "performance")
PASSED = "passed"
JUDGE_ERROR = "judge_error"  # the judge itself could not decide (broken reference, lost worker)


class FailureKind(str, Enum):
    """What went wrong, as one word an agent can branch on (the reason says it in English).

    Set by the trusted side (worker, pool) where each failure is raised, from structured data:
    which check failed, the exception *type* the candidate child reports in its own field, how the
    child died. Never from the English text of a reason, which the candidate can write itself
    (a candidate that prints "out of memory" and is simply wrong is `wrong_values`)."""

    PASSED = "passed"
    # static stage (the coordinator, AST only)
    SYNTAX_ERROR = "syntax_error"              # does not parse (or is not UTF-8)
    TOO_LARGE = "too_large"                    # the source is over the static stage's size limit
    MISSING_ENTRY_POINT = "missing_entry_point"
    NO_TRITON_KERNEL = "no_triton_kernel"
    # the candidate's process
    IMPORT_ERROR = "import_error"              # importing the candidate raised (or exited)
    COMPILE_ERROR = "compile_error"            # Triton compilation failed (CompilationError, OutOfResources)
    RUNTIME_ERROR = "runtime_error"            # a call raised
    TIMEOUT = "timeout"
    CRASH = "crash"                            # the process died: a signal, an exit
    GPU_FAULT = "gpu_fault"                    # the device context broke (illegal address, ...)
    OUT_OF_MEMORY = "out_of_memory"            # torch.OutOfMemoryError, MemoryError
    PROTOCOL_ERROR = "protocol_error"          # an unreadable reply from the candidate child
    RESOURCE_LIMIT = "resource_limit"          # over its sandbox's bytes written or processes (worker/limits.py)
    # what the worker's checks found
    WRONG_VALUES = "wrong_values"
    WRONG_SHAPE_DTYPE = "wrong_shape_dtype"    # also: the wrong number of outputs
    UNWRITTEN_OUTPUT = "unwritten_output"      # poisoned memory (0xFF bytes) read back
    MUTATED_INPUT = "mutated_input"
    NO_KERNEL_LAUNCH = "no_kernel_launch"      # its own Triton kernels never launched
    OUTPUT_NOT_FROM_KERNEL = "output_not_from_kernel"  # an output no launch of its own kernels was given
    CACHED_RESULT = "cached_result"            # a later call launched nothing
    NONDETERMINISTIC = "nondeterministic"
    TIMING_CHEAT = "timing_cheat"              # escaping the timed stream, below the roofline
    TIMER_PATCHED = "timer_patched"            # a clock, timer or the harness's timing code replaced in its process
    TIMING_MISMATCH = "timing_mismatch"        # reported block times far below what the worker's own clock saw
    BACKGROUND_WORK = "background_work"        # threads or processes still using the CPU after its calls returned
    GPU_LOCK_HELD = "gpu_lock_held"            # its processes held the judge's GPU lock with no request in flight
    PERF_MISMATCH = "perf_mismatch"            # wrong values at the timed sizes
    JUDGE_ERROR = "judge_error"
    # the problem's inputs and outputs do not fit this machine (the reference's estimate before
    # building them, or outputs over the reply limit): a judge_error stage, with its sizes
    PROBLEM_TOO_LARGE = "problem_too_large"

    def __str__(self) -> str:
        return self.value


FAILURE_KINDS = tuple(k.value for k in FailureKind)


def output_name(i: int, names: list[str] | None, n: int) -> str:
    """How a failure names output `i` of `n`: what the task's own test calls it (a TritonBench-T
    result key, `test_case_2[0]`), else "output" when there is one, else "output i"."""
    if names and i < len(names) and isinstance(names[i], str) and names[i]:
        return names[i][:200]
    return "output" if n == 1 else f"output {i}"


# a frame as tracebacks write it ('  File "x.py", line 3, in f') and as faulthandler does
# ('  File "x.py", line 3 in f'); and a run of frames dropped by an earlier filter
_FRAME = re.compile(r'^  File "(.*)", line \d+(?:,? in .*)?$')
_OMITTED = re.compile(r"^  \[(\d+) .*frame\(s\) omitted\]$")
# kinds whose log tail (what the candidate printed, a faulthandler stack) says what happened
_LOG_KINDS = {"crash", "timeout", "gpu_fault", "protocol_error", "out_of_memory"}


def filter_traceback(text: str, keep_file: Callable[[str], bool], what: str = "other") -> str:
    """`text` (tracebacks as Python formats them) with only the frames whose file `keep_file`
    accepts; each run of dropped frames becomes one line saying how many. Exception lines and
    the "During handling..." separators stay."""
    out: list[str] = []
    dropped = 0
    in_frame = keeping = False
    for line in text.splitlines():
        omitted = _OMITTED.match(line)
        if omitted:
            dropped += int(omitted.group(1))
            in_frame = keeping = False
            continue
        match = _FRAME.match(line)
        if match:
            in_frame, keeping = True, keep_file(match.group(1))
            if keeping:
                if dropped:
                    out.append(f"  [{dropped} {what} frame(s) omitted]")
                    dropped = 0
                out.append(line)
            else:
                dropped += 1
            continue
        if in_frame and line.startswith("    "):  # the frame's source line and its ^^^ marks
            if keeping:
                out.append(line)
            continue
        in_frame = False
        if dropped:
            out.append(f"  [{dropped} {what} frame(s) omitted]")
            dropped = 0
        out.append(line)
    if dropped:
        out.append(f"  [{dropped} {what} frame(s) omitted]")
    return "\n".join(out)


# a thread's header in a faulthandler dump (the stacks a hung child's worker asks it for)
_THREAD = re.compile(r"^(?:Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):$")


def hang_stack(log_tail: str, candidate: str, max_frames: int = 8) -> list[str]:
    """Where a hung candidate was: the frames of the faulthandler dump in `log_tail` that are in
    the candidate's own file, innermost first, one thread after another; when no thread was in
    its file (a hang inside a library), the innermost frames of the first thread instead. At
    most `max_frames`, each as '  File "...", line N in f'; [] when the tail has no dump. For
    display only: the log tail is what the candidate's process printed, which it can forge, so
    nothing is decided from it."""
    threads: list[list[str]] = []
    for line in log_tail.splitlines():
        if _THREAD.match(line):
            threads.append([])
        elif threads and _FRAME.match(line):
            threads[-1].append(line)
    own = [frame for frames in threads for frame in frames
           if _same_file(_FRAME.match(frame).group(1), candidate)]
    return (own or (threads[0] if threads else []))[:max_frames]


def submitted_path(verdict: "Verdict", copy: str) -> None:
    """A confined candidate ran from a copy of its source in its scratch: its tracebacks and
    stacks name that copy. Name the submitted file instead, everywhere the verdict shows them
    (the reflector reads them against the code it wrote, and the copy is gone)."""
    if not copy or copy == verdict.candidate:
        return
    verdict.reason = verdict.reason.replace(copy, verdict.candidate)
    verdict.detail = verdict.detail.replace(copy, verdict.candidate)
    verdict.log_tail = verdict.log_tail.replace(copy, verdict.candidate)
    for case in verdict.cases:
        case.reason = case.reason.replace(copy, verdict.candidate)


def _same_file(a: str, b: str) -> bool:
    return bool(a) and bool(b) and os.path.normpath(a) == os.path.normpath(b)


def shorten(text: str, max_chars: int, marker: str = "\n[... {n} characters cut ...]\n") -> str:
    """`text` at most `max_chars` long: its middle replaced by a marker saying how much went."""
    if len(text) <= max_chars:
        return text
    budget = max(0, max_chars - len(marker) - 8)
    head, tail = budget // 2, budget - budget // 2
    cut = len(text) - head - tail
    return text[:head] + marker.format(n=cut) + (text[-tail:] if tail else "")


def _mismatch_summary(error: dict[str, Any]) -> str:
    """What compare reported about a failing output, one line."""
    parts = []
    if "mismatched" in error and "total" in error:
        parts.append(f"{error['mismatched']} of {error['total']} elements wrong")
    if "first_index" in error:
        parts.append(f"first at {tuple(error['first_index'])}: got {error.get('got')!r}, "
                     f"expected {error.get('expected')!r}")
    if error.get("max_abs_error") is not None:
        parts.append(f"max abs error {error['max_abs_error']:.4g}")
    expected, got = error.get("expected"), error.get("got")
    if isinstance(expected, (int, float)) and isinstance(got, (int, float)) and expected:
        parts.append(f"relative error there {abs(got - expected) / abs(expected):.3g}")
    if error.get("nan_where_reference_finite"):
        parts.append(f"{error['nan_where_reference_finite']} NaN where the reference is finite")
    if error.get("poisoned"):
        parts.append(f"{error['poisoned']} never written (still the 0xFF poison)")
    if "atol" in error:
        parts.append(f"tolerance atol={error['atol']:g} rtol={error.get('rtol', 0):g}")
    return "; ".join(parts)


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
    failure: str = ""              # the FailureKind of a failing case ("" otherwise)


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
    # how it ended, for an agent to branch on; its value in a stored verdict (a str-valued Enum:
    # the JSON holds "wrong_values"). Required: whoever decides a verdict decides its kind.
    kind: FailureKind = field(kw_only=True)
    candidate_id: str = ""         # the submitter's name for the candidate (JudgePool.submit)
    # peak memory per process, when measured (JudgeOptions.measure_memory): "reference",
    # "candidate" (a child's MemoryReport fields), "worker" (rss_bytes, rss_peak_bytes)
    memory: dict[str, Any] = field(default_factory=dict)
    # how the candidate's process was confined (`--sandbox`): level, layers in effect, what is
    # missing on this machine (`judge/sandbox/confinement.py`); empty when nothing ran it
    sandbox: dict[str, Any] = field(default_factory=dict)
    # the basic (or full) profile of a passing candidate and its reference on the largest timed
    # perf case (`judge/common/profile.py`, docs/judge.md): {} when off or failed, {"skipped": why}
    # where none could be made; it never changes anything else of the verdict
    profile: dict[str, Any] = field(default_factory=dict)
    # --shrink F: the task was judged at problem sizes shrunk to about F of their bytes
    # (tasks/shrink.py; its cases' labels and parameters are the shrunk ones); None: its own sizes
    shrink: float | None = None

    def __post_init__(self) -> None:
        self.kind = FailureKind(self.kind)  # (its value, read back from a stored verdict, or a typo: ValueError)

    @property
    def passed(self) -> bool:
        return self.stage == PASSED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def feedback(self, max_chars: int = 3000) -> str:
        """A compact text about this verdict for an LLM reflector: stage and kind, the reason,
        the failing case (label, parameters, seeds) and what the comparison found, the traceback
        frames in the candidate's own file, and the end of its log when it crashed or hung.
        At most `max_chars` (the middle is cut, with a marker)."""
        if self.passed:
            lines = [f"verdict: passed (kind passed) - {self.reason}"]
            if self.speedup is not None:
                ci = f" (95% CI {self.speedup_ci95[0]:.3f}-{self.speedup_ci95[1]:.3f})" if self.speedup_ci95 else ""
                shrunk = f" at sizes shrunk by --shrink {self.shrink:g}" if self.shrink is not None else ""
                lines.append(f"speedup over the {self.baseline} baseline{shrunk}: {self.speedup:.3f}x{ci}")
            return shorten("\n".join(lines), max_chars)
        lines = [f"verdict: failed at stage {self.stage} (kind {self.kind})", f"reason: {self.reason}"]
        failing = next((c for c in self.cases if c.ok is False), None)
        if failing is not None:
            seeds = f", seeds {failing.seeds}" if failing.seeds else ""
            lines.append(f"failing case: {failing.kind} {failing.label} {failing.params}{seeds}")
            if failing.error:
                lines.append(f"comparison: {_mismatch_summary(failing.error)}")
        if self.detail.strip():
            own = filter_traceback(self.detail, lambda f: _same_file(f, self.candidate), "judge/library")
            lines += ["traceback (frames in the candidate's file):", own.strip()]
        if self.kind in _LOG_KINDS and self.log_tail.strip():
            # (a timeout's tail is every thread's stack: the candidate's frames are what matter)
            log = filter_traceback(self.log_tail, lambda f: _same_file(f, self.candidate), "judge/library")
            tail = [line for line in log.splitlines() if line.strip()][-15:]
            lines += ["last lines the candidate's process printed:", *tail]
        return shorten("\n".join(lines), max_chars)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Verdict":
        """A verdict from its `to_dict` (a worker's reply, a stored verdict read back)."""
        data = dict(data)
        if not data.get("kind"):
            raise ValueError(f"a verdict of task {data.get('task')!r} without a kind (stored before verdicts had "
                             "kinds?): judge it again")
        data["cases"] = [CaseResult(**c) for c in data.get("cases", [])]
        return cls(**data)


def judge_error_verdict(task: str, candidate: str, reason: str, *, detail: str = "",
                        seeds: list[int] | None = None, candidate_id: str = "") -> Verdict:
    """The verdict of a candidate the judge could not decide (a lost or stopped worker, a judge
    bug, a candidate whose judging killed the judge twice): stage and kind `judge_error`, nothing
    called, nothing correct. Every judge_error verdict of the coordinator and the agent is made
    here, so they all look alike."""
    return Verdict(task=task, candidate=candidate, stage=JUDGE_ERROR, call=False, correct=False, reason=reason,
                   detail=detail, seeds=list(seeds or []), kind=JUDGE_ERROR, candidate_id=candidate_id)


# A resumed run (`--resume`, judge-suite's results file) judges a candidate whose judging started
# before and never gave a verdict (the judging process died: killed, out of memory, the candidate
# killed it) once more; one whose judging started this often without a verdict is not judged again.
MAX_JUDGE_STARTS = 2


# The flag of that judge_error (set by the agent's trusted side, agent/judging.py): the judge
# could not decide because the candidate's own judging kept killing it, so the failure is the
# candidate's to fix, unlike a broken reference or a problem too large for the machine.
KILLED_JUDGE = "killed_judge"


def killed_judge_reason(started: list[float]) -> str:
    """The reason of the judge_error recorded for a candidate whose judging started `started`
    (epoch seconds) and never ended in a verdict, MAX_JUDGE_STARTS times or more."""
    when = " and ".join(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) for t in started)
    times = "twice" if len(started) == 2 else f"{len(started)} times"
    return (f"judging this candidate killed the judge {times} (its judging started at {when} and no verdict "
            "came back: the judging process died each time); not judged again")
