"""The worker's sign of life to the coordinator while it judges (`Heartbeat`)."""

from __future__ import annotations

import contextlib
import threading
import time
from multiprocessing.connection import Connection

HEARTBEAT_S = 1.0  # while judging, a sign of life to the coordinator this often (its watchdog waits 60 s)


class Heartbeat:
    """The worker's sign of life while it judges: `{"op": "alive"}` on its pipe every
    HEARTBEAT_S, from a thread of its own, so the coordinator tells a worker that is busy (a
    compile, a timing turn: minutes) from one that is stopped or wedged (its watchdog,
    coordinator/workerhandle.py). Beats only between a request and its verdict (the coordinator
    reads the pipe only then: beats sent while it does not read would fill it), and never after
    the verdict: both go through one lock, so the pipe's frames never interleave. The thread only
    sleeps and writes a few bytes, so the children forked meanwhile inherit no lock they use."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._lock = threading.Lock()
        self._on = False
        threading.Thread(target=self._run, name="kernelwright-heartbeat", daemon=True).start()

    @contextlib.contextmanager
    def judging(self):
        with self._lock:
            self._on = True
        try:
            yield
        finally:
            with self._lock:
                self._on = False

    def send(self, message: dict) -> None:
        with self._lock:
            self.conn.send(message)

    def _run(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            with self._lock:
                if not self._on:
                    continue
                try:
                    self.conn.send({"op": "alive"})
                except OSError:
                    return  # the coordinator is gone: the main thread finds out on its own

