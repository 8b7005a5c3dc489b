"""The coordinator's end of one judge worker process: starting it with an allow-listed
environment (never the user's secrets) on its own GPU, its handshake, one request at a time over
a private pipe, and ending it with everything it started; plus removing what killed workers and
pools left in the run's private directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from multiprocessing import Pipe
from pathlib import Path

from ..common.options import JudgeOptions, WorkerOptions
from ..common.privdir import ENV as PRIVATE_DIR_ENV
from ..common.privdir import ensure_private, private_dir
from ..common.requests import ExitRequest, JudgeRequest
from .backend import DeviceUnavailable
from .workerenv import worker_environment


class WorkerLost(RuntimeError):
    pass


class WorkerHandle:
    """One worker process and the coordinator's end of its pipe. Constructing one only starts the
    process; `wait_ready` waits for its handshake (importing torch and Triton, initialising the
    device: seconds), so that many workers start side by side."""

    def __init__(self, backend: str, index: int, options: JudgeOptions, start_timeout: float = 600.0,
                 private: Path | None = None, gpu_workers: int = 2) -> None:
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
        if backend == "cuda":
            visible = env.get("CUDA_VISIBLE_DEVICES")
            ids = visible.split(",") if visible else None
            env["CUDA_VISIBLE_DEVICES"] = ids[index] if ids else str(index)
        elif backend == "hip":
            visible = env.get("HIP_VISIBLE_DEVICES")
            ids = visible.split(",") if visible else None
            env["HIP_VISIBLE_DEVICES"] = ids[index] if ids else str(index)
        ours, theirs = Pipe(duplex=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kernelwright.judge.worker.process", "--fd", str(theirs.fileno()),
             "--device", "cpu" if backend == "cpu" else "cuda"],
            pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        theirs.close()
        self.conn = ours
        # The pool's close and a judging thread that sees the worker die can both close the pipe:
        # once only (a second os.close could close a descriptor another thread opened meanwhile).
        self._conn_lock = threading.Lock()
        # Each child gets a Triton cache of its own side (see worker.Worker.start): the reference's
        # is never a directory a candidate is pointed at, so it cannot plant a compiled kernel there.
        # gpu_workers: how many of this pool's workers share the worker's GPU (1: no shared GPU lock)
        worker_options = WorkerOptions(memory_fraction=options.memory_fraction, gpu_workers=gpu_workers,
                                       cache_root=str(ensure_private(private / "triton")))
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

    def _recv(self, timeout: float, doing: str) -> dict:
        try:
            if not self.conn.poll(timeout):
                raise WorkerLost(f"judge worker {self.index} did not answer within {timeout:g} s while {doing}")
            return self.conn.recv()
        except (EOFError, OSError):
            code = self.process.poll()
            raise WorkerLost(f"judge worker {self.index} died while {doing} (exit status {code})") from None

    def judge(self, request: JudgeRequest, timeout: float) -> dict:
        try:
            self.conn.send(request.to_wire())
        except OSError:
            raise WorkerLost(f"judge worker {self.index} is gone") from None
        return self._recv(timeout, f"judging {request.candidate_path}")["verdict"]

    def kill(self) -> None:
        """End the worker now, with everything it started (its own process group)."""
        try:
            os.killpg(self.process.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self._close_conn()

    def _close_conn(self) -> None:
        with self._conn_lock:
            try:
                self.conn.close()
            except OSError:
                pass

    def close(self) -> None:
        if self.info is None and self.process.poll() is None:
            # still starting (importing torch): it would read "exit" only once ready
            self.kill()
            return
        try:
            self.conn.send(ExitRequest().to_wire())
        except OSError:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._close_conn()


def remove_worker_caches(private: Path, pids: list[int]) -> None:
    """The Triton caches of these workers' children (a worker killed at close leaves them)."""
    root = private / "triton"
    for pid in pids:
        for path in root.glob(f"w{pid}-*"):
            shutil.rmtree(path, ignore_errors=True)


def sweep_stale(private: Path) -> None:
    """Remove what dead processes left in the private directory: the Triton caches of workers
    (`triton/w<pid>-...`) and the sources of pools (`sources/sources-<pid>-...`) whose process is
    gone (killed before it could clean up). A directory of a live process, another run's, stays."""
    for folder, prefix in (("triton", "w"), ("sources", "sources-")):
        try:
            names = os.listdir(private / folder)
        except OSError:
            continue
        for name in names:
            pid = name[len(prefix):].split("-", 1)[0]
            if name.startswith(prefix) and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                shutil.rmtree(private / folder / name, ignore_errors=True)
