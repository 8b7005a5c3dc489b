"""Off a terminal, a long quiet stretch (a kernel judged for minutes under the interpreter) still
prints a line now and then, saying what the run is waiting on (the newcomer trial of issue 29 saw
15 minutes of silence after "judging attempt 1")."""

from __future__ import annotations

import io
import time

from rich.console import Console

from kernelwright.cli import agent_progress
from kernelwright.cli.agent_progress import AgentProgress


def test_a_quiet_run_off_a_terminal_says_it_is_still_working(monkeypatch):
    monkeypatch.setattr(agent_progress, "HEARTBEAT_S", 0.1)
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with AgentProgress(tasks=1, runs=1, iterations=2, console=console) as progress:
        progress.event("judging", {"task": "softmax", "run": 0, "index": 1})
        time.sleep(0.5)
    text = out.getvalue()
    assert "softmax run 0: judging attempt 1" in text
    assert "still working" in text and "since the last event: softmax run 0: judging attempt 1" in text


def test_no_heartbeat_while_events_keep_coming(monkeypatch):
    monkeypatch.setattr(agent_progress, "HEARTBEAT_S", 0.3)
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with AgentProgress(tasks=1, runs=1, iterations=2, console=console) as progress:
        for i in range(6):
            progress.event("judging", {"task": "softmax", "run": 0, "index": i})
            time.sleep(0.1)
    assert "still working" not in out.getvalue()
