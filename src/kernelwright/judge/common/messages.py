"""The replies a child sends its worker, as typed messages, parsed and validated at the boundary.

A candidate's process shares its pipe with the candidate, which can write any frame it likes
there (its pipe's descriptor is one `/proc/self/fd` away). So every reply is checked against the
message kind its request asked for before the worker reads a field of it: the kind (`op`) and the
request's sequence number echoed back, every required field present, every field of its type,
tensor descriptions consistent, lists of per-output data of one length, text bounded. What does
not match raises `MessageError`, which the worker turns into that child's `protocol_error` (a
candidate failure; for the trusted reference a judge error), never an internal judge error.

Validation proves a reply well-formed, not honest: a candidate that forges a well-formed reply
with the right sequence number (it can read it from its own process's memory) is not caught here.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import torch

from .wire import _DTYPES

MAX_TEXT_CHARS = 1 << 20  # a reply's strings (errors, tracebacks: the child cuts them at 8000)
MAX_LIST_ITEMS = 1 << 24  # positions sampled per output are a few thousand


class MessageError(ValueError):
    """A reply that is not the message its request asked for."""


@dataclass
class TensorMeta:
    dtype: str
    shape: list[int]
    nbytes: int = 0

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise MessageError(f"unknown dtype {self.dtype[:40]!r}")
        if any(d < 0 for d in self.shape):
            raise MessageError("negative dimension")

    def as_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "nbytes": self.nbytes}


# -- replies ------------------------------------------------------------------------------------
@dataclass
class Reply:
    op: str


@dataclass
class ErrorReply(Reply):
    """`ok: false`: what the child's call raised. The kinds of failure are read from the
    structured fields (class names, device error code, broken context), never from `error`."""
    error: str = "unknown error"
    traceback: str = ""
    error_type: str = ""
    error_types: list[str] = field(default_factory=list)
    error_code: Optional[int] = None
    device_fault: bool = False
    reference_failed: bool = False


@dataclass
class Skipped(Reply):
    """The task's own test skipped this input (pytest.skip in a foreign reference)."""
    skipped: str


@dataclass
class Ready(Reply):
    device: str
    torch: str
    triton: str = ""
    name: str = ""
    backend: str = ""
    l2_bytes: int = 0
    memory_bytes: int = 0
    sm_count: int = 0
    # how the child is confined (`sandbox.confinement.Record.as_dict`), said before any foreign
    # code ran in it: the candidate's becomes its verdict's `sandbox`
    sandbox: dict[str, Any] = field(default_factory=dict)

    def info(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in ("op", "sandbox")}


@dataclass
class Ack(Reply):
    """load, memory_fraction, perf_release, sync: nothing but ok."""


@dataclass
class CandidateRun(Reply):
    outputs: list[torch.Tensor]
    launches: int
    seconds: float
    # digests of the input tensors after the call (digests.tensor_digest): inputs never travel
    input_digests: list[str]
    kernels: dict[str, int] = field(default_factory=dict)
    repeat_outputs: Optional[list[torch.Tensor]] = None
    repeat_launches: int = 0
    # positions (in `outputs`) of output tensors whose memory none of the candidate's own kernel
    # launches was given, in the first call or the repeat
    not_from_kernel: list[int] = field(default_factory=list)
    # a benchmark's test function: its calls to the entry points that returned such a tensor
    foreign_calls: list[str] = field(default_factory=list)
    repeat_not_from_kernel: list[int] = field(default_factory=list)  # the same, of the repeat call
    repeat_foreign_calls: list[str] = field(default_factory=list)
    names: Optional[list[str]] = None  # what the task's own test calls each output

    def check(self) -> None:
        _same_length(self, "outputs", "names")
        _same_length(self, "outputs", "repeat_outputs")
        _indices(self.not_from_kernel, len(self.outputs), "not_from_kernel")
        _indices(self.repeat_not_from_kernel, len(self.outputs), "repeat_not_from_kernel")


@dataclass
class ReferenceRun(Reply):
    reference: list[torch.Tensor]
    meta: list[TensorMeta]
    launches: int
    input_digests: list[str]  # of the inputs as the reference left them (never the inputs themselves)
    undefined: Optional[list[Optional[torch.Tensor]]] = None
    probe_failed: Optional[str] = None
    # per output: whether the reference's own kernels were given its memory (None: a reference
    # that launched no kernel of its own file, a PyTorch one)
    from_kernel: Optional[list[bool]] = None
    names: Optional[list[str]] = None
    # the item's seconds outside Triton compiles, measured by the (trusted) reference process:
    # the candidate's running limit on the same item is scaled from it
    run_s: Optional[float] = None

    def check(self) -> None:
        _same_length(self, "reference", "meta")
        _same_length(self, "reference", "undefined")
        _same_length(self, "reference", "from_kernel")
        _same_length(self, "reference", "names")


@dataclass
class CandidateSpot(Reply):
    samples: list[torch.Tensor]
    nan_counts: list[int]
    meta: list[TensorMeta]
    launches: int
    positions: list[list[int]] = field(default_factory=list)
    tuned: dict[str, str] = field(default_factory=dict)
    not_from_kernel: list[int] = field(default_factory=list)
    foreign_calls: list[str] = field(default_factory=list)
    names: Optional[list[str]] = None

    def check(self) -> None:
        _same_length(self, "meta", "samples")
        _same_length(self, "meta", "nan_counts")
        _same_length(self, "meta", "names")
        _indices(self.not_from_kernel, len(self.meta), "not_from_kernel")


@dataclass
class ReferenceSpot(Reply):
    samples: list[torch.Tensor]
    nan_counts: list[int]
    meta: list[TensorMeta]
    native_meta: list[TensorMeta]
    launches: int
    positions: list[list[int]]
    tuned: dict[str, str] = field(default_factory=dict)
    undefined_samples: Optional[list[Optional[torch.Tensor]]] = None
    undefined_counts: Optional[list[int]] = None
    probe_failed: Optional[str] = None
    from_kernel: Optional[list[bool]] = None
    names: Optional[list[str]] = None

    def check(self) -> None:
        for name in ("samples", "nan_counts", "positions", "undefined_samples", "undefined_counts",
                     "from_kernel", "names"):
            _same_length(self, "native_meta", name)


@dataclass
class PerfPrepare(Reply):
    est_ms: float
    gap_ms: float
    warmup_launches: int
    warmup_calls: int
    flush_ms: float = 0.0
    pad_ms: float = 0.0
    host_ms: float = 0.0
    sets: Optional[int] = None
    slow: bool = False
    host_sync: bool = False
    phase_s: dict[str, float] = field(default_factory=dict)
    tuned: dict[str, str] = field(default_factory=dict)
    patched: list[str] = field(default_factory=list)  # timing functions found replaced (see Harness.patched_timers)


@dataclass
class Gaps(Reply):
    gap_ms: float


@dataclass
class TimeBlock(Reply):
    times_ms: list[float]
    launches: int
    phase_s: dict[str, float] = field(default_factory=dict)
    patched: list[str] = field(default_factory=list)


@dataclass
class Retune(Reply):
    autotuners: int


@dataclass
class MemoryReport(Reply):
    """A child's memory: host RSS when it started (a fork counts the pages it shares with its
    worker), now and at its peak (VmHWM), and the device's peaks (torch's allocator; 0 on the CPU)."""
    rss_start_bytes: int
    rss_bytes: int
    rss_peak_bytes: int
    device_peak_bytes: int = 0
    device_reserved_peak_bytes: int = 0


@dataclass
class LaunchRecord:
    """One launch of a kernel of the side's own file in a profiled call (`sandbox.profiling`).
    Every figure is the untrusted child's word (Triton's metadata, its own events): a profile
    describes, it never decides."""
    kernel: str
    grid: list[int]
    num_warps: int
    num_stages: Optional[int] = None
    registers: Optional[int] = None
    spills: Optional[int] = None
    shared_bytes: Optional[int] = None
    time_ms: Optional[float] = None

    def check(self) -> None:
        if len(self.kernel) > 200:
            raise MessageError("a launch's kernel name of more than 200 characters")
        if len(self.grid) != 3 or any(d < 0 or d > 1 << 31 for d in self.grid):
            raise MessageError(f"a launch's grid {_short(self.grid)}: expected three non-negative sizes")
        for name in ("num_warps", "num_stages", "registers", "spills", "shared_bytes"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 1 << 30:
                raise MessageError(f"a launch's {name} of {_short(value)}")
        if self.time_ms is not None and self.time_ms < 0:
            raise MessageError("a launch of negative time")


@dataclass
class Profile(Reply):
    """A basic profile's recorded call: its own launches (at most 32, `more_launches` beyond),
    the call's device time, and the bytes of its input and output tensors."""
    launches: list[LaunchRecord]
    io_bytes: int
    call_ms: Optional[float] = None
    more_launches: int = 0

    def check(self) -> None:
        if len(self.launches) > 32:
            raise MessageError(f"a profile of {len(self.launches)} launches (at most 32)")
        if self.io_bytes < 0 or self.more_launches < 0 or (self.call_ms is not None and self.call_ms < 0):
            raise MessageError("a profile with a negative size, count or time")


# -- notices ------------------------------------------------------------------------------------
# A child sends these of its own accord while it works on a request, so the worker's clock can
# tell compiling from running (`ChildProcess.recv`). A candidate can forge them: what a forgery
# buys is bounded there (a compile span by `compile_timeout`, tuning allowances by the request's
# cap), never an endless clock.
@dataclass
class CompileNotice:
    """"start" when this process begins compiling Triton kernels (`triton.compiler.compile`, a
    kernel's launcher build, a batch of autotuner configs compiled ahead), "end" when it stops."""
    op: str
    state: str

    def check(self) -> None:
        if self.state not in ("start", "end"):
            raise MessageError(f"a compile notice of state {_short(self.state)}")


@dataclass
class TuneNotice:
    """An autotuner is about to benchmark one config: one more config's allowance of running time."""
    op: str


_NOTICES: dict[str, type] = {"compile": CompileNotice, "tune": TuneNotice}


def parse_notice(raw: Any) -> "CompileNotice | TuneNotice | None":
    """The typed notice `raw` is, None when it is no notice (a reply, or a `gpu_lock` notice,
    which the channel reads itself); `MessageError` for a malformed one."""
    if not isinstance(raw, dict):
        return None
    cls = _NOTICES.get(raw.get("op")) if isinstance(raw.get("op"), str) else None
    if cls is None:
        return None
    return build(cls, raw)


# op -> the message class of an ok reply, by the role of the child that sends it
_OK_REPLIES: dict[str, dict[str, type]] = {
    "ready": {"candidate": Ready, "reference": Ready},
    "load": {"candidate": Ack, "reference": Ack},
    "run": {"candidate": CandidateRun, "reference": ReferenceRun},
    "spot": {"candidate": CandidateSpot, "reference": ReferenceSpot},
    "perf_prepare": {"candidate": PerfPrepare, "reference": PerfPrepare},
    "gaps": {"candidate": Gaps, "reference": Gaps},
    "time_block": {"candidate": TimeBlock, "reference": TimeBlock},
    "retune": {"candidate": Retune, "reference": Retune},
    "memory": {"candidate": MemoryReport, "reference": MemoryReport},
    "memory_fraction": {"candidate": Ack, "reference": Ack},
    "perf_release": {"candidate": Ack, "reference": Ack},
    "sync": {"candidate": Ack, "reference": Ack},
    "profile": {"candidate": Profile, "reference": Profile},
}
# replies that may say the task's own test skipped the input (a reference only)
_MAY_SKIP = {"run", "spot"}


def parse_reply(raw: Any, op: str, role: str) -> Reply:
    """The typed message of a reply to a request `op` from a child of `role`; `MessageError` when
    it is not one. (The sequence number was matched by the channel, `ChildProcess.recv`.)"""
    if not isinstance(raw, dict):
        raise MessageError(f"a reply that is not an object ({type(raw).__name__})")
    if raw.get("op", op) != op:  # (the channel already matched it to the request, by op and number)
        raise MessageError(f"a {_short(raw.get('op'))} reply to a {op!r} request")
    ok = raw.get("ok", True if op == "ready" else None)  # (the first message has no 'ok')
    raw = {**raw, "op": op}
    if not isinstance(ok, bool):
        raise MessageError("'ok' missing or not a boolean")
    if not ok:
        return build(ErrorReply, raw)
    if role == "reference" and op in _MAY_SKIP and "skipped" in raw:
        return build(Skipped, raw)
    classes = _OK_REPLIES.get(op)
    if classes is None or role not in classes:
        raise MessageError(f"no reply is expected to a {op!r} request")
    return build(classes[role], raw)


def _short(value: Any) -> str:
    return repr(value)[:40]


# a message class's field types, resolved once (replies are parsed, requests built, by the thousand)
_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    return hints


def check_fields(message: Any) -> None:
    """Every field of the dataclass `message` checked against its type as `build` checks a parsed
    one (and an int given for a float made a float); `MessageError` for the first that is not."""
    hints = _type_hints(type(message))
    for f in dataclasses.fields(message):
        setattr(message, f.name, _coerce(getattr(message, f.name), hints[f.name], f.name))


def build(cls: type, raw: dict, what: str = "reply", where: str = "") -> Any:
    """The message `cls` made of `raw`'s fields, each checked against its type (`_coerce`), then
    its own `check`; `MessageError` says what is wrong. `what`: "reply" or "request" ("" for a
    part of one); `where`: the part's place ("items[0]." for a request's first item)."""
    hints = _type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in raw:
            values[f.name] = _coerce(raw[f.name], hints[f.name], where + f.name)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise MessageError(f"{' '.join(filter(None, (cls.__name__, what)))} lacks its field {where + f.name!r}")
    try:
        message = cls(**values)
    except TypeError as exc:  # (cannot happen for fields checked above; kept for safety)
        raise MessageError(f"{cls.__name__}: {exc}") from None
    check = getattr(message, "check", None)
    if check is not None:
        check()
    return message


def _coerce(value: Any, tp: Any, where: str) -> Any:
    """`value` checked against the type `tp` (ints accepted where floats are expected)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return value
    if origin is Union or origin is types.UnionType:  # Optional[X], and X | None
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(value, inner[0], where)
    if origin is list:
        if not isinstance(value, list):
            raise MessageError(f"{where}: expected a list, got {type(value).__name__}")
        if len(value) > MAX_LIST_ITEMS:
            raise MessageError(f"{where}: a list of {len(value)} items")
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise MessageError(f"{where}: expected an object, got {type(value).__name__}")
        return {_coerce(k, args[0], where): _coerce(v, args[1], f"{where}.{_short(k)}") for k, v in value.items()}
    if tp is TensorMeta:
        if not isinstance(value, dict):
            raise MessageError(f"{where}: expected a tensor description")
        return _meta(value, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):  # a part of a request (`requests.RunItem`)
        if isinstance(value, tp):
            return value
        if not isinstance(value, dict):
            raise MessageError(f"{where}: expected an object, got {type(value).__name__}")
        return build(tp, value, "", where + ".")
    if tp is torch.Tensor:
        if not isinstance(value, torch.Tensor):
            raise MessageError(f"{where}: expected a tensor, got {type(value).__name__}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise MessageError(f"{where}: expected a boolean, got {type(value).__name__}")
        return value
    if tp is int:
        if type(value) is not int:
            raise MessageError(f"{where}: expected an integer, got {type(value).__name__}")
        return value
    if tp is float:
        if type(value) not in (int, float) or not math.isfinite(value):
            raise MessageError(f"{where}: expected a finite number, got {_short(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise MessageError(f"{where}: expected text, got {type(value).__name__}")
        if len(value) > MAX_TEXT_CHARS:
            raise MessageError(f"{where}: {len(value)} characters of text")
        return value
    if tp is bytes:  # (a request's only: a candidate's source, sent to its confined process)
        if not isinstance(value, bytes):
            raise MessageError(f"{where}: expected bytes, got {type(value).__name__}")
        return value
    raise MessageError(f"{where}: no rule for {tp!r}")  # a bug here, reported as the reply's


def _meta(value: dict, where: str) -> TensorMeta:
    try:
        dtype, shape = value["dtype"], value["shape"]
    except KeyError as exc:
        raise MessageError(f"{where}: tensor description lacks {exc.args[0]!r}") from None
    return TensorMeta(_coerce(dtype, str, f"{where}.dtype"), _coerce(shape, list[int], f"{where}.shape"),
                      _coerce(value.get("nbytes", 0), int, f"{where}.nbytes"))


def _same_length(message: Any, first: str, other: str) -> None:
    a, b = getattr(message, first), getattr(message, other)
    if a is not None and b is not None and len(a) != len(b):
        raise MessageError(f"{type(message).__name__}: {len(b)} {other} for {len(a)} {first}")


def _indices(values: list[int], n: int, where: str) -> None:
    if any(not 0 <= v < n for v in values):
        raise MessageError(f"{where}: an index outside the {n} outputs")
