"""The coordinator's end of one judge worker process: starting it with an allow-listed
environment (never the user's secrets) on its own GPU, its handshake, one request at a time over
a private pipe, and ending it with everything it started; plus removing what killed workers and
pools left in the run's private directory.

The watchdog: while it waits for a reply the coordinator looks at its worker every POLL_S. A
worker stopped by a signal (SIGSTOP, SIGTSTP: state 'T' in /proc/<pid>/stat; 't' under a
debugger) for STOP_GRACE_S, or one that sends no heartbeat for SILENCE_S while it judges (it sends
one a second, from a thread of its own: see worker/process.py), is killed with its whole process
tree; the pool replaces it and the candidate gets a judge_error verdict saying why. The outer
bound (`pool.job_timeout`, hours) only catches a worker that keeps beating and never answers."""

from __future__ import annotations

import os
import pickle
import select
import shutil
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from multiprocessing import Pipe
from pathlib import Path

from ..common import procs
from ..common.options import JudgeOptions, WorkerOptions
from ..common.privdir import ENV as PRIVATE_DIR_ENV
from ..common.privdir import ensure_private, private_dir
from ..common.requests import ExitRequest, JudgeRequest
from .backend import DeviceUnavailable
from .workerenv import worker_environment

POLL_S = 0.5          # how often a waiting coordinator looks at its worker
STOP_GRACE_S = 2.0    # a worker stopped this long is killed (a stop that is undone at once is let be)
SILENCE_S = 60.0      # a judging worker that sends no heartbeat (one a second) this long is wedged
# multiprocessing.Connection's framing: a signed 4-byte big-endian size, or -1 and an 8-byte size
_FRAME_SIZE = struct.Struct("!i")
_FRAME_BIG = struct.Struct("!Q")


def pin_device(env: dict[str, str], backend: str, index: int) -> None:
    """Give the worker GPU `index` of those this process sees, alone: the `index`-th entry of an
    inherited CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES (so `--gpus` counts as torch does
    here), else the physical index."""
    var = {"cuda": "CUDA_VISIBLE_DEVICES", "hip": "HIP_VISIBLE_DEVICES"}.get(backend)
    if var is None:
        return
    visible = env.get(var)
    ids = [i.strip() for i in visible.split(",")] if visible else None
    env[var] = ids[index] if ids else str(index)


class WorkerLost(RuntimeError):
    pass


class WorkerHandle:
    """One worker process and the coordinator's end of its pipe. Constructing one only starts the
    process; `wait_ready` waits for its handshake (importing torch and Triton, initialising the
    device: seconds), so that many workers start side by side."""

    def __init__(self, backend: str, index: int, options: JudgeOptions, start_timeout: float = 600.0,
                 private: Path | None = None, gpu_workers: int = 2, task_files: tuple[str, ...] = ()) -> None:
        self.backend = backend
        self.index = index
        self.start_timeout = start_timeout
        self.info: dict | None = None
        # Allow-listed, never a copy of ours: the worker's environment is every candidate's
        # (forked children inherit it, and /proc/<pid>/environ shows what a process was exec'd with).
        env = worker_environment()
        private = private or private_dir()
        env[PRIVATE_DIR_ENV] = str(private)  # the GPU lock files: every process of this run agrees
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        pin_device(env, backend, index)
        ours, theirs = Pipe(duplex=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernelwright.judge.worker.process", "--fd", str(theirs.fileno()),
             "--device", "cpu" if backend == "cpu" else "cuda"],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        theirs.close()
        self.conn = ours
        # what the worker sent, read without ever blocking on a frame that has only partly arrived
        # (a worker stopped in the middle of a reply must not stop its watchdog)
        self._buffer = bytearray()
        self._inbox: deque[dict] = deque()
        self.stop_grace_s, self.silence_s = STOP_GRACE_S, SILENCE_S
        # The pool's close and a judging thread that sees the worker die can both close the pipe:
        # once only (a second os.close could close a descriptor another thread opened meanwhile).
        self._conn_lock = threading.Lock()
        # Each child gets a Triton cache of its own side (see worker.Worker.start): the reference's
        # is never a directory a candidate is pointed at, so it cannot plant a compiled kernel there.
        # gpu_workers: how many of this pool's workers share the worker's GPU (1: no shared GPU lock)
        worker_options = WorkerOptions(memory_fraction=options.memory_fraction, gpu_workers=gpu_workers,
                                       cache_root=str(ensure_private(private / "triton")),
                                       sandbox=options.sandbox, max_written_bytes=options.max_written_bytes,
                                       scratch_root=str(ensure_private(private / "scratch")),
                                       task_files=task_files)
        self.conn.send({"options": worker_options.to_wire()})

    def wait_ready(self) -> dict:
        """The worker's device description, once it has started (raises if it could not)."""
        if self.info is None:
            try:
                reply = self._recv(self.start_timeout, "starting")
            except WorkerLost:
                self.kill()
                raise
            if not reply.get("ok"):
                self.close()
                raise DeviceUnavailable(reply.get("error", "worker failed to start"))
            self.info = reply["info"]
        return self.info

    def _recv(self, timeout: float, doing: str, heartbeats: bool = False) -> dict:
        """The worker's next message other than a heartbeat, within `timeout` s. Raises
        WorkerLost if it dies, is stopped for `stop_grace_s`, sends no heartbeat for `silence_s`
        while `heartbeats` are due (it is judging), or does not answer in time. A worker that
        was stopped or went silent is killed (with its process tree) before this raises."""
        started = now = time.monotonic()
        last_sign, stopped_since = started, None
        while True:
            looked = now
            try:
                message = self._next_message(max(0.0, min(POLL_S, started + timeout - now)))
            except (EOFError, OSError):
                try:
                    code = self.process.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    code = self.process.poll()
                raise WorkerLost(f"judge worker {self.index} died while {doing} (exit status {code})") from None
            now = time.monotonic()
            if now - looked > POLL_S + 5.0:
                # this process was itself stopped or starved meanwhile: what it saw of the worker
                # before is stale, and silence it could not hear is not the worker's
                last_sign, stopped_since = now, None
            if message is not None:
                if message.get("op") != "alive":
                    return message
                last_sign = now
                continue
            state = procs.process_state(self.process.pid)
            stopped_since = (stopped_since or now) if state in ("T", "t") else None
            if stopped_since is not None and now - stopped_since >= self.stop_grace_s:
                self.kill()
                how = ("by a debugger (ptrace; its state was 't')" if state == "t" else
                       "by a signal (SIGSTOP, or another stop signal; its state was 'T')")
                raise WorkerLost(f"the judge's worker (worker {self.index}, pid {self.process.pid}) was stopped "
                                 f"{how} while {doing}; stopped for {now - stopped_since:.1f} s, it was killed "
                                 "with its process tree and replaced, and the candidate was not judged")
            if heartbeats and now - last_sign >= self.silence_s:
                self.kill()
                what = procs.STATE_NAMES.get(state or "", f"in state {state!r}")
                raise WorkerLost(f"the judge's worker (worker {self.index}, pid {self.process.pid}) sent no sign of "
                                 f"life for {now - last_sign:.0f} s while {doing} (no heartbeat; it was {what}); "
                                 "it was killed with its process tree and replaced, and the candidate was not judged")
            if now - started >= timeout:
                raise WorkerLost(f"judge worker {self.index} did not answer within {timeout:g} s while {doing}")

    def _next_message(self, wait: float) -> dict | None:
        """The next whole message the worker sent, waiting at most `wait` s for more bytes; None
        when none is complete yet (a partial frame stays in the buffer). EOFError: it is gone."""
        if self._inbox:
            return self._inbox.popleft()
        fd = self.conn.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(wait * 1000):
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            raise EOFError("the worker closed its channel")
        self._buffer += chunk
        while True:
            frame = self._take_frame()
            if frame is None:
                break
            self._inbox.append(pickle.loads(frame))  # the worker is trusted: its pipe carries pickles
        return self._inbox.popleft() if self._inbox else None

    def _take_frame(self) -> bytes | None:
        buffer = self._buffer
        if len(buffer) < _FRAME_SIZE.size:
            return None
        (size,) = _FRAME_SIZE.unpack_from(buffer)
        head = _FRAME_SIZE.size
        if size == -1:
            if len(buffer) < head + _FRAME_BIG.size:
                return None
            (size,) = _FRAME_BIG.unpack_from(buffer, head)
            head += _FRAME_BIG.size
        if len(buffer) < head + size:
            return None
        frame = bytes(buffer[head:head + size])
        del buffer[:head + size]
        return frame

    def judge(self, request: JudgeRequest, timeout: float) -> dict:
        try:
            self.conn.send(request.to_wire())
        except OSError:
            raise WorkerLost(f"judge worker {self.index} is gone") from None
        return self._recv(timeout, f"judging this candidate ({request.candidate_path})", heartbeats=True)["verdict"]

    def kill(self) -> None:
        """End the worker now, with everything it started: its process group, and every
        descendant in another group or session (a candidate child, what a candidate spawned)."""
        if self.process.poll() is None:
            procs.kill_tree(self.process.pid)
        self.process.wait()
        self._close_conn()

    def _close_conn(self) -> None:
        with self._conn_lock:
            try:
                self.conn.close()
            except OSError:
                pass

    def close(self) -> None:
        if self.process.poll() is None and (self.info is None or procs.process_state(self.process.pid) in ("T", "t")):
            # still starting (importing torch): it would read "exit" only once ready; or stopped:
            # it would never read it
            self.kill()
            return
        try:
            self.conn.send(ExitRequest().to_wire())
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_conn()


def remove_worker_caches(private: Path, pids: list[int]) -> None:
    """The Triton caches and scratch directories of these workers' children (a worker killed at
    close leaves them)."""
    for root in (private / "triton", private / "scratch"):
        for pid in pids:
            for path in root.glob(f"w{pid}-*"):
                shutil.rmtree(path, ignore_errors=True)


def sweep_stale(private: Path) -> None:
    """Remove what dead processes left in the private directory: the Triton caches of workers
    (`triton/w<pid>-...`), their children's scratch directories (`scratch/w<pid>-...`) and the sources of pools (`sources/sources-<pid>-...`) whose process is
    gone (killed before it could clean up). A directory of a live process, another run's, stays."""
    for folder, prefix in (("triton", "w"), ("scratch", "w"), ("sources", "sources-")):
        try:
            names = os.listdir(private / folder)
        except OSError:
            continue
        for name in names:
            pid = name[len(prefix):].split("-", 1)[0]
            if name.startswith(prefix) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(private / folder / name, ignore_errors=True)
