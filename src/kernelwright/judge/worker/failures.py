"""How a stage fails: the typed errors of a verdict, how a child's failure becomes one, and the one
retry policy on them.

A failing candidate is a `CaseFailed` of the stage it was in (its verdict); a failing reference
is a `JudgeError` (not the candidate's fault). Every kind is decided from structured fields of a
child's reply (exception class names, the device's error code), never from the words of a reason:
the candidate writes those.
"""

from __future__ import annotations

import os
from typing import Any

from ..common.footprint import PROBLEM_TOO_LARGE_TYPE
from ..common.messages import ErrorReply, MessageError, parse_reply
from ..common.requests import Request
from ..common.verdict import FailureKind, filter_traceback
from .child_process import ChildFailure


class CaseFailed(Exception):
    """The candidate failed `stage`; `kind` is the FailureKind that says how (given as one or its
    value; an unknown value raises here, where the failure is raised, as the judge's own bug)."""

    def __init__(self, stage: str, reason: str, detail: str = "", log_tail: str = "", kind: str = "") -> None:
        super().__init__(reason)
        self.stage, self.reason, self.detail, self.log_tail = stage, reason, detail, log_tail
        self.kind = FailureKind(kind or FailureKind.RUNTIME_ERROR)


class CaseSkipped(Exception):
    """The task's own test skips this input (pytest.skip in an adapter's reference)."""


class CaseNotOfTask(CaseSkipped):
    """A perf case whose call never runs the task's own kernels: the foreign reference launched
    its kernels in the tests but none here (ROCm's rmsnorm_bwd times only the forward kernel its
    test section defines). Timing it would measure the benchmark's harness, not the candidate."""


class JudgeError(Exception):
    """The judge cannot decide (for instance the task's own reference fails). `kind` is the
    FailureKind of the reference's own failure where its reply said (out_of_memory: judged again
    with the GPU to itself), else None."""

    def __init__(self, reason: str, kind: str = "") -> None:
        super().__init__(reason)
        self.kind = FailureKind(kind) if kind else None


class ProbeFailed(Exception):
    """The reference failed on poisoned memory and its process may be unusable: judge again
    without probes."""


def judge_alone_after(kind: str | None) -> bool:
    """The retry policy: whether a failure of this FailureKind is tried again with the GPU to this
    worker alone. Other workers' processes hold GPU memory while checks share the GPU, so running
    out of memory next to them says nothing of the candidate (a real excess fails again, alone).
    Chosen by the failure's kind, from the exception class the child reported, never by the words
    of its message."""
    return kind == "out_of_memory"


def retry_alone(exc: CaseFailed | JudgeError, exclusive_held: bool) -> bool:
    """Whether `exc` is tried again once this worker has the GPU to itself: it failed for want of
    memory while the GPU was shared (failing alone, it is final)."""
    return judge_alone_after(exc.kind) and not exclusive_held


def classify_error(text: str) -> str:
    """Name the failure the way a kernel engineer would, from the error text."""
    lowered = text.lower()
    if "illegal memory access" in lowered or "misaligned address" in lowered:
        return "GPU fault (illegal memory access)"
    if any(k in lowered for k in ("out of memory", "can't allocate memory", "cannot allocate memory",
                                  "memoryerror")):
        return "GPU out of memory" if "cuda" in lowered or "hip" in lowered else "ran out of memory"
    if "sys.exit" in lowered:
        return "called sys.exit"
    if "file too large" in lowered:
        return "hit the file size limit (printed or wrote too much)"
    return "raised an exception"


# Exception classes (the candidate child's `error_types` field: qualified names of the exception's
# bases and causes) that name a failure kind. On the CPU a kernel body that the GPU compiler would
# reject fails inside Triton's interpreter, which wraps it in InterpreterError.
COMPILE_ERROR_TYPES = frozenset({"triton.compiler.errors.CompilationError", "triton.runtime.errors.OutOfResources",
                                 "triton.runtime.errors.PTXASError", "triton.runtime.errors.InterpreterError"})
OUT_OF_MEMORY_TYPES = frozenset({"torch.OutOfMemoryError", "builtins.MemoryError"})
OUT_OF_MEMORY_CODE = 2  # cudaErrorMemoryAllocation and hipErrorOutOfMemory (torch.AcceleratorError.error_code)
CHILD_FAILURE_KINDS = {"timeout": "timeout", "crash": "crash", "protocol": "protocol_error",
                       "too_large": "protocol_error", "resource_limit": "resource_limit"}  # (a candidate can announce any size: its protocol failure)


def error_kind(reply, importing: bool) -> str:
    """The FailureKind of an error reply from a candidate child (a `messages.ErrorReply`, or its
    fields as a dict), from its structured fields only (the exception's class names, the device's
    error code, whether the GPU context is broken); the message is the candidate's to write and is
    never read here."""
    if not isinstance(reply, dict):
        reply = vars(reply)
    types = reply.get("error_types")
    types = [t for t in types if isinstance(t, str)] if isinstance(types, list) else []
    if reply.get("device_fault") is True:
        return "gpu_fault"
    if reply.get("error_code") == OUT_OF_MEMORY_CODE or OUT_OF_MEMORY_TYPES.intersection(types):
        return "out_of_memory"
    if COMPILE_ERROR_TYPES.intersection(types):
        return "compile_error"
    return "import_error" if importing else "runtime_error"


# Frames of these directories in a candidate's traceback are the harness calling it: the
# reflector needs the candidate's frames (and Triton's), not ours.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # src/kernelwright
_JUDGE_DIRS = tuple(os.path.join(_PACKAGE, d) + os.sep for d in ("judge", "tasks"))


def is_judge_frame(path: str) -> bool:
    return path.startswith(_JUDGE_DIRS) or path.startswith("<frozen importlib")


def last_lines(text: str, lines: int = 3, max_chars: int = 300) -> str:
    """The last non-empty lines of a log, joined with " | ", at most `max_chars` (its end)."""
    kept = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    joined = " | ".join(kept)
    return joined if len(joined) <= max_chars else "..." + joined[-max_chars:]


def child_failure(child, stage: str, doing: str, error: str, kind: str,
                  detail: str = "", log_tail: str = "", reply=None) -> Exception:
    """What a failure of `child` while `doing` means for the verdict: the reference's is a
    `JudgeError`, the candidate's a `CaseFailed` of `stage`. `kind`: how it failed ("error" for an
    error reply `reply`, else a `ChildFailure` kind)."""
    log_tail = log_tail or child.log_tail()
    if child.role == "reference" and (kind == "too_large" or (
            reply is not None and PROBLEM_TOO_LARGE_TYPE in (getattr(reply, "error_types", None) or []))):
        # the trusted reference's own estimate (or a reply over the frame limit): the problem,
        # not the judge, does not fit this machine
        return JudgeError(f"the problem is too large for this machine: {error}", "problem_too_large")
    if child.role == "reference":  # its log tail says why (a crash leaves no traceback in the reply)
        return JudgeError(f"the task's reference failed while {doing}: {error}\n{detail}{log_tail}",
                          error_kind(reply, False) if kind == "error" and reply is not None else "")
    if kind == "timeout":
        reason = error  # recv's reason says what ran out (compiling, running, queueing)
    elif kind == "error":
        reason = f"the candidate {classify_error(error)}: {error}"
    elif kind == "crash" and last_lines(log_tail):
        # what native code said as it died ("double free or corruption", a CUDA error) is
        # the best clue there is: the process left no traceback
        reason = f"{error}; its last output: {last_lines(log_tail)}"
    else:
        reason = error
    reason = f"{doing.removeprefix('running ')}: {reason}"
    if detail:  # the candidate's traceback, without the harness frames it was called through
        detail = filter_traceback(detail, lambda path: not is_judge_frame(path), "judge")
    failure = (error_kind(reply if reply is not None else {}, doing == "importing the candidate") if kind == "error"
               else CHILD_FAILURE_KINDS.get(kind, "crash"))
    return CaseFailed(stage, reason, detail=detail, log_tail=log_tail, kind=failure)


def ask(child, request: Request, timeout: float, doing: str, stage: str, cap: float | None = None, note: str = ""):
    """Send one request and return the typed reply. A failing candidate becomes a `CaseFailed` for
    `stage`; a failing reference becomes a `JudgeError` (not the candidate's fault). `timeout` is
    running time (compiling is bounded apart); `cap` and `note`: see `ChildProcess.recv`."""
    try:
        raw = child.request(request, timeout, doing, cap, note)
    except ChildFailure as exc:
        raise child_failure(child, stage, doing, exc.reason, exc.kind, log_tail=exc.log_tail) from None
    return parsed(child, raw, request.op, doing, stage)


def parsed(child, raw: Any, op: str, doing: str, stage: str):
    """The typed message of `child`'s reply `raw` to a request `op`. A malformed one is the
    child's protocol failure (the child is killed); an error reply raises its failure."""

    try:
        reply = parse_reply(raw, op, child.role)
    except MessageError as exc:
        kill = getattr(child, "kill", None)
        if kill is not None:
            kill()
        raise child_failure(child, stage, doing, f"unreadable reply: {exc}", "protocol") from None
    if isinstance(reply, ErrorReply):
        raise child_failure(child, stage, doing, reply.error, "error", detail=reply.traceback, reply=reply)
    return reply
