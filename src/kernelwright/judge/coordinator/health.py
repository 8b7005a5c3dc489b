"""Which GPUs of a run the judge still trusts.

A candidate's GPU fault is almost always the candidate's own doing (an illegal address), so a
fault alone says nothing about the GPU. A GPU that is itself broken (an ECC error, a wedged
context, a process of someone else's holding its memory) shows as *every* candidate faulting
there, good ones included. So: after `FAULT_STREAK` suspicious outcomes in a row on one GPU (a
GPU fault, a timeout, or its worker lost mid-candidate) with nothing that ran cleanly in
between, the pool judges a known-good kernel there (the built-in vector_add task's Triton
reference, correctness only) on a fresh worker. If that fails too, the GPU is out of service for
the rest of the run: its workers take no more candidates, the candidate that tipped it (and any
suspicious verdict of its other workers from then on) is judged again on another GPU, and the
run says so on stderr and in its judge report. The last GPU in service is never retired by a
check (a false alarm would end the run): it stays, with a warning. If the known-good kernel passes, the candidates were
to blame: the streak starts again, and the next check needs twice as long a streak (so a model
that keeps writing faulting kernels costs a check per 3, 6, 12, ... of them, not per 3).

The rule is the same for local workers and for Ray actors (one GPU each); a Ray actor that dies
takes its GPU out of service at once (`retire`)."""

from __future__ import annotations

import sys
import threading
from typing import Callable

FAULT_STREAK = 3        # suspicious outcomes in a row on one GPU before it is checked
MAX_STREAK = 48         # the longest streak a check waits for after healthy checks


class DeviceHealth:
    """Per-GPU streaks of suspicious outcomes and the GPUs out of service. Thread-safe."""

    def __init__(self, n_devices: int, names: Callable[[int], str] = lambda d: f"GPU {d}") -> None:
        self.n_devices = n_devices
        self._names = names
        self._lock = threading.Lock()
        self._streak = [0] * n_devices
        self._needed = [FAULT_STREAK] * n_devices
        self._checking: set[int] = set()
        self.retired: dict[int, str] = {}  # device -> why it is out of service
        self.checks = 0                    # known-good checks run
        self.warnings: list[dict] = []     # failed checks of the last GPU in service (kept)

    def record(self, device: int, suspect: bool) -> bool:
        """One outcome on `device`; True when it should be checked now (the caller then calls
        `check`). Only one check of a device runs at a time."""
        with self._lock:
            if device in self.retired:
                return False
            if not suspect:
                self._streak[device] = 0
                return False
            self._streak[device] += 1
            if self._streak[device] < self._needed[device] or device in self._checking:
                return False
            self._checking.add(device)
            return True

    def check(self, device: int, probe: Callable[[], str | None]) -> str | None:
        """Run `probe` (None: the known-good kernel passed; else why not) for a device `record`
        asked to check. The reason the device left the run, or None when it stays. What `probe`
        raises (the pool closing) propagates, and the device stays. The last device in service
        is never retired on a check: a false alarm would end the whole run, so it stays, with
        a warning, and the candidates' own verdicts say what happens there."""
        try:
            why = probe()
        finally:
            with self._lock:
                self._checking.discard(device)
                self.checks += 1
        with self._lock:
            streak = self._streak[device]
            self._streak[device] = 0
            last = len(self.retired) >= self.n_devices - 1
            if why is None or last:
                self._needed[device] = min(MAX_STREAK, self._needed[device] * 2)
        what = f"{streak} candidates in a row faulted, hung or lost their worker on it, and a known-good kernel " \
               f"failed there too: {why}"
        if why is None:
            return None
        if last:
            sys.stderr.write(f"warning: {self._names(device)}: {what}; it is the last GPU in service, so it stays "
                             "(check it: nvidia-smi / rocm-smi)\n")
            self.warnings.append({"device": self._names(device), "why": what})
            return None
        return self.retire(device, what)

    def retire(self, device: int, why: str) -> str:
        """Take `device` out of service for the rest of the run (said once, on stderr)."""
        with self._lock:
            if device in self.retired:
                return self.retired[device]
            self.retired[device] = why
            left = self.n_devices - len(self.retired)
        sys.stderr.write(f"warning: {self._names(device)} is out of service for the rest of this run: {why}; "
                         f"{left} of {self.n_devices} GPU(s) judge from now on\n")
        return why

    def in_service(self, device: int) -> bool:
        return device not in self.retired

    def all_retired(self) -> bool:
        return len(self.retired) >= self.n_devices

    def report(self) -> list[dict]:
        """The GPUs out of service, for the run's judge report."""
        return [{"device": self._names(d), "why": why} for d, why in sorted(self.retired.items())]
