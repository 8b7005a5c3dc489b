"""The requests of the judge's channels, as typed messages: one dataclass per op.

- A worker asks its children (`CHILD_REQUESTS`): `ChildProcess.request` sends `to_wire()` with
  the channel's sequence number added, and the child's harness rebuilds the request with
  `parse_request` before it acts on it, then dispatches on the request's type.
- The coordinator asks its workers (`WORKER_REQUESTS`): a candidate to judge, or to exit.

Requests go from the trusted side to the other (pickled: `multiprocessing.Connection`), so this
is no defence against a hostile sender, as the replies' checks are (`messages.parse_reply`). It
keeps what each request carries written down in one place, and makes a request built wrong a
clear error: where it is built (each field checked against its type: a judge bug raised in the
worker, its verdict a judge error, never a candidate's failure), and where it arrives (an
unknown op, a field missing, of the wrong type, or one the request has no field for), instead
of a KeyError deep in a handler or a key read as its default.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .messages import MessageError, build, check_fields
from .options import JudgeOptions


@dataclass(kw_only=True)
class Request:
    op: ClassVar[str] = ""
    # whether the child holds the GPU lock shared around this request's GPU work (never inside
    # the worker's own exclusive turn, nor on a GPU with one worker: `Worker.share_gpu`)
    gpu_lock: bool = False

    def __post_init__(self) -> None:
        check_fields(self)

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.op, **{f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# -- a worker to its children ---------------------------------------------------------------------
@dataclass(kw_only=True)
class LoadRequest(Request):
    """Load the code this side runs: the candidate's file (`path`), or the task's reference and,
    for a Triton baseline, the file timed in its place (`baseline_path`). `task_ref`: the task,
    for a spare child forked before its task was known."""
    op: ClassVar[str] = "load"
    task_ref: str | None = None
    path: str | None = None
    baseline_path: str | None = None
    # a confined candidate cannot read the submitted file: its bytes travel with the request
    source: bytes | None = None


@dataclass(kw_only=True)
class RunItem:
    """One correctness item of a `run` request: a case run on inputs drawn from `seed`."""
    case: int
    seed: int
    repeat: bool = False  # call twice (the candidate's determinism and cached-result checks)
    probe: bool = False  # the reference: probe for outputs it leaves undefined
    # the candidate: the bytes of each of the reference's outputs, to poison free memory for
    poison_sizes: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(kw_only=True)
class RunRequest(Request):
    """Run each item and stream one reply per item (stopping at the first failure)."""
    op: ClassVar[str] = "run"
    items: list[RunItem]


@dataclass(kw_only=True)
class SpotRequest(Request):
    """One perf-size call of perf case `case`, its outputs returned at sampled positions. The
    reference draws the positions (`samples` per output) and is probed if `probe`; the
    candidate is given the reference's `positions` and output sizes (`poison_sizes`)."""
    op: ClassVar[str] = "spot"
    case: int
    seed: int
    samples: int = 0
    probe: bool = False
    positions: list[list[int]] = field(default_factory=list)
    poison_sizes: list[int] = field(default_factory=list)


@dataclass(kw_only=True)
class MemoryFractionRequest(Request):
    """Set the candidate's cap on GPU memory (1.0 while its worker has the GPU alone)."""
    op: ClassVar[str] = "memory_fraction"
    fraction: float


@dataclass(kw_only=True)
class RetuneRequest(Request):
    """Forget the autotuners' choices (made next to other workers): tuned again, alone."""
    op: ClassVar[str] = "retune"


@dataclass(kw_only=True)
class PerfPrepareRequest(Request):
    """Make a perf case's rotating input sets (one per seed) and the L2 flush buffer, warm up,
    and estimate one call's time."""
    op: ClassVar[str] = "perf_prepare"
    case: int
    seeds: list[int]
    flush_bytes: int
    warmup_ms: float


@dataclass(kw_only=True)
class GapsRequest(Request):
    """`n` more escape-gap readings of the prepared perf case."""
    op: ClassVar[str] = "gaps"
    n: int


@dataclass(kw_only=True)
class TimeBlockRequest(Request):
    """One timing block of `n` calls: the inputs copied to fresh memory first (`replace_seed`),
    `pad_ms` of GPU time queued ahead of each call, and one input set for the whole block
    (`only_set`, a block number counted round the sets) where calls are slow."""
    op: ClassVar[str] = "time_block"
    n: int
    replace_seed: int | None = None
    pad_ms: float = 0.0
    only_set: int | None = None


@dataclass(kw_only=True)
class PerfReleaseRequest(Request):
    """Let go of the perf case's inputs."""
    op: ClassVar[str] = "perf_release"


@dataclass(kw_only=True)
class MemoryRequest(Request):
    """The child's memory so far (`JudgeOptions.measure_memory`)."""
    op: ClassVar[str] = "memory"


@dataclass(kw_only=True)
class ProfileRequest(Request):
    """The basic profile of perf case `case` on inputs drawn from `seed`: one warm call, then one
    call recorded launch by launch (`sandbox.profiling`)."""
    op: ClassVar[str] = "profile"
    case: int
    seed: int


@dataclass(kw_only=True)
class SyncRequest(Request):
    """Answered last before a verdict: a frame the candidate wrote on the channel itself and left
    unread shows up as one numbered out of turn."""
    op: ClassVar[str] = "sync"


@dataclass(kw_only=True)
class ExitRequest(Request):
    """End the child (or the worker); never numbered, never answered."""
    op: ClassVar[str] = "exit"


# -- the coordinator to its workers ---------------------------------------------------------------
@dataclass(kw_only=True)
class JudgeRequest(Request):
    """Judge the candidate file `candidate_path` on task `task_ref`, with these seeds and these
    options (`JudgeOptions.resolved` for the worker's backend)."""
    op: ClassVar[str] = "judge"
    task_ref: str
    candidate_path: str
    seeds: list[int]
    options: JudgeOptions

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.op, "task_ref": self.task_ref, "candidate_path": self.candidate_path,
                "seeds": list(self.seeds), "options": self.options.to_wire()}


def _table(*classes: type[Request]) -> dict[str, type[Request]]:
    return {cls.op: cls for cls in classes}


CHILD_REQUESTS = _table(LoadRequest, RunRequest, SpotRequest, MemoryFractionRequest, RetuneRequest,
                        PerfPrepareRequest, GapsRequest, TimeBlockRequest, PerfReleaseRequest, MemoryRequest,
                        ProfileRequest, SyncRequest, ExitRequest)
WORKER_REQUESTS = _table(JudgeRequest, ExitRequest)


class UnknownOp(MessageError):
    """A request of an op the receiver does not serve."""


def request_op(raw: Any) -> str:
    """The op a raw request names ("" when it names none), for the error reply to it."""
    op = raw.get("op") if isinstance(raw, dict) else None
    return op if isinstance(op, str) else ""


def request_seq(raw: Any) -> int:
    """The sequence number of a raw request (0 where it has none: the child's first message is
    numbered 0, unasked), echoed by its replies."""
    seq = raw.get("seq") if isinstance(raw, dict) else None
    return seq if type(seq) is int else 0


def parse_request(raw: Any, table: dict[str, type[Request]] = CHILD_REQUESTS) -> Request:
    """The typed request `raw` is, one of `table`'s. `UnknownOp` for an op not in it,
    `MessageError` for a request that is not what its op carries."""
    if not isinstance(raw, dict):
        raise MessageError(f"a request that is not an object ({type(raw).__name__})")
    op = raw.get("op")
    cls = table.get(op) if isinstance(op, str) else None
    if cls is None:
        raise UnknownOp(f"unknown op {op!r}")
    fields = {k: v for k, v in raw.items() if k not in ("op", "seq")}
    if cls is JudgeRequest and isinstance(fields.get("options"), dict):
        try:
            fields["options"] = JudgeOptions.from_wire(fields["options"])
        except (TypeError, ValueError) as exc:
            raise MessageError(f"a judge request's options: {exc}") from None
    known = {f.name for f in dataclasses.fields(cls)}
    extra = sorted(str(k) for k in fields if k not in known)
    if extra:
        raise MessageError(f"a {op!r} request with no field(s) {', '.join(map(repr, extra))}")
    return build(cls, fields, "request")
