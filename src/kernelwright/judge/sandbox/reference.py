"""The reference side of a judge child: runs the task's trusted reference (PyTorch, or a golden
implementation of a suite adapter, and optionally a Triton reference file for timing). It never
sees candidate code, so a candidate cannot slow it down or patch it. A foreign reference (a golden
kernel, a user's model) is probed on poisoned memory for outputs it leaves undefined."""

from __future__ import annotations

import os
import time
import traceback
from typing import Any, Callable

from ..common.digests import tensor_digests
from ..common.footprint import (
    ProblemTooLarge,
    candidate_reply_need,
    gib,
    host_memory_available,
    max_reply_bytes,
    memory_need,
)
from ...tasks import derived
from ..common.requests import LoadRequest, RunItem, SpotRequest
from . import replies
from .harness import Harness, SpotCall
from .poison import (
    POISON_BYTE,
    changed_positions,
    guarded,
    guarded_allocations,
    install_poisoning_allocators,
)
from .provenance import KernelMemory, tracking_copies
from .replies import Outputs, flatten_outputs, tensor_meta


class ReferenceHarness(Harness):
    role = "reference"
    failure_marks = {"reference_failed": True}
    baseline: Callable | None = None  # what is timed: a Triton reference file, else the reference
    probe_disabled = False  # set once poisoned memory made the reference itself fail

    def _load(self, request: LoadRequest) -> None:
        task = self.task
        # Same allocator wrappers and launch counting as the candidate: equal host overhead
        # on both sides (without the counter a reference timed against itself came out up
        # to 12% faster on multi-launch calls), and a foreign reference can be probed for
        # outputs it leaves unwritten.
        install_poisoning_allocators(self.torch, self.poison)
        self.counter.watch_file(os.path.realpath(task.reference_impl) if task.reference_impl else None)
        if task.reference_impl is not None:  # a golden implementation (suite adapters)
            self.entry = task.load_implementation(str(task.reference_impl), "kernelwright_reference")
        else:
            self.entry = task.reference
        baseline_path = request.baseline_path
        self.baseline = (task.load_implementation(baseline_path, "kernelwright_baseline")
                         if baseline_path else self.entry)

    def _perf_impl(self) -> Callable | None:
        return self.baseline

    def _is_skip(self, exc: BaseException) -> bool:
        return replies.is_skip(exc)

    def _check_fits(self, impl: Any, case_list: str, index: int) -> None:
        """Before a reference builds a case's inputs: raise ProblemTooLarge if they and the
        outputs would not fit this machine (the task's `sizes`, else its roofline `cost` bytes
        counted as inputs), instead of being killed by the kernel's OOM killer half way."""
        case = getattr(self.task, case_list)[index]
        kind = "perf" if case_list == "perf_cases" else "correctness"
        sizes = None
        try:
            if self.task.sizes is not None:
                sizes = self.task.sizes(impl, kind, case)
            elif self.task.cost is not None:
                moved = int(self.task.cost(case).get("bytes", 0))
                sizes = (moved, 0) if moved else None
        except Exception:  # noqa: BLE001 - no estimate: judged as it is
            sizes = None
        if not sizes:
            return
        inputs, outputs = (int(v) for v in sizes)
        if self.task.reference_in_float64 and self.task.reference_impl is None:
            inputs, outputs = 3 * inputs, 3 * outputs  # float64 copies of both next to the natives
        host_need, device_need = memory_need(inputs, outputs, self.is_gpu)
        host = host_memory_available()
        problems = []
        if host and host_need > host:
            problems.append(f"about {gib(host_need)} of host memory, {gib(host)} available")
        if self.is_gpu:
            total = int(self.torch.cuda.get_device_properties(0).total_memory)
            if device_need > total:
                problems.append(f"about {gib(device_need)} of GPU memory, the GPU has {gib(total)}")
        if problems:
            raise ProblemTooLarge(f"{kind} case {case.label}: inputs {gib(inputs)} and outputs {gib(outputs)} "
                                  f"need {' and '.join(problems)}")

    def _check_reply(self, data: bytes, item: RunItem, reply: dict) -> None:
        """Whether the item's replies fit the worker's reply limit (`footprint.reply_limit`), this
        one and the candidate's to come: on a repeat item that carries its outputs twice (the
        repeat call's too). A problem whose replies do not fit is the problem's, not the candidate's."""
        limit = int(self.options.max_reply_bytes or max_reply_bytes())
        outputs = sum(int(m.get("nbytes", 0)) for m in reply.get("meta") or [])
        # (otherwise the candidate's reply is the size of this one)
        candidate = candidate_reply_need(outputs, True) if item.repeat else 0
        if max(len(data), candidate) > limit:
            what = (f"the reference's reply for case {item.case} is {gib(len(data))}"
                    if len(data) > limit else
                    f"the candidate's reply for case {item.case} (its outputs and the repeat call's) "
                    f"would be {gib(candidate)}")
            raise ProblemTooLarge(f"{what}, over the {gib(limit)} a reply may carry on this machine (outputs "
                                  "travel whole, to be compared by the worker; the limit is an eighth of the host "
                                  "memory available when the worker started, 4-16 GiB)")

    # -- correctness -------------------------------------------------------------------------
    def _run_item(self, item: RunItem) -> dict:
        began, compiled = time.perf_counter(), self._compiled_s()
        reply = self._run_reference_item(item)
        if reply.get("ok") and "skipped" not in reply:  # the candidate's limit scales from it
            reply["run_s"] = max(0.0, time.perf_counter() - began - (self._compiled_s() - compiled))
        return reply

    def _run_reference_item(self, item: RunItem) -> dict:
        try:
            self._check_fits(self.entry, "correctness_cases", item.case)
            self._collect_large_garbage()
            fn, args = self._bound(self.entry, "correctness_cases", item.case, item.seed)
            self._note_inputs(args)
            before = self.counter.own
            native, from_kernel = self._reference_call(fn, args)
            launches = self.counter.own - before  # kernels of a foreign reference's own file
            meta = [tensor_meta(t) for t in native]
            if self.task.reference_in_float64 and self.task.reference_impl is None:
                reference = flatten_outputs(fn(*self._upcast(args)), self.torch)
            else:
                reference = native
            self.clocks.sync()
            dropped = self._derived_undefined(item, reference, native.names)
            if dropped:
                return {"op": "run", "ok": True, "skipped": dropped}
            # digests of the inputs, never the inputs: the candidate's are compared with them
            reply = {"op": "run", "ok": True, "reference": reference, "meta": meta, "launches": launches,
                     "input_digests": tensor_digests(self.torch, self._tensor_args(args))}
            if from_kernel is not None:
                reply["from_kernel"] = from_kernel
            if native.names is not None:
                reply["names"] = native.names
            if self._should_probe(item):
                # Foreign code (a golden kernel, a user's model) may leave outputs unwritten or read
                # memory it never initialised; it then "passes" only because fresh memory is zero.
                # Run it again on poisoned memory: the positions that change are undefined.
                try:
                    fn, args = self._bound(self.entry, "correctness_cases", item.case, item.seed)
                    reply["undefined"] = self._undefined_positions(fn, args, reference, meta)
                except BaseException as exc:  # noqa: BLE001 - the clean values above still stand
                    reply["probe_failed"] = self._probe_failed(exc)
            return reply
        except BaseException as exc:  # noqa: BLE001
            if replies.is_skip(exc):
                return {"op": "run", "ok": True, "skipped": str(exc)[:300]}
            if self._derived(item) and not self._out_of_memory(exc):
                return {"op": "run", "ok": True, "skipped": derived.raised_reason(exc)}
            return self._error("run", exc, **self.failure_marks)

    # -- derived hidden cases (tasks/derived.py) ----------------------------------------------
    def _derived(self, item: RunItem) -> bool:
        return derived.derived_kind(self.task.correctness_cases[item.case]) is not None

    def _derived_undefined(self, item: RunItem, reference: list, names: list[str] | None) -> str | None:
        """Why a derived case is dropped: the reference's outputs on it hold NaN or inf (the
        problem is not defined on those inputs); None for every other case."""
        return derived.nonfinite_reason(reference, names) if self._derived(item) else None

    def _out_of_memory(self, exc: BaseException) -> bool:
        """A machine's limit, never a reason to drop a case: reported as on any other case."""
        oom = getattr(self.torch, "OutOfMemoryError", ())
        return isinstance(exc, (ProblemTooLarge, MemoryError)) or (bool(oom) and isinstance(exc, oom))

    def _reference_call(self, fn: Callable, args: tuple) -> tuple[Outputs, list[bool] | None]:
        """A foreign reference's call, with which of its outputs lie in memory its own kernels
        were given (None for a reference that launched none: a PyTorch one says nothing)."""
        torch = self.torch
        if self.task.reference_impl is None:
            return flatten_outputs(fn(*args), torch), None
        memory = KernelMemory(torch)
        before = self.counter.own
        self.counter.memory = memory
        try:
            with tracking_copies(torch, memory):
                outputs = flatten_outputs(fn(*args), torch)
        finally:
            self.counter.memory = None
        if self.counter.own == before:
            return outputs, None
        return outputs, [i in outputs.numbers or memory.holds(t) for i, t in enumerate(outputs)]

    # -- probes ------------------------------------------------------------------------------
    def _should_probe(self, request: RunItem | SpotRequest) -> bool:
        return self.task.reference_impl is not None and request.probe and not self.probe_disabled

    def _probe_failed(self, exc: BaseException) -> str:
        """Poisoned memory made the reference itself fail (garbage indices, say). Probing stops in
        this process; the worker re-judges the task without probes if the process is now unusable."""
        self.probe_disabled = True
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()[:500]

    def _undefined_positions(self, fn: Callable, args: tuple, clean: list, meta: list[dict]) -> list:
        """Per output, a bool mask of the positions whose value changed when the same call ran on
        poisoned memory (None where nothing changed). Outputs that are not comparable tensors of
        the same shape get None: they are compared as usual."""
        torch = self.torch
        runs = []
        # Two poisons: 0xFF (NaN, -1) and 0x00. A position the call really writes holds the same
        # value in all three runs; one that depends on uninitialised memory differs somewhere
        # (stale memory in the clean run can itself be NaN, so one poison is not enough).
        for byte in (POISON_BYTE, 0x00):
            self.share.yield_turn()  # each run is a full call: a waiting timer need not wait for all three
            self.poison.byte = byte
            args_guarded = guarded(torch, args, byte)
            self._poison_free_memory([m["nbytes"] for m in meta])
            self.poison.on = True
            try:
                # tensors the call makes itself are guarded too (a GEAK test function builds its
                # inputs inside the call, where the argument guards cannot reach them)
                with guarded_allocations(torch, self.device, byte):
                    runs.append(flatten_outputs(fn(*args_guarded), torch))
                del args_guarded
                self.clocks.sync()
            finally:
                self.poison.on = False
                self.poison.byte = POISON_BYTE
        masks = []
        for i, ref in enumerate(clean):
            others = [run[i] if i < len(run) else None for run in runs]
            if not isinstance(ref, torch.Tensor) or any(
                    not isinstance(o, torch.Tensor) or o.shape != ref.shape or o.dtype != ref.dtype for o in others):
                masks.append(None)
                continue
            masks.append(changed_positions(torch, self.task, self.device, ref, others))
        return masks

    # -- performance -------------------------------------------------------------------------
    def _spot_call(self, fn: Callable, args: tuple, request: SpotRequest) -> SpotCall:
        torch = self.torch
        before = self.counter.own
        use64 = self.task.reference_in_float64 and self.task.reference_impl is None
        outputs, from_kernel = self._reference_call(fn, self._upcast(args) if use64 else args)
        call = SpotCall(outputs, self.counter.own - before, [])  # kernels of a foreign reference's own file
        if from_kernel is not None:
            call.provenance["from_kernel"] = from_kernel
        if use64:  # the expected dtype comes from a native run
            native = flatten_outputs(fn(*args), torch)
            call.native_meta = [tensor_meta(t) for t in native]
            del native
        rng = torch.Generator().manual_seed(int(request.seed))
        count = int(request.samples)
        call.positions = [torch.randint(0, max(t.numel(), 1), (min(count, t.numel()),), generator=rng).tolist()
                          for t in outputs]
        return call

    def _probe_spot(self, call: SpotCall, request: SpotRequest, doing: str) -> None:
        if not self._should_probe(request):
            return
        self.share.doing = f"{doing}: probes"
        try:
            fn, args = self._bound_seeded(self.entry, "perf_cases", request.case, request.seed)
            metas = call.native_meta or [{"nbytes": t.numel() * t.element_size()} for t in call.outputs]
            call.undefined = self._undefined_positions(fn, args, call.outputs, metas)
        except BaseException as exc:  # noqa: BLE001
            call.probe_failed = self._probe_failed(exc)

    def _finish_spot(self, reply: dict, call: SpotCall, metas: list[dict]) -> None:
        torch = self.torch
        if call.undefined is not None:
            # sampled positions whose reference value is undefined, and how many undefined
            # positions each output has (the candidate may hold NaN there)
            reply["undefined_samples"] = [
                (mask.reshape(-1)[torch.tensor(pos, dtype=torch.long)] if mask is not None and len(pos)
                 else None) for mask, pos in zip(call.undefined, call.positions)]
            reply["undefined_counts"] = [int(m.sum()) if m is not None else 0 for m in call.undefined]
        if call.probe_failed:
            reply["probe_failed"] = call.probe_failed
        reply["native_meta"] = call.native_meta or metas
