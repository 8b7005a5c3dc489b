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
from .stdio import redirect_stdio, use_triton_cache

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
        redirect_stdio(log_path)
        # Confined now, while this is the process's only thread (in a PID namespace of its own,
        # this process goes on as its PID 2); its caches are pointed into its scratch, then the
        # Triton cache at its side's (which the policy lets it write).
        record = confinement.enter(options.sandbox or ChildSandbox(level="off"))
        if role != "candidate":  # after the namespaces: an undumpable process cannot write its uid map
            procs.make_undumpable()
        use_triton_cache(options.triton_cache)
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
