"""`--resume DIR` of generate, optimize and bench takes only a run that command started: another
command's run is refused with exit status 2, naming the command that started it and the one to
use (one check, in agent.app.open_run, for all three)."""

from __future__ import annotations

import json

import pytest


def _run_dir(tmp_path, command: str):
    from kernelwright.agent.app import RunSpec, open_run
    from kernelwright.agent.loop import AgentSettings

    out = tmp_path / f"{command}-run"
    spec = RunSpec(command=command, task_refs=("vector_add",), model="scripted", settings=AgentSettings(),
                   suite="builtin" if command == "bench" else "")
    store, _ = open_run(out, spec, resume=False)
    store.close()
    return out


@pytest.mark.parametrize("started, asked", [("generate", "optimize"), ("optimize", "generate"),
                                            ("generate", "bench"), ("bench", "optimize"),
                                            ("bench", "generate"), ("optimize", "bench")])
def test_resume_refuses_another_commands_run(kernelwright_here, tmp_path, started, asked):
    out = _run_dir(tmp_path, started)
    result = kernelwright_here(asked, "--resume", str(out), "--json")
    assert result.returncode == 2, result.stderr
    message = json.loads(result.stdout)["error"]
    assert f"this run was started by `kernelwright {started}`" in message
    assert f"resume it with `kernelwright {started} --resume {out}`" in message


def test_the_check_passes_a_run_of_the_same_command(tmp_path):
    from kernelwright.agent.app import open_run

    for command in ("generate", "optimize", "bench"):
        store, spec = open_run(_run_dir(tmp_path, command), None, resume=True, command=command)
        store.close()
        assert spec.command == command
