"""What both roles of a judge child share: the request loop, replies, inputs drawn from seeds,
spot checks, memory bookkeeping, and (from `timer.TimedRequests`) the requests of a timing turn.
`CandidateHarness` (candidate_harness) and `ReferenceHarness` (reference_harness) add what
differs: how code is loaded and how one call is checked.

Both generate inputs from the same seeds on the same device, so no input data needs to travel.
The child talks to its worker only through its private pipe (JSON + raw bytes, see `wire`)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any, Callable

from ...tasks import load_task_ref
from ...tasks.derived import derive_inputs
from ..common import wire
from ..common.footprint import proc_status_bytes
from ..common.gpulock import SharedHold
from ..common.messages import MessageError
from ..common.options import ChildOptions
from ..common.requests import (
    ExitRequest,
    LoadRequest,
    MemoryFractionRequest,
    MemoryRequest,
    PerfPrepareRequest,
    ProfileRequest,
    Request,
    RetuneRequest,
    RunItem,
    RunRequest,
    SpotRequest,
    SyncRequest,
    UnknownOp,
    parse_request,
    request_op,
    request_seq,
)
from . import autotuning, triton_hooks
from .compilewatch import CompileWatch
from .launches import LaunchCounter
from .poison import PoisonSwitch, poison_free_memory
from .precompile import compile_threads_from_env
from .profiling import ProfileRequests
from .replies import Outputs, error_reply, tensor_meta
from .timer import Clocks, TimedRequests

# Inputs from this size on are collected (gc) before the next item makes its own: see
# Harness._collect_large_garbage.
LARGE_INPUT_BYTES = 64 << 20


@dataclass
class SpotCall:
    """One perf-size call of a spot check, and what the role found out about it."""

    outputs: Outputs
    launches: int
    positions: list  # per output, the flat positions sampled
    provenance: dict = field(default_factory=dict)
    undefined: list | None = None  # reference probes: per output, a mask of undefined positions
    probe_failed: str | None = None
    native_meta: list | None = None  # a float64 reference: the dtypes of a native run


def bound_case(task, impl: Any, case_list: str, index: int, seed: int, device: str,
               generator: Callable) -> tuple[Callable, tuple]:
    """(fn, args) for one case of `impl`, inputs drawn from `seed` on `device` with a fresh
    `generator` (torch.Generator, taken before foreign code ran): what every judge child, and the
    profiled process of a full profile (profile_main), calls."""
    case = getattr(task, case_list)[index]
    gen = generator(device=device)
    gen.manual_seed(int(seed))
    fn, args = task.call_for(impl, "perf" if case_list == "perf_cases" else "correctness", case, gen)
    if case.get("derived") is not None:  # a derived hidden case: the same inputs, transformed
        args = derive_inputs(args, case.get("derived"), gen)
    return fn, args


def seed_globals(torch, seed: int) -> None:
    """Python's, torch's and numpy's global generators seeded (adapter tasks draw from them)."""
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2**32))
    except ImportError:
        pass


class Harness(TimedRequests, ProfileRequests):
    role = ""  # "candidate" or "reference", set by each subclass
    failure_marks: dict = {}  # fields added to every failed reply of a checked call
    sandbox_record = None  # how this child is confined (`confinement.Record`), set before it serves

    def __init__(self, conn: Connection, task, device: str, options: ChildOptions) -> None:
        import torch

        self.conn = conn
        self._rss_start = proc_status_bytes().get("VmRSS", 0)  # what the fork shares with its worker
        self.task = task
        self.options = options
        self.torch = torch
        self.device = device  # "cuda" (also for ROCm) or "cpu"
        self.is_gpu = device == "cuda"
        # Private references taken before any foreign code runs in this process.
        self.clocks = Clocks(torch, self.is_gpu)
        self._empty = torch.empty
        self._generator = torch.Generator
        self.entry: Callable | None = None
        self._seq = 0  # the request being answered (0: the first message, unasked)
        self.counter = LaunchCounter(None)
        self.poison = PoisonSwitch()
        self.perf_sets: list[tuple] = []
        self.flush_buffer = None
        self._pad = None
        # Checks hold the GPU lock shared around their own GPU work only, never while compiling,
        # and the worker is told when this process compiles, so compiling gets its own (generous)
        # limit and running a short one. Every Triton hook goes in here, in triton_hooks' order,
        # before any foreign code can define or bind a kernel.
        self.share = SharedHold(device, self.clocks.sync, self._tell_waited, self._may_synchronise)
        self.watch = CompileWatch(self._tell_notice)
        triton_hooks.install(self.watch, self.share, self.counter, self.is_gpu, compile_threads_from_env())
        if self.is_gpu:
            self.share.start_nudging()  # and between launches, when a timer waits on a long stretch
        # What `patched_timers` compares with: taken after our own hooks, before foreign code runs here
        self._timers = self._timing_functions()

    def _may_synchronise(self) -> bool:
        """Not while a CUDA graph is being captured (an autotuner declared with use_cuda_graph
        launches inside one): a device synchronise would invalidate the capture."""
        capturing = getattr(self.torch.cuda, "is_current_stream_capturing", None)
        return not (capturing is not None and capturing())

    # -- what the roles supply ----------------------------------------------------------------
    def _load(self, request: LoadRequest) -> None:
        """Load the code this side runs (the `load` request)."""
        raise NotImplementedError

    def _run_item(self, item: RunItem) -> dict:
        """The reply to one correctness item (case, seed) of a `run` request."""
        raise NotImplementedError

    def _spot_call(self, fn: Callable, args: tuple, request: SpotRequest) -> SpotCall:
        """The perf-size call of a `spot` request."""
        raise NotImplementedError

    def _probe_spot(self, call: SpotCall, request: SpotRequest, doing: str) -> None:
        """Probe the spot call's outputs for undefined positions, where this side does."""

    def _finish_spot(self, reply: dict, call: SpotCall, metas: list[dict]) -> None:
        """Add this side's own fields to a spot reply."""

    def _check_fits(self, impl: Any, case_list: str, index: int) -> None:
        """Raise before building a case's inputs that would not fit this machine."""

    def _check_reply(self, data: bytes, item: RunItem, reply: dict) -> None:
        """Raise if an encoded `run` reply (`reply`, as `data`) may not be sent."""

    def _is_skip(self, exc: BaseException) -> bool:
        """Whether `exc` says the case is to be skipped, not failed."""
        return False

    def _cap_device_memory(self, fraction: Any) -> None:
        """Cap this process's share of GPU memory (`memory_fraction`)."""

    # -- plumbing ---------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """Reply to the worker. The GPU lock is let go first (after encoding: that copies outputs
        off the device): blocking on the pipe while holding it could deadlock against a timing
        turn the worker is waiting for."""
        data = self._encode(obj)
        self.share.release()
        self.conn.send_bytes(data)

    def _encode(self, obj: Any) -> bytes:
        """A reply as bytes, its tensors copied off the device (GPU work: done under the lock),
        numbered as the request it answers."""
        if isinstance(obj, dict):
            obj["seq"] = self._seq
            if self.share.enabled:
                obj["gpu_lock_s"] = self.share.take_stats()
        return wire.encode(obj)

    def _tell_waited(self, state: str) -> None:
        """The worker's timeouts measure work: it is told when this process queues for the GPU
        ("waiting") and when it has it ("got"), and stops the clock in between."""
        self.conn.send_bytes(wire.encode({"op": "gpu_lock", "state": state, "seq": self._seq}))

    def _compiled_s(self) -> float:
        """Seconds this process has spent compiling Triton kernels so far (compilewatch)."""
        watch = getattr(self, "watch", None)
        return watch.seconds if watch is not None else 0.0

    def _tell_notice(self, msg: dict) -> None:
        """A compile or tune notice (compilewatch), numbered as the request being worked on."""
        self.conn.send_bytes(wire.encode({**msg, "seq": self._seq}))

    def serve(self) -> None:
        record = self.sandbox_record
        self.send({"op": "ready", **self._init_device(), "sandbox": record.as_dict() if record else {}})
        while True:
            try:
                raw = self.conn.recv()  # from the trusted worker: pickle is safe in this direction
            except EOFError:
                return
            try:
                request = parse_request(raw)
            except MessageError as exc:  # answered, numbered as asked: the worker reads why
                self._seq = request_seq(raw)
                op = request_op(raw)
                error = str(exc) if isinstance(exc, UnknownOp) else f"malformed {op!r} request: {exc}"
                self.send({"op": op, "ok": False, "error": error})
                continue
            if isinstance(request, ExitRequest):
                return
            self._seq = request_seq(raw)
            self._serve(request)

    def _serve(self, request: Request) -> None:
        """Answer one request with its `op_` method: every op `parse_request` knows has one."""
        handler = getattr(self, f"op_{request.op}")
        case = request.case if isinstance(request, (SpotRequest, PerfPrepareRequest, ProfileRequest)) else None
        self.share.doing = f"{self.role} {request.op}" + (f" of case {case}" if case is not None else "")
        autotuning.set_checking(request.gpu_lock)
        if isinstance(request, RunRequest):  # streams replies: takes the lock per item
            handler(request)
            return
        with self.share.hold(request.gpu_lock):
            handler(request)

    def _init_device(self) -> dict:
        torch = self.torch
        info: dict[str, Any] = {"device": self.device, "torch": torch.__version__}
        try:
            import triton

            info["triton"] = triton.__version__
        except Exception as exc:  # noqa: BLE001
            info["triton"] = f"unavailable: {exc}"
        if self.is_gpu:
            torch.cuda.init()
            props = torch.cuda.get_device_properties(0)
            info.update(
                name=props.name,
                backend="hip" if torch.version.hip else "cuda",
                l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
                memory_bytes=int(props.total_memory),
                sm_count=int(props.multi_processor_count),
            )
            try:
                # Triton's driver object builds (or loads from its cache) a C helper module on first
                # use: here, before any request holds the GPU lock, rather than at a check's first launch
                from triton.runtime import driver

                driver.active.get_current_target()
            except Exception:  # noqa: BLE001 - the first kernel launch reports a broken Triton
                pass
            fraction = self.options.memory_fraction
            if fraction:
                self._cap_device_memory(fraction)
        else:
            info.update(name="cpu (Triton interpreter)", backend="cpu", l2_bytes=0)
        torch.set_num_threads(int(self.options.cpu_threads))
        return info

    def _error(self, op: str, exc: BaseException, **extra) -> dict:
        return error_reply(op, exc, self._device_fault(), **extra)

    def _device_fault(self) -> bool:
        """Whether the GPU context is broken (a sticky error: illegal address, misaligned access,
        device-side assert): every CUDA call then fails, so a stream query (it never blocks, even
        behind a kernel that is still running) raises. The worker names the failure a GPU fault
        from this, not from the error's text. Always False on the CPU."""
        if not self.is_gpu:
            return False
        try:
            self.torch.cuda.current_stream().query()
            return False
        except BaseException:  # noqa: BLE001
            return True

    def _release_cached_memory(self) -> None:
        """Give the allocator's cached blocks back to the driver after work at a new size: an idle
        process holding gigabytes would make another worker's large shape run out of memory.
        Called under the GPU lock (shared, or the worker's exclusive turn): unmapping device
        memory is GPU work like any other. (It was a suspect for the rare timing blocks measured
        several times slower than the rest; freeing 4 GiB in a loop beside a timed kernel did not
        move it: docs/benchmarks.md, tenth session.) After a GPU fault
        the context is gone and this raises: the work that faulted reports the fault, so that
        error is dropped here (raising would lose the reply that says what happened)."""
        if self.is_gpu:
            try:
                self.torch.cuda.empty_cache()
            except BaseException:  # noqa: BLE001
                pass

    def _poison_free_memory(self, sizes: list[int]) -> None:
        """Poison the caching allocator's free blocks (poison.poison_free_memory); GPU only."""
        if not self.is_gpu:
            return
        poison_free_memory(self.torch, self._empty, sizes, self.poison.byte)

    # -- inputs ----------------------------------------------------------------------------
    def _bound(self, impl: Any, case_list: str, index: int, seed: int) -> tuple[Callable, tuple]:
        """(fn, args) for one case of `impl`, inputs drawn from `seed` on this device."""
        return bound_case(self.task, impl, case_list, index, seed, self.device, self._generator)

    def _bound_seeded(self, impl: Any, case_list: str, index: int, seed: int) -> tuple[Callable, tuple]:
        """`_bound`, then the global generators seeded for adapter tasks: their code may draw random
        inputs inside the call (GEAK perf ops build their tensors there), and both sides must see
        the same ones."""
        bound = self._bound(impl, case_list, index, seed)
        if self.task.bind is not None:
            self._seed_globals(int(seed))
        return bound

    def _seed_globals(self, seed: int) -> None:
        seed_globals(self.torch, seed)

    def _upcast(self, args: tuple) -> tuple:
        torch = self.torch
        return tuple(a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                     for a in args)

    def _tensor_args(self, args: tuple) -> list:
        return [a for a in args if isinstance(a, self.torch.Tensor)]

    def _nbytes(self, value: Any) -> int:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return value.numel() * value.element_size()
        if isinstance(value, (list, tuple)):
            return sum(self._nbytes(v) for v in value)
        if isinstance(value, dict):
            return sum(self._nbytes(v) for v in value.values())
        return 0

    def _collect_large_garbage(self) -> None:
        """Free the last item's inputs before making the next ones. On the candidate side a
        reference cycle (not yet found: gc.collect() frees it) kept each item's inputs alive until
        the cyclic collector ran, so a child held two sets of inputs (measured under the
        interpreter: 256 MiB of inputs, 639 MiB peak; 413 MiB with this). Only after large inputs:
        a collection costs ~0.1 s."""
        if getattr(self, "_large_inputs", False):
            import gc

            gc.collect()
            self._large_inputs = False

    def _note_inputs(self, args: tuple) -> None:
        self._large_inputs = self._nbytes(args) >= LARGE_INPUT_BYTES

    # -- loading and correctness ---------------------------------------------------------------
    def op_load(self, request: LoadRequest) -> None:
        try:
            if request.task_ref:  # a spare is forked before its task is known
                self.task = load_task_ref(request.task_ref)
            self._load(request)
            self.send({"op": "load", "ok": True})
        except BaseException as exc:  # noqa: BLE001 - SystemExit from the candidate included
            self.send(self._error("load", exc))

    def op_run(self, request: RunRequest) -> None:
        """Run each item (case, seed) and stream one reply per item."""
        items = request.items
        for k, item in enumerate(items):
            self.share.doing = f"{self.role} test case {item.case}" + (" with probes" if item.probe else "")
            with self.share.hold(request.gpu_lock):
                reply = self._run_item(item)
                reply_ok = bool(reply.get("ok"))
                # Inside the hold: encoding copies the outputs off the GPU (and may launch a kernel
                # for a strided one), and returning the cache to the driver unmaps memory; neither
                # may run inside another worker's timing turn. The pipe is written after letting go.
                try:
                    data = self._encode(reply)
                    self._check_reply(data, item, reply)
                except BaseException as exc:  # noqa: BLE001 - a fault the copy off the GPU surfaced
                    reply_ok = False
                    data = self._encode(self._error("run", exc, **self.failure_marks))
                del reply
                if not reply_ok or k == len(items) - 1:
                    self._release_cached_memory()
            self.conn.send_bytes(data)
            del data
            if not reply_ok:
                break  # the worker stops at the first failure

    # -- spot checks ---------------------------------------------------------------------------
    def op_spot(self, request: SpotRequest) -> None:
        """Run one perf-size call and return its outputs at sampled positions: perf shapes get a
        correctness check too, without shipping hundreds of megabytes."""
        doing = self.share.doing
        try:
            self.share.doing = f"{doing}: making its inputs"
            self._check_fits(self.entry, "perf_cases", request.case)
            self._collect_large_garbage()
            fn, args = self._bound_seeded(self.entry, "perf_cases", request.case, request.seed)
            self._note_inputs(args)
            self.share.doing = f"{doing}: the call"
            call = self._spot_call(fn, args, request)
            del fn, args  # (probes make inputs of their own)
            self._probe_spot(call, request, doing)
            self.share.doing = f"{doing}: sampling its outputs"
            samples, nan_counts, metas = self._sampled(call.outputs, call.positions)
            reply = {"op": "spot", "ok": True, "samples": samples, "positions": call.positions,
                     "nan_counts": nan_counts, "meta": metas, "launches": call.launches,
                     # the configurations checked: timing must use checked ones
                     "tuned": self.counter.tuned_configs(), **call.provenance}
            if call.outputs.names is not None:
                reply["names"] = call.outputs.names
            self._finish_spot(reply, call, metas)
            del call
            # Before the reply lets go of the lock: freeing gigabytes unmaps device memory, which
            # must not happen inside another worker's timing turn.
            self._release_cached_memory()
            self.send(reply)
            del reply
        except BaseException as exc:  # noqa: BLE001
            if self._is_skip(exc):
                self.send({"op": "spot", "ok": True, "skipped": str(exc)[:300]})
            else:
                self.send(self._error("spot", exc))

    def _sampled(self, outputs: Outputs, positions: list) -> tuple[list, list[int], list[dict]]:
        """(values at the sampled positions, NaN count, meta) of each output."""
        torch = self.torch
        samples, nan_counts, metas = [], [], []
        for t, pos in zip(outputs, positions):
            flat = t.reshape(-1)
            index = torch.tensor(pos, dtype=torch.long, device=flat.device)
            samples.append(flat[index] if len(pos) else flat[:0])
            nan_counts.append(int(torch.isnan(t).sum()) if t.is_floating_point() else 0)
            metas.append(tensor_meta(t))
        return samples, nan_counts, metas

    # -- housekeeping ------------------------------------------------------------------------
    def op_memory_fraction(self, request: MemoryFractionRequest) -> None:
        """Change the candidate's cap on GPU memory (lifted while its worker has the GPU alone)."""
        try:
            self._cap_device_memory(request.fraction)
            self.send({"op": "memory_fraction", "ok": True})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("memory_fraction", exc))

    def op_retune(self, request: RetuneRequest) -> None:
        try:
            self.send({"op": "retune", "ok": True, "autotuners": self.counter.forget_tuning()})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("retune", exc))

    def op_memory(self, request: MemoryRequest) -> None:
        """This process's memory so far (measurements: `JudgeOptions.measure_memory`)."""
        try:
            status = proc_status_bytes()
            reply = {"op": "memory", "ok": True, "rss_start_bytes": self._rss_start,
                     "rss_bytes": status.get("VmRSS", 0), "rss_peak_bytes": status.get("VmHWM", 0)}
            if self.is_gpu:
                reply["device_peak_bytes"] = int(self.torch.cuda.max_memory_allocated())
                reply["device_reserved_peak_bytes"] = int(self.torch.cuda.max_memory_reserved())
            self.send(reply)
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("memory", exc))

    def op_sync(self, request: SyncRequest) -> None:
        """Answered last, before a verdict: a reply the candidate wrote on the channel itself and
        that is still unread shows up here as one numbered out of turn."""
        self.send({"op": "sync", "ok": True})
