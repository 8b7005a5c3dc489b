"""A judge worker's forked child: process setup (own session, descriptors, stdio, stack dumps,
Triton cache), then the harness of its role serves the worker's requests until told to exit.

A child plays one of two roles, each a harness class:
- "candidate" (`candidate_harness.CandidateHarness`): imports one candidate file and runs its
  entry point; it takes its timers and allocator functions before the candidate is imported.
- "reference" (`reference_harness.ReferenceHarness`): runs the task's trusted reference; it never
  sees candidate code.

The child talks to its worker only through its private pipe (JSON + raw bytes, see `wire`); its
stdout and stderr go to a log file that the worker reads as text, never as results.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from typing import NoReturn

from ..common import procs
from ..common.options import ChildOptions
from . import confinement
from .candidate import CandidateHarness
from .confinement import ChildSandbox
from .reference import ReferenceHarness

# On this signal faulthandler writes every thread's stack to the log (the worker sends it before
# killing a child that ran out of time). Not SIGUSR1: a reference stuck in Triton's LLVM stage on
# the H200 left an empty log after SIGUSR1, which LLVM's signal support uses as its "info" signal
# (the likely cause; not yet confirmed on the device).
STACK_DUMP_SIGNAL = signal.SIGUSR2
HARNESSES = {"candidate": CandidateHarness, "reference": ReferenceHarness}


def child_main(conn_fd: int, role: str, task, device: str, log_path: str, options: ChildOptions) -> NoReturn:
    """Entry point right after fork(). Never returns into the worker's code."""
    code = 0
    try:
        os.setsid()  # own process group: the worker kills the whole group at the end
        procs.die_with_parent()
        if role == "candidate":
            procs.make_dumpable()
            procs.limit_file_size(int(options.max_file_bytes))
        procs.close_fds_except(conn_fd)  # a candidate talks to nothing but its own worker pipe
        _redirect_stdio(log_path)
        # Confined now, while this is the process's only thread (in a PID namespace of its own,
        # this process goes on as its PID 2); its caches are pointed into its scratch, then the
        # Triton cache at its side's (which the policy lets it write).
        record = confinement.enter(options.sandbox or ChildSandbox(level="off"))
        if role != "candidate":  # after the namespaces: an undumpable process cannot write its uid map
            procs.make_undumpable()
        _use_triton_cache(options.triton_cache)
        # On a timeout the worker asks for every thread's stack (written from C, so it works
        # while Python is stuck in a kernel launch, a lock or a compile) before killing us.
        faulthandler.register(STACK_DUMP_SIGNAL, file=sys.stderr, all_threads=True)
        conn = Connection(conn_fd)
        harness = HARNESSES[role](conn, task, device, options)
        harness.sandbox_record = record  # how it is confined, told to its worker when ready
        harness.serve()
    except BaseException:  # noqa: BLE001 - the child must never unwind into the worker's code
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        code = 70
    os._exit(code)


def _use_triton_cache(path: str | None) -> None:
    """Compile into (and load from) this side's own Triton cache (and torch.compile's): set
    before anything here compiles. Triton 3.4+ reads TRITON_CACHE_DIR through `triton.knobs` at each use unless a value
    was set on the knob, so the knob is set too; older versions read the variable at each use."""
    if not path:
        return
    os.environ["TRITON_CACHE_DIR"] = path
    # torch.compile's cache too (by default one per user in /tmp, shared by both sides)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(path, "inductor")
    try:
        from triton import knobs

        knobs.cache.dir = path
    except Exception:  # noqa: BLE001 - no knobs (Triton < 3.4): the variable is what it reads
        pass


def _redirect_stdio(log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)

