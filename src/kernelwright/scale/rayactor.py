"""The node's end of a Ray judging actor: it starts the same judge worker process a local pool
starts (`WorkerHandle`, allow-listed environment, private pipe, watchdog) on the GPU Ray gave it,
and forwards one request at a time. The trust boundary is the worker's as on one host: the actor
is trusted code (kernelwright's), the candidate runs only in the worker's confined children.

What travels is data, never a driver's path: the candidate's source text, and the task's ref plus
the bytes of its task file (written here when this node has no identical file at that path).
Imported on the node (by Ray), never by the driver unless it uses `--executor ray`."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

from ..judge.common.options import JudgeOptions
from ..judge.common.privdir import ensure_private, private_dir
from ..judge.common.requests import JudgeRequest
from ..judge.common.verdict import judge_error_verdict
from ..judge.coordinator.backend import detect_backend
from ..judge.coordinator.pool import protect_coordinator
from ..judge.coordinator.workerhandle import WorkerHandle, WorkerLost, remove_worker_caches


def task_payload(ref: str) -> tuple[str, bytes | None]:
    """(ref, the bytes of its task file) for a ref that names a file on the driver; (ref, None)
    for a benchmark adapter's ref, whose checkout every node must have at the same path."""
    from ..tasks.shrink import split_ref

    inner = split_ref(ref)[1]
    path = Path(inner)
    if path.suffix == ".py" and path.is_file():
        return ref, path.read_bytes()
    return ref, None


class NodeJudge:
    """One judging actor's state: its worker, where it writes what it was sent, and which node it
    is on (the driver reports it)."""

    def __init__(self, device: str, options: JudgeOptions, task_files: tuple[str, ...] = ()) -> None:
        # on a GPU node Ray has set CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES to this actor's one
        # GPU, so the worker's index is 0 of what it sees
        self.backend, _ = detect_backend(device)
        # Undumpable, as the local coordinator is: a Ray worker's environment is the raylet's, which
        # on a cluster started by hand may hold what its shell had; a candidate (same user) must
        # not read it through /proc/<actor>/environ.
        protect_coordinator()
        self.options = options
        self.task_files = task_files
        self.private = private_dir()
        self.incoming = Path(tempfile.mkdtemp(prefix=f"sources-{os.getpid()}-",
                                              dir=ensure_private(self.private / "sources")))
        self.handle = self._start()

    def _start(self) -> WorkerHandle:
        return WorkerHandle(self.backend, 0, self.options, private=self.private, gpu_workers=1,
                            task_files=self.task_files)

    def ready(self) -> dict:
        info = dict(self.handle.wait_ready())
        info.update(node=socket.gethostname(), actor_pid=os.getpid(), worker_pid=self.handle.process.pid)
        try:  # which Ray node (several can share a host name): the run's warnings name it
            import ray

            info["node_id"] = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - outside Ray (a test of this class)
            pass
        return info

    def _local_ref(self, ref: str, task_bytes: bytes | None) -> str:
        """The ref this node loads: the driver's when this node has the same file at that path
        (a shared install: files beside it stay readable), else a copy of the file written here."""
        from ..tasks.shrink import split_ref

        if task_bytes is None:
            return ref
        prefix, inner = split_ref(ref)[0], split_ref(ref)[1]
        try:
            if Path(inner).read_bytes() == task_bytes:
                return ref
        except OSError:
            pass
        digest = hashlib.sha256(task_bytes).hexdigest()[:16]
        copy = ensure_private(self.incoming / f"task-{digest}") / Path(inner).name
        if not copy.exists():
            copy.write_bytes(task_bytes)
        return ref.replace(inner, str(copy)) if prefix else str(copy)

    def judge(self, request: dict, source: str, task_bytes: bytes | None, timeout: float) -> tuple[dict, float]:
        """The verdict (a dict) of one candidate, and the seconds it took here (the driver's
        round trip less these is what Ray adds). A worker lost here (the candidate killed or
        stopped it) is replaced and the verdict is a judge error, as on one host."""
        started = time.monotonic()
        return self._judge(request, source, task_bytes, timeout), time.monotonic() - started

    def _judge(self, request: dict, source: str, task_bytes: bytes | None, timeout: float) -> dict:
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        path = self.incoming / f"{digest}-{os.getpid()}.py"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        request = dict(request, candidate_path=str(path),
                       task_ref=self._local_ref(request["task_ref"], task_bytes))
        wired = JudgeRequest(task_ref=request["task_ref"], candidate_path=request["candidate_path"],
                             seeds=list(request["seeds"]), options=JudgeOptions.from_wire(request["options"]))
        try:
            self.handle.wait_ready()
            return self.handle.judge(wired, timeout)
        except WorkerLost as exc:
            old, self.handle = self.handle, self._start()
            old.kill()
            remove_worker_caches(self.private, [old.process.pid])
            return judge_error_verdict("", str(path), str(exc), seeds=wired.seeds).to_dict()
        finally:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        self.handle.close()
        remove_worker_caches(self.private, [self.handle.process.pid])
        shutil.rmtree(self.incoming, ignore_errors=True)
