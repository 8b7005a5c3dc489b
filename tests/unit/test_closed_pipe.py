"""Output to a pipe whose reader is gone (`kernelwright bench-report RUN | head -1`) ends every
command quietly: exit status 141 (what a command killed by SIGPIPE has in the shell, as `cat`
and `git log` give), no traceback and no error on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    return env


def _into_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The command with stdout a pipe whose reader has already closed it (the end of any reader
    that closes early: no race with how much the reader took first)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "kernelwright", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=_env(), cwd=cwd, timeout=120)
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory) -> Path:
    from kernelwright.agent.app import RunSpec, open_run
    from kernelwright.agent.loop import AgentSettings

    out = tmp_path_factory.mktemp("closed-pipe") / "run"
    spec = RunSpec(command="bench", task_refs=("vector_add", "softmax"), model="scripted", settings=AgentSettings(),
                   suite="builtin", task_names=("vector_add", "softmax"))
    store, _ = open_run(out, spec, resume=False)
    store.close()
    return out


@pytest.mark.slow
@pytest.mark.parametrize("args", [("bench-report", "RUN"), ("bench-report", "RUN", "--json"), ("tasks",),
                                  ("--help",)], ids=" ".join)
def test_output_to_a_closed_pipe_exits_141_quietly(bench_run, tmp_path, args):
    args = tuple(str(bench_run) if a == "RUN" else a for a in args)
    result = _into_closed_pipe(*args, cwd=tmp_path)
    assert result.returncode == 141, result.stderr
    assert result.stderr == ""


@pytest.mark.slow
def test_head_of_bench_report_is_its_first_line_and_no_error(bench_run, tmp_path):
    """As the user typed it: a shell pipeline into `head -1` (the status is 0 when the report
    was written whole before head closed the pipe, else 141; never 1, never a traceback)."""
    result = subprocess.run(["bash", "-o", "pipefail", "-c",
                             f'"{sys.executable}" -m kernelwright bench-report "{bench_run}" | head -1'],
                            capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120)
    assert result.returncode in (0, 141), result.stderr
    assert result.stderr == "" and len(result.stdout.splitlines()) == 1


def test_a_commands_own_exit_status_is_kept_with_stdout_open(kernelwright_here, tmp_path):
    """Not every exit 1 or 2 is a closed pipe: an open stdout keeps the command's own status."""
    result = kernelwright_here("bench-report", str(tmp_path / "nothing-here"))
    assert result.returncode == 2 and "no such directory" in " ".join(result.stderr.split())
