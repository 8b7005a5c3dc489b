"""What `--sandbox auto|strict|off` does where Landlock is missing (simulated: the one syscall
wrapper of `common.landlock` answers ENOSYS), and what a judged verdict records of it."""

import errno
import inspect
import json
import os
import tempfile

import pytest
from typer.testing import CliRunner

from kernelwright.cli import app
from kernelwright.judge import JudgeOptions, JudgePool, SandboxUnavailable
from kernelwright.judge.common import landlock
from kernelwright.judge.coordinator import pool as pool_module
from kernelwright.judge.sandbox import confinement
from kernelwright.tasks import resolve_task

from ..conftest import CANDIDATES

GOOD = CANDIDATES / "vector_add" / "good.py"


@pytest.fixture
def no_landlock(monkeypatch):
    monkeypatch.setattr(landlock, "_syscall", lambda nr, *a: (-1, errno.ENOSYS))
    monkeypatch.setattr(pool_module, "_sandbox_warnings", set())


@pytest.fixture
def runner() -> CliRunner:
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)
    return CliRunner()


def test_strict_refuses_before_any_worker_starts(no_landlock):
    with pytest.raises(SandboxUnavailable, match="--sandbox strict: Landlock unavailable"):
        JudgePool("cpu", workers=1, options=JudgeOptions(sandbox="strict"))


def test_strict_exits_2_with_the_reason(no_landlock, runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--sandbox", "strict", "--no-perf"])
    assert result.exit_code == 2, result.output
    assert "Landlock unavailable" in result.stderr and "refusing to judge" in result.stderr


def test_an_unknown_level_is_a_usage_error(runner):
    result = runner.invoke(app, ["eval", str(GOOD), "--task", "vector_add", "--sandbox", "on"])
    assert result.exit_code == 2
    assert "--sandbox must be one of auto, strict, off" in result.stderr


def test_auto_warns_once_and_judges(no_landlock, capsys):
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=1, seed=7, perf=False)
    for _ in range(2):
        with JudgePool("cpu", workers=1, options=options) as pool:
            verdict = pool.judge(task, GOOD)
        assert verdict.passed, verdict.reason
    err = capsys.readouterr().err
    assert err.count("warning: sandbox: Landlock unavailable") == 1, err


def test_off_records_no_confinement():
    task = resolve_task("vector_add")
    with JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, seed=7, perf=False, sandbox="off")) as pool:
        verdict = pool.judge(task, GOOD)
    assert verdict.passed and verdict.sandbox["level"] == "off" and not verdict.sandbox["layers"]


def test_a_child_without_landlock_says_what_is_missing(no_landlock):
    """In a forked child (as the judge's): the record names the missing layer and is not
    complete, which a strict run's worker turns into a judge error."""
    scratch = tempfile.mkdtemp(prefix="kw-levels-")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        record = confinement.enter(confinement.ChildSandbox(level="auto", scratch=scratch))
        os.write(w, json.dumps(record.as_dict()).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        record = json.loads(f.read())
    os.waitpid(pid, 0)
    assert not record["complete"]
    assert any("landlock" in m and "ENOSYS" in m for m in record["missing"]), record
    assert record["summary"].startswith("Landlock unavailable")
