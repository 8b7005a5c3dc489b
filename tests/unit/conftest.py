"""Unit tests: fast, no GPU, no network. Imports this worktree's package ahead of any installed copy."""

import inspect
import sys
import threading
import time
from pathlib import Path

import pytest

# Import this checkout's package, ahead of any other installed copy of kernelwright.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))


@pytest.fixture
def runner():
    """typer's CliRunner with stderr kept apart from stdout (click >= 8.2 always keeps it apart
    and has no `mix_stderr`; older versions need mix_stderr=False)."""
    from typer.testing import CliRunner

    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)
    return CliRunner()


@pytest.fixture
def fake_child(monkeypatch):
    """(child, play): a ChildProcess whose other end is played by the test (no fork); `play`
    sends (pause s, message) steps from a thread and returns it."""
    from multiprocessing import Pipe

    from kernelwright.judge.common import wire
    from kernelwright.judge.worker.child_process import ChildProcess

    ours, theirs = Pipe(duplex=True)
    child = object.__new__(ChildProcess)
    child.conn, child.on_lock_stats, child.role, child.pid = ours, None, "candidate", -1
    child.alive = child.stopped = False  # no process behind it: nothing to signal
    monkeypatch.setattr(ChildProcess, "kill", lambda self: None)
    monkeypatch.setattr(ChildProcess, "log_tail", lambda self: "")

    def play(*steps):
        def run():
            for pause, msg in steps:
                time.sleep(pause)
                try:
                    theirs.send_bytes(wire.encode(msg))
                except OSError:  # the worker gave up on this child (a timeout test)
                    return
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    return child, play
