"""The candidate side of a judge child: imports one candidate file and runs its entry point.

Everything in this process is considered readable and writable by the candidate, so the harness
takes what it needs (timers, events, allocator functions: `Harness.__init__`) *before* the
candidate is imported, counts Triton launches, poisons memory the candidate may leave unwritten,
and sends raw outputs back to the worker, which does every comparison itself."""

from __future__ import annotations

import os
import sys
from typing import Callable

from ..common.digests import tensor_digests
from ..common.requests import LoadRequest, RunItem, SpotRequest
from . import confinement
from .harness import Harness, SpotCall
from .poison import install_poisoning_allocators
from .provenance import EntryCalls, KernelMemory, tracking_copies
from .replies import Outputs, flatten_outputs


class CandidateHarness(Harness):
    role = "candidate"

    def _load(self, request: LoadRequest) -> None:
        if request.path is None:
            raise ValueError("a candidate's load request names no file")
        path = os.path.realpath(request.path)
        box = self.options.sandbox
        if box is not None and box.on:
            # Confined, it cannot read the submitted file: its worker sent the bytes, kept in its
            # own scratch under the same name.
            if request.source is None:
                raise ValueError("a confined candidate's load request carries no source")
            path = confinement.keep_source(box, os.path.basename(path), request.source)
        # The task module (hidden cases, reference) stays reachable only through our own references.
        for name in [n for n in sys.modules if n.startswith("kernelwright_task_")]:
            del sys.modules[name]
        self.counter.watch_file(path)
        install_poisoning_allocators(self.torch, self.poison)
        self.entry = self.task.load_implementation(path, "candidate")

    def _cap_device_memory(self, fraction) -> None:
        """A runaway candidate hits its own OOM instead of starving the reference process."""
        if self.is_gpu:
            self.torch.cuda.set_per_process_memory_fraction(float(fraction), 0)

    def _call_candidate(self, fn: Callable, args: tuple, poison_sizes: list[int]) -> tuple[Outputs, int, float, dict]:
        """One checked call: (outputs, own launches, seconds, provenance). The provenance says
        which outputs lie outside the memory the candidate's own kernels were given
        (`not_from_kernel`, positions), or, for a benchmark's test function that calls the entry
        points itself, which of those calls returned such a tensor (`foreign_calls`)."""
        self._poison_free_memory(poison_sizes)
        self.poison.on = True
        before = self.counter.own
        memory = KernelMemory(self.torch)
        self.counter.memory = memory
        start = self.clocks.perf_counter()
        try:
            with tracking_copies(self.torch, memory), EntryCalls(self.entry, memory) as calls:
                outputs = flatten_outputs(fn(*args), self.torch)
            self.clocks.sync()
        finally:
            self.poison.on = False
            self.counter.memory = None
        seconds = self.clocks.perf_counter() - start
        if calls.calls:
            provenance = {"foreign_calls": calls.foreign[:64], "not_from_kernel": []}
        else:
            provenance = {"foreign_calls": [],
                          "not_from_kernel": [i for i, t in enumerate(outputs)
                                              if i not in outputs.numbers and not memory.holds(t)]}
        return outputs, self.counter.own - before, seconds, provenance

    def _run_item(self, item: RunItem) -> dict:
        try:
            self._collect_large_garbage()
            fn, args = self._bound(self.entry, "correctness_cases", item.case, item.seed)
            self._note_inputs(args)
            sizes = item.poison_sizes
            outputs, launches, seconds, provenance = self._call_candidate(fn, args, sizes)
            # Snapshot now: an output may alias an input, and the repeat call below may change both.
            reply = {"op": "run", "ok": True, "outputs": [t.detach().clone() for t in outputs],
                     "launches": launches, "seconds": seconds, "kernels": dict(self.counter.kernels),
                     # the inputs after the call, as digests (the worker compares them with the
                     # reference's): computed now, before the repeat call below may change them
                     "input_digests": tensor_digests(self.torch, self._tensor_args(args)), **provenance}
            if outputs.names is not None:
                reply["names"] = outputs.names
            n_outputs = len(outputs)
            del outputs  # the reply holds their snapshot: memory for the repeat's outputs
            if item.repeat:
                if self.task.bind is not None:  # adapter tasks draw inputs from global RNG state: re-seed
                    args = None  # let go of the first inputs before making the same ones again
                    self._collect_large_garbage()
                    fn, args = self._bound(self.entry, "correctness_cases", item.case, item.seed)
                    self._note_inputs(args)
                again, launches2, _, provenance2 = self._call_candidate(fn, args, sizes)
                reply["repeat_outputs"] = again
                reply["repeat_launches"] = launches2
                # what the second call did not write with its own launches (a result cached from the first)
                reply["repeat_not_from_kernel"] = [i for i in provenance2["not_from_kernel"] if i < n_outputs]
                reply["repeat_foreign_calls"] = provenance2["foreign_calls"]
            return reply
        except BaseException as exc:  # noqa: BLE001 - includes SystemExit raised by the candidate
            return self._error("run", exc)

    def _spot_call(self, fn: Callable, args: tuple, request: SpotRequest) -> SpotCall:
        outputs, launches, _, provenance = self._call_candidate(fn, args, request.poison_sizes)
        return SpotCall(outputs, launches, request.positions, provenance)
