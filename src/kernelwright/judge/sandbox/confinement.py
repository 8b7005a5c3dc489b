"""The judge's use of `confine`: what each child may touch, put in place right after its fork.

A child is confined in two layers (Landlock layers stack: a later one can only take away):
- at the fork (`enter`, one thread: Landlock binds the calling thread and what it starts later),
  both roles: read and execute the Python install and system libraries, read the few /etc, /proc
  and /sys entries torch and Triton read, read the task's files (`read`), use the GPU nodes,
  write only the child's own scratch directory and its side's Triton cache; no TCP, no signal to
  and no ptrace of anything outside its own domain; rlimits on file size, core dumps and memory.
  A candidate child also gets an empty network namespace (no UDP either).
- at the candidate's load (`narrow_to_source`), before its first line runs: the same without the
  task's files and with read on its own source alone. The task is loaded by then (into memory,
  which the candidate can read anyway: docs/architecture.md), so its hidden cases' files, the
  benchmark checkout and other candidates' sources are out of reach.

What `--sandbox` means: "off" confines nothing; "auto" confines with what this machine gives and
says once what is missing; "strict" judges nothing unless files, network and signals are all
confined (the coordinator refuses before starting, `confine.check_level`; a child that still
misses a layer fails its verdict as a judge error).

Imported by the sandbox's child entry only; builds nothing that needs sysconfig after the fork
(`base_policy` runs in the worker, before any fork).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from . import confine

LEVELS = confine.LEVELS
# What "strict" requires of a child: the three layers that keep secrets, the network and other
# processes out of a candidate's reach.
REQUIRED_LAYERS = ("fs", "tcp", "scope_signal")


@dataclass(frozen=True)
class ChildSandbox:
    """One child's confinement, decided by its worker before the fork."""

    level: str = "auto"
    scratch: str = ""                  # the child's own directory: TMPDIR, HOME, its caches
    write: tuple[str, ...] = ()        # also writable: its side's Triton cache
    read: tuple[str, ...] = ()         # the task's files (dropped for the candidate at its load)
    netns: bool = False                # an empty network namespace (the candidate's)
    data_bytes: int | None = None      # RLIMIT_DATA (private writable memory of the process)
    nproc: int | None = None           # RLIMIT_NPROC (not enforced for root)
    base: confine.Policy | None = None  # the worker's base policy (Python paths, system, devices)

    @property
    def on(self) -> bool:
        return self.level != "off" and bool(self.scratch)


def candidate_data_limit() -> int | None:
    """RLIMIT_DATA for a candidate: half of this machine's memory. A runaway allocation fails in
    the candidate (MemoryError) before it can take the host; CUDA's address reservations are not
    writable private memory, so they do not count. None where /proc/meminfo cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return None


# Processes a candidate may start beyond those its user already runs (RLIMIT_NPROC counts every
# process of the real uid). Triton's compiler and a few helpers need a handful.
EXTRA_PROCESSES = 256


def process_limit() -> int | None:
    """RLIMIT_NPROC for a child: this user's processes now plus `EXTRA_PROCESSES`. None as root,
    whom the kernel does not hold to it (a fork bomb is then bounded only by the verdict's end)."""
    uid = os.getuid()
    if uid == 0:
        return None
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count + EXTRA_PROCESSES


def base_policy() -> confine.Policy:
    """Everything a child needs whatever its task: built once in the worker (python_paths looks
    at sys.modules and sysconfig; the forked child inherits the result)."""
    return confine.torch_policy(scratch="", shm=True)


def _policy(box: ChildSandbox, read: tuple[str, ...]) -> confine.Policy:
    """The file size limit is the child's own (`procs.limit_file_size`, set before)."""
    base = box.base or base_policy()
    write = [p for p in (box.scratch, *box.write, *base.write) if p]
    return replace(base, read=[*base.read, *read], write=write, netns=box.netns, nproc=box.nproc,
                   data=box.data_bytes, core=0)


@dataclass
class Record:
    """What a child's confinement is: the verdict's `sandbox` field."""

    level: str
    layers: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: str = ""

    @property
    def complete(self) -> bool:
        return all(layer in self.layers for layer in REQUIRED_LAYERS)

    def as_dict(self) -> dict:
        return {"level": self.level, "layers": self.layers, "missing": self.missing,
                "warnings": self.warnings, "summary": self.summary, "complete": self.complete}


def _record(level: str, applied: confine.Applied) -> Record:
    return Record(level=level, layers=applied.layers, missing=list(applied.missing),
                  warnings=list(applied.warnings), summary=applied.summary())


def enter(box: ChildSandbox) -> Record:
    """Confine this freshly forked child (first layer). Never raises: what did not take effect is
    in the record, which the child sends its worker with its description."""
    if not box.on:
        return Record(level="off", summary="sandbox off: this child is not confined")
    confine.use_scratch(box.scratch)
    record = _record(box.level, confine.apply(_policy(box, box.read)))
    if box.nproc is None and os.getuid() == 0:
        record.warnings.append("process count not limited (root: RLIMIT_NPROC does not bind)")
    return record


def narrow_to_source(box: ChildSandbox, source: str, record: Record) -> None:
    """The candidate's second layer, just before it is imported: the task's files dropped, its
    own source the only file of the judge's it can read. Adds what failed to `record`."""
    if not box.on:
        return
    applied = confine.apply(replace(_policy(box, (os.path.realpath(source),)), netns=False, nproc=None,
                                    data=None, core=None))
    if not applied.fs:
        record.missing.append("the candidate's own layer (" + "; ".join(applied.missing) + ")")
