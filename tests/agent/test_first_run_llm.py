"""A new user's first runs of the agent, with the scripted server as the model over real HTTP: a
dead or failing endpoint stops the command in seconds, before anything is stored; a model that
fails mid-run stops the run without spending its iterations, and `--resume` finishes it with
only the missing calls; `--resume` extends a run with --iterations and refuses a flag that would
change what the run is.

The commands run in this process (`kernelwright_here`, tests/conftest.py), in a folder whose
kernelwright.toml keeps the user's cache out of it, and makes the client's retries quick where a
test waits them out."""

from __future__ import annotations

import json
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from .agent_support import (BROKEN, GOOD, GOOD_SMALL_BLOCKS, MODEL, OPTIMIZE_MARK, PING_ANSWER, REFLECT_MARK,
                            TINY_ADD, answer, model_requests, pings, role_of)
from kernelwright.llm.testing import ScriptedServer

QUICK_RETRIES = "backoff_base_s = 0.01\nbackoff_max_s = 0.02\nmax_retries = 2\n"
GOOD_SCRIPT = {"rules": [{"match": REFLECT_MARK, "content": "Use 1024."},
                         {"match": OPTIMIZE_MARK, **answer(GOOD_SMALL_BLOCKS)},
                         {"match": "Your previous attempt", **answer(GOOD)}],
               "default": answer(BROKEN)}


@pytest.fixture
def kw(kernelwright_here, tmp_path):
    """`kernelwright ARGS...` in tmp_path: (exit status, JSON on stdout, stderr, seconds)."""
    def call(*args: str, quick: bool = False, config: str = "") -> tuple[int, dict, str, float]:
        # the test's own global cache: a resume without --no-cache must not replay another run's
        (tmp_path / "kernelwright.toml").write_text(f'[llm]\ncache_dir = "{tmp_path / "user-cache"}"\n'
                                                    + (QUICK_RETRIES if quick else "") + config)
        started = time.monotonic()
        proc = kernelwright_here(*args, cwd=tmp_path)
        took = time.monotonic() - started
        try:
            data = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except json.JSONDecodeError:
            raise AssertionError(f"not JSON on stdout: {proc.stdout!r}\nstderr: {proc.stderr}") from None
        return proc.returncode, data, proc.stderr, took

    return call


def flags(url: str, *extra: str) -> list[str]:
    return ["--model", MODEL, "--base-url", url, "--no-cache", "--device", "cpu", "--judge-seeds", "1",
            "--llm-seed", "3", "--json", *extra]


def attempts(run: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(run / "run.sqlite") as conn:
        return conn.execute("SELECT mode, kind FROM attempts ORDER BY task, run, idx").fetchall()


def ended(run: Path) -> list[tuple]:
    with sqlite3.connect(run / "run.sqlite") as conn:
        return conn.execute("SELECT task, run, reason FROM task_runs_ended").fetchall()


def dead_url() -> str:
    """A loopback port nothing listens on: connection refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# -- preflight ---------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["generate", "bench"])
@pytest.mark.parametrize("failure, words", [
    (None, "cannot connect"),
    ({"status": 500, "message": "the GPU fell off"}, "500"),
    ({"malformed": "not_json"}, "malformed response"),
])
def test_a_model_that_does_not_answer_stops_the_command_before_anything(tmp_path, kw, command, failure, words):
    """Default retries (the ping retries twice): seconds, not the minutes of a run's retries."""
    run = tmp_path / "run"
    task = ["--task", str(TINY_ADD)] if command == "generate" else ["--suite", "builtin", "--tasks", "vector_add"]
    if failure is None:
        url = dead_url()
        code, data, err, took = kw(command, *task, "--iterations", "2", "--out", str(run), *flags(url))
        sent = 0
    else:
        with ScriptedServer({"default": failure}) as server:
            url = server.openai_base_url
            code, data, err, took = kw(command, *task, "--iterations", "2", "--out", str(run), *flags(url))
            sent = len(server.requests)
    assert code == 2, err
    assert "the model does not answer, so the run does not start" in data["error"] and words in data["error"]
    # the doctor it suggests checks the same endpoint (without --base-url it would refuse to)
    assert f"Check it with `kernelwright doctor --model {MODEL} --base-url {url}`" in data["error"]
    assert not run.exists()  # no run directory, no attempt
    assert took < 30, took
    assert sent == (0 if failure is None else 3)  # the ping, retried twice


def test_a_server_that_never_answers_fails_the_start_in_seconds(tmp_path, kw):
    """It accepts the connection and says nothing: each attempt of the ping waits
    llm.preflight_timeout_s (10 s by default; 0.5 s here), not the run's llm.timeout_s, and the
    command says what it is waiting for."""
    run = tmp_path / "run"
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen(8)  # connections complete in the backlog; nothing is ever read or sent
        url = f"http://127.0.0.1:{mute.getsockname()[1]}/v1"
        code, data, err, took = kw("generate", "--task", str(TINY_ADD), "--iterations", "1", "--out", str(run),
                                   *flags(url), quick=True, config="preflight_timeout_s = 0.5\n")
    assert code == 2, err
    assert f"checking the model at {url}…" in err
    assert "does not answer" in data["error"] and "timeout" in data["error"].lower(), data["error"]
    assert took < 20, took  # 3 attempts of 0.5 s, and the command's start
    assert not run.exists()


def test_bench_perf_under_the_interpreter_is_refused_unless_force(tmp_path, kw):
    """As eval, generate and optimize: refused with what it would cost, before the ping; --force
    passes that check (here, on to the dead model's refusal)."""
    run = tmp_path / "run"
    bench = ["bench", "--suite", "builtin", "--tasks", "vector_add,softmax", "--perf", "--iterations", "2",
             "--out", str(run)]
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, data, err, _ = kw(*bench, *flags(server.openai_base_url))
        assert not server.requests  # refused before the model's ping
    assert code == 2, err
    error = data["error"]
    assert "--perf under Triton's CPU interpreter refused: the 2 tasks have" in error and "--force" in error
    assert "for up to 2 kernels per task" in error and not run.exists()
    code, data, err, _ = kw(*bench, "--force", *flags(dead_url()))
    assert code == 2 and "does not answer" in data["error"], err
    assert "--force: timing under the CPU interpreter: the 2 tasks have" in " ".join(err.split())
    assert not run.exists()


def test_optimize_judges_the_kernel_then_pings_a_dead_model(tmp_path, kw):
    """A correct starting kernel, timed: the ping comes once it is judged (the model is to be asked
    for a faster one); a dead model is then exit 2, and the run leaves no directory."""
    kernel, run = tmp_path / "mine.py", tmp_path / "run"
    kernel.write_text(GOOD)
    text = [f for f in flags(dead_url()) if f != "--json"]  # the progress lines on stderr
    code, _, err, _ = kw("optimize", str(kernel), "--task", str(TINY_ADD), "--iterations", "1", "--perf", "--force",
                         "--out", str(run), *text, quick=True)
    assert code == 2, err
    err = " ".join(err.split())
    judged, refused = err.find("attempt 0 (given): passed"), err.find("the model does not answer")
    assert 0 <= judged < refused, err  # judged first, on the judge pool the run would go on with
    assert "so the run does not start" in err and "run the same command" in err and not run.exists()


def test_generate_from_an_instruction_leaves_no_task_files_when_the_model_is_dead(tmp_path, kw):
    ref = tmp_path / "ref.py"
    ref.write_text("import torch\n\n\ndef vector_add(x, y):\n    return x + y\n\n\n"
                   "def get_inputs():\n    return [torch.randn(1000), torch.randn(1000)]\n")
    code, data, err, _ = kw("generate", "Add two vectors.", "--entry", "vector_add(x, y)", "--reference", str(ref),
                            "--out", str(tmp_path / "run"), *flags(dead_url()), quick=True)
    assert code == 2 and "does not answer" in data["error"]
    assert not (tmp_path / "run").exists()


def test_offline_needs_no_server(tmp_path, kw):
    """A finished run replayed offline into a new run: its calls come from the user's cache
    (same prompts, seeds and samples), and nothing is pinged."""
    cache = tmp_path / "cache"
    config = f'[llm]\ncache_dir = "{cache}"\n'
    with ScriptedServer({"default": answer(GOOD)}) as server:
        (tmp_path / "c.toml").write_text(config)
        first = ["generate", "--task", str(TINY_ADD), "--iterations", "1", "--config", str(tmp_path / "c.toml"),
                 "--model", MODEL, "--device", "cpu", "--judge-seeds", "1", "--llm-seed", "3", "--json"]
        code, data, err, _ = kw(*first, "--base-url", server.openai_base_url, "--out", str(tmp_path / "a"))
        assert code == 0, err
    code, data, err, _ = kw(*first, "--offline", "--base-url", dead_url(), "--out", str(tmp_path / "b"))
    assert code == 0, err
    assert attempts(tmp_path / "b") == [("generate", "passed")]


# -- a model that fails mid-run ----------------------------------------------------------------
def test_a_model_failing_mid_run_stops_it_and_resume_sends_only_the_missing_calls(tmp_path, kw):
    run = tmp_path / "run"
    # the ping and the first kernel (broken) are answered; then every request fails
    with ScriptedServer({"sequence": [PING_ANSWER, answer(BROKEN)], "default": {"status": 500}}) as server:
        code, data, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "3", "--out", str(run),
                                *flags(server.openai_base_url), quick=True)
        roles = [role_of(r.prompt) for r in model_requests(server)]
    assert code == 4, err
    assert "500" in data["model_unavailable"] and data["exit_code"] == 4
    assert "the model stopped answering" in err and f"kernelwright generate --resume {run}" in err
    assert roles == ["generate", "reflect", "reflect", "reflect"]  # the reflection, tried 3 times, then stop
    assert attempts(run) == [("generate", "runtime_error")]  # the failed call is no attempt
    assert ended(run) == []  # the task-run is open: a resume continues it

    with ScriptedServer(GOOD_SCRIPT) as server:
        code, data, err, _ = kw("generate", "--resume", str(run), "--base-url", server.openai_base_url, "--json")
        roles = [role_of(r.prompt) for r in model_requests(server)]
        assert pings(server) == 1
    assert code == 0, err
    assert "1 attempt stored, 2 to go" in err
    # exactly the missing calls (untimed, the verified fix ends the run: no optimizer)
    assert roles == ["reflect", "fix"]
    assert attempts(run) == [("generate", "runtime_error"), ("fix", "passed")]


def test_a_service_failure_in_one_task_run_stops_the_others(tmp_path, kw):
    """Two runs in parallel; the model dies after the ping and one answer: neither run spends
    its iterations on the dead endpoint."""
    run = tmp_path / "run"
    with ScriptedServer({"sequence": [PING_ANSWER, answer(GOOD)], "default": {"malformed": "not_json"}}) as server:
        code, data, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "4", "--runs", "2",
                                "--out", str(run), *flags(server.openai_base_url), quick=True)
        sent = len(model_requests(server))
    assert code == 4, err
    assert "malformed" in data["model_unavailable"]
    assert len(attempts(run)) <= 1 and sent <= 1 + 2 * 3  # the answered call, and at most one failing call per run


# -- --resume with flags -----------------------------------------------------------------------
def test_resume_with_more_iterations_extends_the_run(tmp_path, kw):
    run = tmp_path / "run"
    # a kernel that keeps failing: under the interpreter a verified one would end the run
    with ScriptedServer({"rules": [{"match": REFLECT_MARK, "content": "Use 1024."}], "default": answer(BROKEN)}) as server:
        code, _, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "1", "--out", str(run),
                             *flags(server.openai_base_url))
        assert code == 1, err
        assert ended(run) == [("tiny_add", 0, "all iterations done")]
        before = len(server.requests)
        code, data, err, _ = kw("generate", "--resume", str(run), "--iterations", "3", "--json")
        assert code == 1, err
        assert "1 attempt stored, 2 to go (--iterations 1 -> 3)" in err
        assert [role_of(r.prompt) for r in model_requests(server)[1:]] == ["reflect", "fix", "reflect", "fix"]
        assert len(server.requests) - before == 5  # a ping and the two new iterations (each a reflection and a fix)
        # the extension is the run's now: a plain resume finds nothing to do, and asks nothing
        before = len(server.requests)
        code, data, err, _ = kw("generate", "--resume", str(run), "--json")
        assert code == 1, err
        assert "3 attempts stored, 0 to go" in err and len(server.requests) == before
    assert [m for m, _ in attempts(run)] == ["generate", "fix", "fix"]
    assert data["results"][0]["attempts"] == 3


@pytest.mark.parametrize("extra, refused", [
    (["--model", "openai-compatible/other"], "--model (the run's: openai-compatible/scripted)"),
    (["--temperature", "0.2"], "--temperature (the run's: 1.0)"),
    (["--no-reflection"], "--reflection/--no-reflection (the run's: True)"),
    (["--llm-seed", "4"], "--llm-seed (the run's: 3)"),
    (["--task", "softmax"], "--task"),
    (["--out", "elsewhere"], "--out"),
])
def test_resume_refuses_a_flag_that_changes_the_run(tmp_path, kw, extra, refused):
    run = tmp_path / "run"
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, _, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "1", "--no-optimizer", "--out", str(run), *flags(server.openai_base_url))
        assert code == 0, err
        n = len(server.requests)
        # the run's own values repeated are fine; the refused flag is named with the run's value
        code, data, err, _ = kw("generate", "--resume", str(run), *flags(server.openai_base_url), *extra)
        assert len(server.requests) == n  # refused before any request
    assert code == 2, err
    assert "a resumed run keeps what it was started with" in data["error"] and refused in data["error"]


def test_resume_cannot_shrink_a_run(tmp_path, kw):
    run = tmp_path / "run"
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, _, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "2", "--no-optimizer",
                             "--out", str(run), *flags(server.openai_base_url))
        assert code == 0, err
        code, data, err, _ = kw("generate", "--resume", str(run), "--iterations", "1", "--json")
    assert code == 2 and "can only be extended" in data["error"]


def test_resume_with_a_dead_model_and_work_left_exits_2_and_changes_nothing(tmp_path, kw):
    run = tmp_path / "run"
    # a kernel that keeps failing: under the interpreter a verified one would end the run
    with ScriptedServer({"rules": [{"match": REFLECT_MARK, "content": "Use 1024."}], "default": answer(BROKEN)}) as server:
        code, _, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "1", "--out", str(run),
                             *flags(server.openai_base_url))
        assert code == 1, err  # nothing verified yet: work left
    code, data, err, _ = kw("generate", "--resume", str(run), "--iterations", "2", "--base-url", dead_url(),
                            "--json", quick=True)
    assert code == 2 and "does not answer" in data["error"] and "--offline" in data["error"]
    with sqlite3.connect(run / "run.sqlite") as conn:
        spec = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'spec'").fetchone()[0])
    assert spec["settings"]["iterations"] == 1 and ended(run)  # not extended, not reopened


# -- the progress line -------------------------------------------------------------------------
def test_the_progress_line_says_what_a_call_waits_for():
    from kernelwright.cli.agent_progress import AgentProgress
    from kernelwright.llm import LLMTransientError
    from kernelwright.llm.retry import RetryNotice

    progress = AgentProgress(1, 1, 2, quiet=True)
    status = lambda: progress.latest  # noqa: E731 - the line's latest event
    assert "starting the judge" in status()
    progress.event("asking", {"task": "softmax", "run": 0, "role": "generate"})
    assert "starting the judge" in status()  # (the cache may answer it: nothing is waited for yet)
    progress.sending({"task": "softmax", "run": "0"})
    assert "softmax run 0: waiting for the model (generate)" in status()
    error = LLMTransientError("answered 500", kind="server_error", status=500)
    progress.retrying({"task": "softmax", "run": "0"}, RetryNotice(3, 6, error, 8.0))
    assert "waiting for the model (retry 3 of 6, HTTP 500)" in status()
    progress.retrying({"task": "softmax", "run": "0"},
                      RetryNotice(1, 6, LLMTransientError("refused", kind="connection"), 2.0))
    assert "(retry 1 of 6, cannot connect)" in status()


def test_the_progress_line_says_what_came_of_a_call():
    """A failed call is not "the model answered": it says how it failed; a replay from the cache
    says nothing was sent (issue 29)."""
    from kernelwright.agent.calls import Reply, _failure
    from kernelwright.cli.agent_progress import AgentProgress
    from kernelwright.llm import LLMTransientError

    progress = AgentProgress(1, 1, 2, quiet=True)

    def call(**reply) -> str:
        progress.event("call", {"task": "softmax", "run": 0, "reply": Reply("fix", [], **{"text": "", **reply})})
        return progress.latest

    assert call(text="ok") == "softmax run 0: the model answered (fix)"
    failed = _failure(LLMTransientError("gave up", kind="server_error", status=500))
    assert call(error="LLMTransientError: gave up", failure=failed) == "softmax run 0: the model failed: HTTP 500 (fix)"
    unreadable = _failure(LLMTransientError("not JSON", kind="malformed_response"))
    assert call(error="x", failure=unreadable) == "softmax run 0: the model's answer was unreadable (fix)"
    assert call(text="ok", cache_hit=True) == "softmax run 0: answered from the cache (nothing sent) (fix)"


def test_a_failing_model_and_a_cache_replay_on_the_progress_lines(tmp_path, kw):
    """The lines a run prints on stderr (not a terminal): an HTTP 500 after every retry is said
    as such, and a resume answered from the run's cache sends nothing and waits for nothing."""
    run = tmp_path / "run"
    script = {"sequence": [PING_ANSWER, answer(BROKEN), {"content": "Use 1024."}], "default": {"status": 500}}
    with ScriptedServer(script) as server:
        code, _, err, _ = kw("generate", "--task", str(TINY_ADD), "--iterations", "2", "--out", str(run),
                             *flags(server.openai_base_url), quick=True)
    assert code == 4, err
    assert "run 0: the model failed: HTTP 500 (fix)" in err and "the model answered (fix)" not in err
    assert "run 0: waiting for the model (reflect)" in err
    # offline: the reflection replays from the run's cache; the fix is in no cache
    code, _, err, _ = kw("generate", "--resume", str(run), "--offline", "--json")
    assert code == 4 and "not in the cache" in err, err
    assert "run 0: answered from the cache (nothing sent) (reflect)" in err and "waiting for the model" not in err


def test_optimize_with_a_failing_kernel_leaves_no_run_so_the_suggested_rerun_works(tmp_path, kw):
    """Exit 2 with the kernel's verdict and no request: the run directory this command made is
    removed, so `--fix-start --out D` (what the error suggests) starts; a directory that was
    there before is kept, and `--resume` on it says there is nothing to resume."""
    kernel, run = tmp_path / "mine.py", tmp_path / "run"
    kernel.write_text(BROKEN)
    start = ["optimize", str(kernel), "--task", str(TINY_ADD), "--iterations", "1", "--perf", "--force"]
    with ScriptedServer(GOOD_SCRIPT) as server:
        code, data, err, _ = kw(*start, "--out", str(run), *flags(server.openai_base_url))
        assert code == 2 and "--fix-start" in data["error"] and data["run_dir_removed"], err
        assert not run.exists() and not server.requests
        code, data, err, _ = kw(*start, "--fix-start", "--out", str(run), *flags(server.openai_base_url))
        assert code == 0, err
        assert ("given", "runtime_error") in attempts(run)

        kept = tmp_path / "kept"
        kept.mkdir()  # not this command's: left as it is
        code, data, err, _ = kw(*start, "--out", str(kept), *flags(server.openai_base_url))
        assert code == 2 and (kept / "run.sqlite").exists(), err
        code, data, err, _ = kw("optimize", "--resume", str(kept), "--base-url", server.openai_base_url, "--json")
    assert code == 2, err
    assert "nothing to resume" in data["error"] and "--fix-start" in data["error"]
    assert "0 attempts stored" not in err
