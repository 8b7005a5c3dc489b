"""`kernelwright bench` on built-in tasks with the scripted model, judged on the CPU interpreter:
metrics per iteration and per run count against hand-computed values, the baselines and
ablations as the prompts that reached the server show them, SIGKILL and resume, --max-cost.

The command runs in this process (`kernelwright`, below), through the entry point that
`python -m kernelwright` calls; SIGKILL and --resume run the real process (`cli`)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from .agent_support import FIX_MARK, OPTIMIZE_MARK, PING_ANSWER, REFLECT_MARK, ROOT, model_requests, role_of
from .test_agent_cli import cli, finish, rows
from kernelwright.llm.testing import ScriptedServer

pytestmark = pytest.mark.slow
REFS = ROOT / "src" / "kernelwright" / "suites" / "builtin" / "triton_refs"


def good(task: str) -> str:
    return (REFS / f"{task}.py").read_text()


def broken(task: str, entry: str) -> str:
    # the reference, with its entry point replaced by one that fails when called
    return good(task) + f"\n\ndef {entry}(*args, **kwargs):\n    return undefined_helper(*args)\n"


def ans(code: str) -> dict:
    return {"content": f"## Strategy\nplan\n\n```python\n{code}```\n", "usage": {"input_tokens": 100, "output_tokens": 50}}


R = {"content": "analysis", "usage": {"input_tokens": 100, "output_tokens": 50}}
VA, GE = "vector_add", "gelu"


@pytest.fixture
def kernelwright(kernelwright_here):
    """`kernelwright ARGS...` in this process (tests/conftest.py): (exit status, JSON on stdout,
    stderr), as `finish` returns them for a subprocess."""
    def call(*args: str, cwd: Path | None = None) -> tuple[int, dict, str]:
        proc = kernelwright_here(*args, cwd=cwd)
        try:
            data = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except json.JSONDecodeError:
            raise AssertionError(f"not JSON on stdout: {proc.stdout!r}\nstderr: {proc.stderr}") from None
        return proc.returncode, data, proc.stderr

    return call


def bench_flags(server, out: Path, *extra: str) -> list[str]:
    return ["bench", "--suite", "builtin", "--model", "openai-compatible/scripted", "--base-url",
            server.openai_base_url, "--no-cache", "--device", "cpu", "--judge-seeds", "1", "--llm-seed", "5",
            "--out", str(out), "--json", *extra]


def test_bench_metrics_per_iteration_and_run_count(tmp_path, kernelwright):
    """Task-runs go one at a time (--concurrency 1), so the scripted sequence is consumed in a
    known order: vector_add runs 0-2, then gelu runs 0-2, three iterations each."""
    va_good, va_bad, ge_good, ge_bad = ans(good(VA)), ans(broken(VA, "vector_add")), ans(good(GE)), ans(broken(GE, "gelu"))
    # untimed (the CPU interpreter): a run stops at its first verified kernel
    sequence = [
        PING_ANSWER,                            # the command's ping, before the run starts
        va_good,                                # vector_add run 0: passes at iteration 1
        va_bad, R, va_good,                     # run 1: fails, then the fix passes (iteration 2)
        va_bad, R, va_bad, R, va_bad,           # run 2: never
        ge_bad, R, ge_bad, R, ge_bad,           # gelu run 0: never
        ge_bad, R, ge_bad, R, ge_good,          # run 1: the second fix passes (iteration 3)
        ge_bad, R, ge_bad, R, ge_bad,           # run 2: never
    ]
    with ScriptedServer({"sequence": sequence}) as server:
        code, data, err = kernelwright(*bench_flags(server, tmp_path / "run", "--tasks", VA, "--tasks", GE,
                                                    "--runs", "3", "--iterations", "3", "--concurrency", "1"))
        assert len(server.requests) == len(sequence)
    assert code == 0, err
    it = {p["iterations"]: p["metrics"] for p in data["per_iteration"]}
    expected = {  # (call acc, exec acc, pass@1, pass@2, pass@3), by hand from the sequence above
        1: (0.5, 0.5, 1 / 6, 1 / 3, 0.5),
        2: (0.5, 0.5, 1 / 3, 0.5, 0.5),
        3: (1.0, 1.0, 0.5, 5 / 6, 1.0),
    }
    for t, (call, exe, p1, p2, p3) in expected.items():
        m = it[t]
        got = (m["call accuracy"]["value"], m["execution accuracy"]["value"], m["pass@1"]["value"],
               m["pass@2"]["value"], m["pass@3"]["value"])
        assert got == pytest.approx((call, exe, p1, p2, p3)), (t, got)
    by_runs = {p["runs"]: p["metrics"]["execution accuracy"]["value"] for p in data["per_runs"]}
    assert by_runs == {1: 0.5, 2: 1.0, 3: 1.0}
    assert data["judge"]["candidates"] == 15
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["per_iteration"] == data["per_iteration"]
    # nothing was timed: the speed metrics are unknown (null, with why), not 0
    assert metrics["timed"] is False and metrics["untimed_why"] == "CPU interpreter"
    last = metrics["per_runs"][-1]["metrics"]
    for name in ("GEAK speedup", "geomean speedup", "fast_1", "fast_1.5", "fast_2"):
        assert last[name]["value"] is None and last[name]["numerator"] is None, name
        assert last[name]["why"] == "nothing was timed (CPU interpreter)", name
    assert last["fast_0"]["value"] == 1.0 and last["fast_0"]["why"] is None  # fast_0 is execution accuracy
    # bench-report recomputes the same numbers from the store
    code, again, err = kernelwright("bench-report", str(tmp_path / "run"), "--json")
    assert code == 0 and again["per_iteration"] == data["per_iteration"]


@pytest.mark.parametrize("flags, absent, present, calls", [
    (["--mode", "direct"], ["An example of a Triton kernel", "### Indexing and masks"], [], 1),
    (["--mode", "one-shot"], ["### Indexing and masks"], ["An example of a Triton kernel"], 1),
    (["--mode", "reflexion"], ["### Indexing and masks"], ["An example of a Triton kernel", REFLECT_MARK], 3),
    (["--no-one-shot"], ["An example of a Triton kernel"], ["### Indexing and masks"], 3),
    (["--no-knowledge"], ["### Indexing and masks"], ["An example of a Triton kernel"], 3),
    (["--no-reflection"], [REFLECT_MARK], [FIX_MARK], 2),
    (["--no-optimizer"], [OPTIMIZE_MARK], [], 3),
])
def test_baselines_and_ablations_change_the_prompts(tmp_path, kernelwright, flags, absent, present, calls):
    # a failing first answer, then a passing fix: every prompt kind the mode allows is exercised
    script = {"rules": [{"match": REFLECT_MARK, **R}, {"match": FIX_MARK, **ans(good(VA))}],
              "default": ans(broken(VA, "vector_add"))}
    with ScriptedServer(script) as server:
        code, data, err = kernelwright(*bench_flags(server, tmp_path / "run", "--tasks", VA, "--iterations", "2",
                                                    *flags))
        prompts = [r.prompt for r in model_requests(server)]
    assert code == 0, err
    assert len(prompts) == calls, [role_of(p) for p in prompts]
    text = "\n".join(prompts)
    for s in absent:
        assert s not in text
    for s in present:
        assert s in text


def test_bench_sigkill_resume_same_metrics_no_repeated_calls(tmp_path, kernelwright):
    script = {"rules": [{"match": REFLECT_MARK, **R}, {"match": FIX_MARK, "delay_s": 2.0, **ans(good(GE))},
                        {"match": "## Task: vector_add", **ans(good(VA))}],
              "default": ans(broken(GE, "gelu"))}
    flags = ["--tasks", VA, "--tasks", GE, "--runs", "2", "--iterations", "2", "--concurrency", "2"]
    with ScriptedServer(script) as server:
        code, full, err = kernelwright(*bench_flags(server, tmp_path / "full", *flags))  # uninterrupted
    assert code == 0, err
    run = tmp_path / "run"
    with ScriptedServer(script) as server:
        proc = cli(*bench_flags(server, run, *flags))
        deadline = time.monotonic() + 300
        while len(rows(run / "run.sqlite", "SELECT idx FROM attempts")) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # (prompt, seed): two runs of a task send the same first prompt with their own seeds
        answered = {(r.prompt, r.body.get("seed")) for r in model_requests(server)[:-1]}  # the last may be in flight
        n_before = len(model_requests(server))
        code, resumed, err = finish(cli("bench", "--resume", str(run), "--base-url", server.openai_base_url,
                                        "--no-cache", "--json"), timeout=600)
        after = [(r.prompt, r.body.get("seed")) for r in model_requests(server)[n_before:]]
    assert code == 0, err
    assert not answered & set(after)
    for key in ("per_iteration", "per_runs"):
        assert [p["metrics"] for p in resumed[key]] == [p["metrics"] for p in full[key]]


def test_max_cost_stops_new_calls(tmp_path, kernelwright):
    (tmp_path / "kernelwright.toml").write_text(
        '[llm.prices."openai-compatible/scripted"]\ninput = 1000.0\noutput = 1000.0\n')  # $0.15 a call
    with ScriptedServer({"default": ans(good(VA))}) as server:
        code, data, err = kernelwright(*bench_flags(server, tmp_path / "run", "--tasks", VA, "--tasks", GE,
                                                    "--iterations", "5", "--max-cost", "0.4", "--concurrency", "1",
                                                    # one call per attempt (the budget is checked per attempt)
                                                    "--no-reflection"),
                                       cwd=tmp_path)
        n = len(model_requests(server))
    assert code == 0, err
    assert n == 3  # $0.15, $0.30, $0.45: no call starts once $0.40 is spent
    assert data["cost_usd"] == pytest.approx(0.45)
    ended = dict(rows(tmp_path / "run" / "run.sqlite", "SELECT task, reason FROM task_runs_ended"))
    # vector_add's first answer is verified (untimed: its run ends there); gelu's runs into the budget
    assert "first verified kernel" in ended[VA] and "cost budget" in ended[GE]
    assert (tmp_path / "run" / "best" / "vector_add.py").is_file()  # the verified kernel is kept


def test_bench_stops_when_the_model_fails_and_resume_extends_it(tmp_path, kernelwright):
    """The model dies after the first kernel: exit 4, one attempt stored, the task-run open;
    `--resume --iterations 3` (one more than asked at first) sends only the missing calls."""
    (tmp_path / "kernelwright.toml").write_text("[llm]\nbackoff_base_s = 0.01\nbackoff_max_s = 0.02\nmax_retries = 2\n")
    run = tmp_path / "run"
    with ScriptedServer({"sequence": [PING_ANSWER, ans(broken(VA, "vector_add"))],
                         "default": {"status": 503}}) as server:
        code, data, err = kernelwright(*bench_flags(server, run, "--tasks", VA, "--iterations", "2"), cwd=tmp_path)
    assert code == 4, err
    assert "503" in data["model_unavailable"] and f"kernelwright bench --resume {run}" in err
    assert rows(run / "run.sqlite", "SELECT mode, kind FROM attempts") == [("generate", "runtime_error")]
    assert rows(run / "run.sqlite", "SELECT task FROM task_runs_ended") == []
    script = {"rules": [{"match": REFLECT_MARK, **R}, {"match": OPTIMIZE_MARK, **ans(good(VA))},
                        {"match": FIX_MARK, **ans(good(VA))}], "default": ans(broken(VA, "vector_add"))}
    with ScriptedServer(script) as server:
        code, data, err = kernelwright("bench", "--resume", str(run), "--iterations", "3", "--base-url",
                                       server.openai_base_url, "--no-cache", "--json", cwd=tmp_path)
        roles = [role_of(r.prompt) for r in model_requests(server)]
        assert len(server.requests) == len(roles) + 1  # and one ping
    assert code == 0, err
    assert "1 attempt stored, 2 to go (--iterations 2 -> 3)" in err
    assert roles == ["reflect", "fix"]  # untimed: the verified fix ends the run
    assert data["iterations"] == 3 and len(data["per_iteration"]) == 3
    # a bench run refuses what would change it, as generate does
    code, data, err = kernelwright("bench", "--resume", str(run), "--mode", "direct", "--json", cwd=tmp_path)
    assert code == 2 and "--mode (the run's: geak)" in data["error"]
