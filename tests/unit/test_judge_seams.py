"""The judge's typed seams (issue 27 item 2): options rebuilt from their wire dict, requests as
typed messages parsed where they arrive, each stage's narrow view of its worker.

mypy type-checks the seams' modules and this file (`[tool.mypy]` in pyproject.toml; run by
tests/agent/test_protocols.py): the functions below assign the real `Worker` to each stage's
protocol, so a member renamed on either side fails it. At run time, without mypy, each
protocol member must be on `Worker` too."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from kernelwright.judge.common.messages import MessageError
from kernelwright.judge.common.options import ChildOptions, JudgeOptions, WorkerOptions
from kernelwright.judge.common.requests import (
    CHILD_REQUESTS,
    WORKER_REQUESTS,
    ExitRequest,
    GapsRequest,
    JudgeRequest,
    LoadRequest,
    MemoryFractionRequest,
    MemoryRequest,
    PerfPrepareRequest,
    PerfReleaseRequest,
    Request,
    RetuneRequest,
    RunItem,
    RunRequest,
    SpotRequest,
    SyncRequest,
    TimeBlockRequest,
    UnknownOp,
    parse_request,
)
from kernelwright.judge.sandbox.candidate import CandidateHarness
from kernelwright.judge.sandbox.reference import ReferenceHarness
from kernelwright.judge.sandbox.timer import TIMING_METHODS
from kernelwright.judge.worker.interfaces import (
    CheckingWorker,
    GuardedWorker,
    TimingWorker,
)
from kernelwright.judge.worker.process import Worker

JUDGE = Path(__file__).resolve().parents[2] / "src" / "kernelwright" / "judge"


# -- what mypy checks: the worker where each stage's protocol is expected ------------------------
def as_checking(worker: Worker) -> CheckingWorker:
    return worker


def as_timing(worker: Worker) -> TimingWorker:
    return worker


def as_guarded(worker: Worker) -> GuardedWorker:
    return worker


# -- options ------------------------------------------------------------------------------------
def test_judge_options_travel_as_the_same_dict_and_come_back_whole():
    options = JudgeOptions(seeds=2, seed=7, perf=None, run_timeout=12.0, max_perf_cases=3)
    wire = options.for_request("cpu")
    # the dict is what it always was (a suite's stored verdicts are keyed by a digest of it)
    assert wire == dict(dataclasses.asdict(options), perf=False)
    assert options.for_request("cuda")["perf"] is True
    assert JudgeOptions.from_wire(wire) == dataclasses.replace(options, perf=False)
    assert JudgeOptions.from_wire({}) == JudgeOptions()  # defaults written once, in the dataclass


def test_an_unknown_option_is_an_error_that_names_it():
    with pytest.raises(ValueError, match="unknown option.*'run_timout'"):
        JudgeOptions.from_wire({"seeds": 1, "run_timout": 3.0})
    with pytest.raises(ValueError, match="'gpu_worker'"):
        WorkerOptions.from_wire({"gpu_worker": 1})
    with pytest.raises(TypeError):
        JudgeOptions.from_wire([("seeds", 1)])


def test_worker_and_child_options_keep_the_defaults_the_worker_used():
    assert WorkerOptions() == WorkerOptions(memory_fraction=0.45, gpu_workers=2, cache_root=None,
                                            start_timeout=300.0, cpu_threads=1)
    assert WorkerOptions().memory_fraction == JudgeOptions().memory_fraction
    assert WorkerOptions.from_wire(WorkerOptions(gpu_workers=1).to_wire()) == WorkerOptions(gpu_workers=1)
    assert ChildOptions().max_file_bytes == 64 << 20 and ChildOptions().memory_fraction is None


def _receivers(node: ast.expr) -> str:
    return ast.unparse(node)


def test_no_option_is_read_by_string_key_in_the_judge():
    """Options are read as attributes: `opts.get("x", default)` wrote a second default and hid a
    misspelt name; `opts["x"]` hid which options a stage reads."""
    names = {"opts", "options", "self.opts", "self.options", "j.opts", "judging.opts", "request_opts"}
    found = []
    for path in sorted(JUDGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                    and _receivers(node.func.value) in names:
                found.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Subscript) and _receivers(node.value) in names:
                found.append(f"{path.name}:{node.lineno}")
    assert not found, found


# -- requests -----------------------------------------------------------------------------------
EVERY_REQUEST: list[Request] = [
    LoadRequest(task_ref="tiny_add", path="/c.py", gpu_lock=True),
    LoadRequest(task_ref="tiny_add", baseline_path=None),
    RunRequest(items=[RunItem(case=0, seed=3, repeat=True), RunItem(case=1, seed=4, poison_sizes=[16])],
               gpu_lock=True),
    SpotRequest(case=2, seed=5, samples=4096, probe=True),
    SpotRequest(case=2, seed=5, positions=[[0, 3], []], poison_sizes=[64, 0]),
    MemoryFractionRequest(fraction=0.45),
    RetuneRequest(),
    PerfPrepareRequest(case=1, seeds=[9, 10, 11], flush_bytes=1 << 20, warmup_ms=25.0),
    GapsRequest(n=5),
    TimeBlockRequest(n=10, replace_seed=12, pad_ms=0.02, only_set=None),
    TimeBlockRequest(n=3, replace_seed=None, only_set=4),
    PerfReleaseRequest(),
    MemoryRequest(),
    SyncRequest(),
    ExitRequest(),
]


@pytest.mark.parametrize("request_", EVERY_REQUEST, ids=lambda r: r.op)
def test_every_child_request_comes_back_as_sent(request_: Request):
    wire = request_.to_wire()
    assert wire["op"] == request_.op and all(isinstance(v, (int, float, str, list, type(None))) for v in wire.values())
    assert parse_request(dict(wire, seq=7)) == request_


def test_a_judge_request_carries_its_options_typed():
    request = JudgeRequest(task_ref="tiny_add", candidate_path="/c.py", seeds=[1, 2],
                           options=JudgeOptions(seeds=2).resolved("cpu"))
    assert request.to_wire()["options"] == JudgeOptions(seeds=2).for_request("cpu")
    assert parse_request(request.to_wire(), WORKER_REQUESTS) == request
    bad = dict(request.to_wire(), options={"seeds": 2, "colour": "red"})
    with pytest.raises(MessageError, match="'colour'"):
        parse_request(bad, WORKER_REQUESTS)
    with pytest.raises(UnknownOp):  # each channel has its own requests
        parse_request(request.to_wire())


@pytest.mark.parametrize("raw, message", [
    ({"op": "frobnicate"}, "unknown op 'frobnicate'"),
    ([("op", "run")], "not an object"),
    ({"op": "run"}, "lacks its field 'items'"),
    ({"op": "run", "items": [{"seed": 1}]}, r"RunItem lacks its field 'items\[0\].case'"),
    ({"op": "run", "items": [{"case": "0", "seed": 1}]}, r"items\[0\].case: expected an integer"),
    ({"op": "gaps", "n": 5, "gpu_lok": True}, "no field.*'gpu_lok'"),
    ({"op": "time_block", "n": True}, "n: expected an integer"),
])
def test_a_malformed_request_is_a_clear_error(raw: Any, message: str):
    with pytest.raises(MessageError, match=message):
        parse_request(raw)


def test_a_request_built_wrong_fails_where_it_is_built():
    """In the worker, where it is the judge's bug (an internal judge error), not in the child,
    where its error reply would read as the candidate's failure."""
    with pytest.raises(MessageError, match="seed: expected an integer"):
        RunItem(case=0, seed=1.5)
    with pytest.raises(MessageError, match="gpu_lock: expected a boolean"):
        SyncRequest(gpu_lock=1)
    assert PerfPrepareRequest(case=0, seeds=[1], flush_bytes=8, warmup_ms=3).warmup_ms == 3.0


@pytest.mark.parametrize("harness", [CandidateHarness, ReferenceHarness])
def test_every_child_request_has_a_handler_on_both_sides(harness: type):
    for op, cls in CHILD_REQUESTS.items():
        assert cls.op == op
        assert cls is ExitRequest or callable(getattr(harness, f"op_{op}", None)), (harness.__name__, op)
    # the timing methods checked for replacement by a candidate are still the ones that time
    assert all(callable(getattr(harness, name, None)) for name in TIMING_METHODS)


def _serving(raws: list[Any]) -> tuple[CandidateHarness, list[dict]]:
    """A harness (no device, no task) that reads `raws` as its requests and keeps its replies."""
    harness = CandidateHarness.__new__(CandidateHarness)
    sent: list[dict] = []
    queue = list(raws)

    class Conn:
        def recv(self) -> Any:
            if not queue:
                raise EOFError
            return queue.pop(0)

    harness.conn = Conn()  # type: ignore[assignment]
    harness.send = sent.append  # type: ignore[assignment]
    harness._init_device = dict  # type: ignore[method-assign]
    return harness, sent


def test_a_child_answers_a_request_it_cannot_read_numbered_as_asked_and_serves_on():
    harness, sent = _serving([{"op": "frobnicate", "seq": 3}, {"op": "gaps", "seq": 4},
                              {"op": "exit"}, {"op": "sync", "seq": 5}])
    harness.serve()
    ready, unknown, malformed = sent  # (nothing after exit is read)
    assert ready["op"] == "ready"
    assert unknown == {"op": "frobnicate", "ok": False, "error": "unknown op 'frobnicate'"}
    assert malformed["op"] == "gaps" and malformed["ok"] is False
    assert malformed["error"] == "malformed 'gaps' request: GapsRequest request lacks its field 'n'"


# -- each stage's view of its worker ------------------------------------------------------------
def _members(protocol: type) -> set[str]:
    names = set()
    for klass in protocol.__mro__:
        if klass in (object,) or klass.__module__ == "typing":
            continue
        names |= {n for n in vars(klass) if not n.startswith("_")}
        names |= set(getattr(klass, "__annotations__", {}))
    return names


@pytest.mark.parametrize("protocol", [CheckingWorker, TimingWorker, GuardedWorker])
def test_the_worker_has_every_member_of_each_stages_view(protocol: type):
    worker = Worker("cpu")
    missing = [name for name in _members(protocol) if not hasattr(worker, name)]
    assert not missing, f"Worker lacks {missing} of {protocol.__name__}"
    assert len(_members(CheckingWorker)) < 10 and len(_members(TimingWorker)) < 14  # narrow, as meant
