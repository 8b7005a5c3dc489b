"""What a candidate may use that the kernel does not bound here: the bytes it writes (its scratch
directory and its side's Triton cache together; RLIMIT_FSIZE is per file, so a loop of 64 MiB
files filled the disk at 5 GiB a second) and the processes it starts (RLIMIT_NPROC does not bind
root). Its worker looks once a second while it waits for the candidate's reply
(`ChildProcess.recv`); over a limit, the candidate is killed and fails with `resource_limit`.
A fill faster than that is bounded by what it can write in one second."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from ..common import procs
from ..common.footprint import gib

# Generous for any honest kernel (a compiled kernel is kilobytes to a few megabytes).
MAX_WRITTEN_BYTES = 2 << 30
MAX_PROCESSES = 256
WATCH_S = 1.0


def tree_bytes(path: str) -> int:
    """Bytes of the regular files under `path` (0 where it is gone); links are not followed."""
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


@dataclass
class Limits:
    """One candidate child's watched places and where they started (a shared Triton cache holds
    what earlier candidates compiled: only its growth counts)."""

    paths: tuple[str, ...]
    max_bytes: int = MAX_WRITTEN_BYTES
    max_processes: int = MAX_PROCESSES
    start: dict[str, int] = field(default_factory=dict)
    last: float = 0.0

    def __post_init__(self) -> None:
        self.start = {p: tree_bytes(p) for p in self.paths}

    def over(self, pid: int) -> str | None:
        """Why the candidate `pid` is over a limit now, or None (at most one look a second)."""
        now = time.monotonic()
        if now - self.last < WATCH_S:
            return None
        self.last = now
        written = sum(max(0, tree_bytes(p) - self.start.get(p, 0)) for p in self.paths)
        if written > self.max_bytes:
            return (f"it wrote {gib(written)} to its scratch space and Triton cache, over the "
                    f"sandbox's {gib(self.max_bytes)}")
        count = len(procs.descendants(pid))
        if count > self.max_processes:
            return f"it started {count} processes, over the sandbox's {self.max_processes}"
        return None
