"""The process a hardware profiler runs for a full profile (`judge.worker.fullprofile`), after the
verdict is decided: it loads the task and one side's file the way a judge child does, makes the
perf case's inputs from the seed (`harness.bound_case`), makes one warm call (compiles, tunes),
then the profiled call, bracketed by cudaProfilerStart/Stop so that `ncu --profile-from-start
off` measures that call alone.

    python -m kernelwright.judge.sandbox.profile_main --task REF --file F --case N --seed S
        --scratch DIR --result PATH [--role candidate|reference] [--sandbox off|auto|strict]
        [--read P]... [--exec P]... [--write P]... [--triton-cache DIR] [--no-scope]

Its own output goes to a log in its scratch, never to the profiler's stream; what it reports
(`--result`: the names of its own kernels, its launches per call, the bytes of its inputs and
outputs) is the candidate's word, used to pick kernels out of the profiler's output and never to
decide anything. The profiler writes its own output where this process cannot (fullprofile).

Confinement: as a judge child's where the profiler allows (`confinement.enter`): the filesystem
allow-list (its scratch, the Triton cache, the task's and the profiler's files), rlimits, and
signal scoping unless --no-scope. Not the empty network namespace: Nsight Compute's injected
library talks to its frontend over a local TCP socket; with --tcp-ports, TCP is allowed on the
profiler's ports alone (fullprofile.NCU_PORTS), else it stays open. The environment is the one it was
started with, the worker's allow-listed one (coordinator/workerenv). A judge child is forked from
a single-threaded worker; this process was exec'd and `import torch` started a thread, so the
work runs in a forked child of it, single-threaded when it confines itself (Landlock binds the
calling thread and what it starts later).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import replace

from ...tasks import load_task_ref
from ...tasks.values import tensors_in
from ..common import procs
from . import confinement, triton_hooks
from .harness import bound_case, seed_globals
from .launches import LaunchCounter
from .stdio import redirect_stdio, use_triton_cache

ROLES = {"candidate": "candidate", "reference": "kernelwright_baseline"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="profile_main", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="the task's ref (Task.ref)")
    p.add_argument("--file", required=True, help="the side's own file (a copy in the scratch when confined)")
    p.add_argument("--case", type=int, required=True, help="index into the task's perf cases")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--role", choices=sorted(ROLES), default="candidate")
    p.add_argument("--scratch", required=True, help="this process's own directory (TMPDIR, HOME, its log)")
    p.add_argument("--result", required=True, help="where the JSON result goes (inside the scratch)")
    p.add_argument("--sandbox", choices=("off", "auto", "strict"), default="auto")
    p.add_argument("--read", action="append", default=[], help="also readable (the task's files)")
    p.add_argument("--exec", action="append", default=[], help="also executable (the profiler's libraries)")
    p.add_argument("--write", action="append", default=[], help="also writable (the Triton cache)")
    p.add_argument("--triton-cache", default=None)
    p.add_argument("--no-scope", action="store_true", help="no signal / abstract-socket scoping")
    p.add_argument("--device", default="cuda")
    p.add_argument("--tcp-ports", default=None, metavar="FIRST:COUNT",
                   help="TCP bind and connect only on these ports (the profiler's); default: TCP open")
    return p.parse_args(argv)


def _tcp_rules(spec: str | None) -> dict:
    """Landlock's TCP rules: only the profiler's ports (FIRST:COUNT), or no TCP rule at all."""
    if not spec:
        return {"allow_tcp": True}
    first, count = (int(x) for x in spec.split(":"))
    ports = tuple(range(first, first + count))
    return {"allow_tcp": False, "tcp_connect_ports": ports, "tcp_bind_ports": ports}


def _confine(args: argparse.Namespace, base) -> dict:
    """Enter the confinement (see the module's docstring); the record as a dict."""
    if args.sandbox == "off":
        return {"level": "off", "summary": "sandbox off: the profiled process is not confined"}
    policy = replace(base, exec=[*base.exec, *args.exec], scope=not args.no_scope, **_tcp_rules(args.tcp_ports))
    reads = tuple(args.read) + (os.path.dirname(os.path.realpath(args.file)),)
    box = confinement.ChildSandbox(level=args.sandbox, scratch=args.scratch, write=tuple(args.write), read=reads,
                                   netns=False, pidns=False, base=policy,
                                   data_bytes=confinement.candidate_data_limit() if args.role == "candidate" else None)
    record = confinement.enter(box)
    if args.sandbox == "strict" and "fs" not in record.layers:
        raise RuntimeError(f"--sandbox strict: the filesystem allow-list did not take effect ({record.summary})")
    return record.as_dict()


def _io_bytes(torch, values) -> int:
    """Bytes of the distinct tensors among `values` (nested tuples, lists, dicts): inputs and
    outputs that share storage (an in-place op) count once."""
    seen: dict[int, int] = {}
    for t in tensors_in(values, torch):
        seen.setdefault(t.data_ptr() or id(t), t.numel() * t.element_size())
    return sum(seen.values())


def _profiled_call(torch, fn, args: tuple, reseed, device: str) -> tuple[object, float]:
    """One call inside the profiler's range, timed with CUDA events (device time of the call).
    On the CPU (the interpreter: tests of this entry point) no range and a wall-clock time."""
    reseed()
    if device != "cuda":
        started = time.perf_counter()
        return fn(*args), (time.perf_counter() - started) * 1e3
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    cudart = torch.cuda.cudart()
    torch.cuda.synchronize()
    cudart.cudaProfilerStart()
    start.record()
    try:
        out = fn(*args)
        end.record()
        torch.cuda.synchronize()
    finally:
        cudart.cudaProfilerStop()
    return out, start.elapsed_time(end)


def run(args: argparse.Namespace, record: dict) -> dict:
    """Load, warm up, profile one call; what to report."""
    import torch

    path = os.path.realpath(args.file)
    counter = LaunchCounter(path)
    triton_hooks.count_launches(counter)  # before the file defines (or tunes) any kernel
    task = load_task_ref(args.task)
    impl = task.load_implementation(path, ROLES[args.role])
    fn, call_args = bound_case(task, impl, "perf_cases", args.case, args.seed, args.device, torch.Generator)

    def reseed():  # adapter tasks draw inputs inside the call, from the global generators
        if task.bind is not None:
            seed_globals(torch, args.seed)

    reseed()
    out = fn(*call_args)  # the warm call: compiles and tunes outside the profiler's range
    if args.device == "cuda":
        torch.cuda.synchronize()
    del out
    before = counter.own
    out, call_ms = _profiled_call(torch, fn, call_args, reseed, args.device)
    return {"ok": True, "own_kernels": sorted(counter.kernels), "launches_per_call": counter.own - before,
            "io_bytes": _io_bytes(torch, (call_args, out)), "call_ms": call_ms,
            "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu", "sandbox": record}


def _child(args: argparse.Namespace, base) -> int:
    procs.die_with_parent()
    # everything this process (and the code it loads) prints goes to its own log: never to the
    # profiler's stream, where it could pass for the profiler's output
    redirect_stdio(os.path.join(args.scratch, "profile.log"))
    result: dict = {"ok": False}
    try:
        record = _confine(args, base)
        use_triton_cache(args.triton_cache)
        result = run(args, record)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - reported, never unwound into the parent's code
        traceback.print_exc()
        result = {"ok": False, "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()[:1000]}
        code = 1
    try:
        with open(args.result, "w") as f:
            json.dump(result, f)
    except OSError:
        code = code or 2
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(args.scratch, exist_ok=True)
    # the worker's base policy is built before the fork (python_paths reads sys.modules and sysconfig)
    base = confinement.base_policy() if args.sandbox != "off" else None
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os._exit(_child(args, base))
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            time.sleep(0.01)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 3


if __name__ == "__main__":
    sys.exit(main())
