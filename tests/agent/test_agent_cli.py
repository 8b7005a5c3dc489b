"""`kernelwright generate` / `optimize` as a user runs them: subprocesses against the scripted
server, judged on the CPU interpreter. Includes a run killed with SIGKILL and resumed."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .agent_support import (BROKEN, FIX_MARK, GOOD, GOOD_SMALL_BLOCKS, MODEL, OPTIMIZE_MARK, PING, REFLECT_MARK, ROOT,
                            TINY_ADD, answer, kernel as make_kernel, model_requests, pings, role_of)
from kernelwright.llm.testing import ScriptedServer


def cli(*args: str, cwd: Path | None = None) -> subprocess.Popen:
    """The command in a folder without a kernelwright.toml, ignoring the user's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", "kernelwright", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                            cwd=cwd or Path(os.environ.get("TMPDIR", "/tmp")))


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, dict, str]:
    out, err = proc.communicate(timeout=timeout)
    try:
        data = json.loads(out) if out.strip() else {}
    except json.JSONDecodeError:
        raise AssertionError(f"not JSON on stdout: {out!r}\nstderr: {err}") from None
    return proc.returncode, data, err


def llm_flags(server) -> list[str]:
    return ["--model", MODEL, "--base-url", server.openai_base_url, "--no-cache", "--device", "cpu",
            "--judge-seeds", "1", "--json"]


def rows(db: Path, query: str) -> list:
    if not db.is_file():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(query).fetchall()
    except sqlite3.OperationalError:
        return []


SCRIPT = {"rules": [
    {"match": REFLECT_MARK, "content": "UNDEFINED_BLOCK_SIZE is not defined: use 1024."},
    {"match": "Your previous attempt", "delay_s": 4.0, **answer(GOOD)},
    {"match": OPTIMIZE_MARK, **answer(GOOD_SMALL_BLOCKS)},
], "default": answer(BROKEN)}


@pytest.mark.slow
def test_sigkill_then_resume_same_results_no_repeated_calls(tmp_path):
    run = tmp_path / "run"
    with ScriptedServer(SCRIPT) as server:
        proc = cli("generate", "--task", str(TINY_ADD), "--iterations", "3", "--llm-seed", "3", "--out", str(run),
                   *llm_flags(server))
        deadline = time.monotonic() + 240
        # kill once the first attempt is judged and the reflector has answered, while the fix is in flight
        while len(rows(run / "run.sqlite", "SELECT id FROM llm_calls")) < 2:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        answered_before = [r.prompt for r in model_requests(server)[:2]]
        assert [role_of(p) for p in answered_before] == ["generate", "reflect"]
        n_before = len(model_requests(server))

        code, data, err = finish(cli("generate", "--resume", str(run), *llm_flags(server)))
        after = [r.prompt for r in model_requests(server)[n_before:]]
    assert code == 0, err
    assert not set(after) & set(answered_before)  # nothing already answered was asked again
    assert [role_of(p) for p in after] == ["fix"]  # untimed: the run ends at the verified fix
    modes = [(m, k) for m, k in rows(run / "run.sqlite", "SELECT mode, kind FROM attempts ORDER BY idx")]
    assert modes == [("generate", "runtime_error"), ("fix", "passed")]
    result = data["results"][0]
    assert result["best"] is not None and (run / "best" / "tiny_add.py").is_file()


@pytest.mark.slow
def test_generate_from_instruction_and_reference(tmp_path):
    ref = tmp_path / "ref.py"
    ref.write_text("import torch\n\n\ndef vector_add(x, y):\n    return x + y\n\n\n"
                   "def get_inputs():\n    return [torch.randn(1000), torch.randn(1000)]\n")
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, data, err = finish(cli("generate", "Add two float32 vectors.", "--entry", "vector_add(x, y)",
                                     "--reference", str(ref), "--iterations", "1", "--out", str(tmp_path / "run"),
                                     *llm_flags(server)))
        prompt = model_requests(server)[0].prompt
    assert code == 0, err
    assert "Add two float32 vectors." in prompt and "vector_add(x, y)" in prompt and "return x + y" in prompt
    assert (tmp_path / "run" / "best" / "vector_add.py").read_text() == GOOD


def test_generate_usage_errors_are_clear(tmp_path):
    code, data, err = finish(cli("generate", "--task", str(TINY_ADD), "--device", "cpu", "--json",
                                 "--out", str(tmp_path / "r")), timeout=60)
    assert code == 2 and "no model chosen" in data["error"]
    ref = tmp_path / "ref.py"
    ref.write_text("def vector_add(x, y):\n    return x + y\n")
    code, data, err = finish(cli("generate", "Add.", "--entry", "vector_add(x, y)", "--reference", str(ref),
                                 "--model", MODEL, "--base-url", "http://127.0.0.1:9/v1", "--json",
                                 "--out", str(tmp_path / "r2")), timeout=60)
    assert code == 2 and "says nothing about inputs" in data["error"]
    code, data, err = finish(cli("generate", "--resume", str(tmp_path / "nowhere"), "--json"), timeout=60)
    assert code == 2 and "no such directory" in data["error"]
    # --perf under the interpreter, as eval: refused without --force, before anything is written
    nowhere = ["--model", MODEL, "--base-url", "http://127.0.0.1:9/v1", "--device", "cpu", "--perf", "--json"]
    code, data, err = finish(cli("generate", "--task", str(TINY_ADD), *nowhere, "--out", str(tmp_path / "r3")),
                             timeout=60)
    assert code == 2 and "refused" in data["error"] and "perf case(s)" in data["error"] and "--force" in data["error"]
    code, data, err = finish(cli("generate", "Add.", "--entry", "vector_add(x, y)", "--reference", str(ref), *nowhere,
                                 "--out", str(tmp_path / "r4")), timeout=60)
    assert code == 2 and "refused" in data["error"]
    assert not (tmp_path / "r3").exists() and not (tmp_path / "r4").exists()


@pytest.mark.slow
def test_optimize_starts_from_the_users_kernel(tmp_path):
    kernel = tmp_path / "mine.py"
    kernel.write_text(GOOD)
    # the optimizer's answer: larger blocks (8 programs for 65,536 elements, not 256: each is a
    # Python loop under the interpreter, and both kernels are timed)
    with ScriptedServer({"default": answer(make_kernel(8192), "Larger blocks.")}) as server:
        # without timing nothing can be faster: refused before any call to the model
        code, data, err = finish(cli("optimize", str(kernel), "--task", str(TINY_ADD), "--out", str(tmp_path / "no"),
                                     *llm_flags(server)))
        assert code == 2 and "needs timing" in data["error"] and "--perf --force" in data["error"]
        # --perf under the interpreter: refused as eval refuses it, with what it would cost
        code, data, err = finish(cli("optimize", str(kernel), "--task", str(TINY_ADD), "--perf",
                                     "--out", str(tmp_path / "no"), *llm_flags(server)))
        assert code == 2 and "refused" in data["error"] and "--force" in data["error"], data
        assert re.search(r"at least \d+ calls at perf sizes .*about \d+-\d+ min", data["error"]), data
        assert not server.requests and not (tmp_path / "no").exists()
        # --perf --force: timed, so the optimizer is asked
        code, data, err = finish(cli("optimize", str(kernel), "--task", str(TINY_ADD), "--iterations", "1", "--perf",
                                     "--force", "--out", str(tmp_path / "run"), *llm_flags(server)))
        prompt = model_requests(server)[0].prompt
    # the user's kernel is judged first and shown to the optimizer as the correct kernel so far
    assert OPTIMIZE_MARK in prompt and GOOD.strip() in prompt
    modes = rows(tmp_path / "run" / "run.sqlite", "SELECT mode, kind FROM attempts ORDER BY idx")
    assert modes == [("given", "passed"), ("optimize", "passed")]
    result = data["results"][0]
    assert result["given_speedup"] is not None and result["improved"] is not None  # timed (noise on a CPU)
    assert code == (0 if result["improved"] else 1)


WRONG = GOOD.replace("tl.load(x_ptr + offs, mask=mask) + tl.load", "tl.load(x_ptr + offs, mask=mask) - tl.load")


@pytest.mark.slow
def test_optimize_stops_on_a_failing_kernel_unless_fix_start(tmp_path):
    """A starting kernel that fails is an error with its verdict, before any request to the model
    (the ping included: the kernel is judged first); --fix-start has the agent fix it, after the
    ping."""
    empty, wrong = tmp_path / "empty.py", tmp_path / "wrong.py"
    empty.write_text("")
    wrong.write_text(WRONG)
    script = {"rules": [{"match": REFLECT_MARK, "content": "Define vector_add."}, {"match": FIX_MARK, **answer(GOOD)}],
              "default": answer(GOOD)}
    timed = ["--task", str(TINY_ADD), "--iterations", "1", "--perf", "--force"]
    with ScriptedServer(script) as server:
        for kernel, kind in ((empty, "missing_entry_point"), (wrong, "wrong")):
            code, data, err = finish(cli("optimize", str(kernel), *timed, "--out", str(tmp_path / kernel.stem),
                                         *llm_flags(server)))
            assert code == 2, (data, err)
            assert "your kernel fails the judge" in data["error"] and kind in data["error"] and "--fix-start" in data["error"]
            assert not server.requests  # no paid call, and no ping either
        code, data, err = finish(cli("optimize", str(empty), *timed, "--fix-start", "--out", str(tmp_path / "fixed"),
                                     *llm_flags(server)))
        roles = [role_of(r.prompt) for r in model_requests(server)]
        assert pings(server) == 1 and server.requests[0].prompt == PING  # before the paid calls
    assert code == 0, (data, err)
    assert roles == ["reflect", "fix"] and "error" not in data
    modes = rows(tmp_path / "fixed" / "run.sqlite", "SELECT mode, kind FROM attempts ORDER BY idx")
    assert modes == [("given", "missing_entry_point"), ("fix", "passed")]


@pytest.mark.slow
def test_untimed_generate_says_so_and_stops_at_the_first_verified_kernel(tmp_path):
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, data, err = finish(cli("generate", "--task", str(TINY_ADD), "--iterations", "3", "--out",
                                     str(tmp_path / "run"), *llm_flags(server)))
        n = len(model_requests(server))
    assert code == 0, err
    assert n == 1  # the correct first answer ends the run: no optimizer call whose gain nothing measures
    assert "speed is not measured under the CPU interpreter: the run stops at the first verified kernel" in err
    reason = data["results"][0]["ended"]["0"]
    assert "first verified kernel" in reason
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["ended"] == {reason: 1}
    assert summary["judge"]["candidates"] == 1 and data["judge"] == summary["judge"]  # the judge's report kept


@pytest.mark.slow
def test_untimed_evolve_says_nothing_migrates(tmp_path):
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, _data, err = finish(cli("generate", "--task", str(TINY_ADD), "--runs", "2", "--search", "evolve",
                                      "--out", str(tmp_path / "run"), *llm_flags(server)))
    assert code == 0, err
    assert "--search evolve has no archive to build on: nothing migrates" in " ".join(err.split())
    # progress off a terminal: a line per step on stderr
    assert "judging attempt 0" in err and "attempt 0 (generate): passed" in err and "ended: " in err


@pytest.mark.slow
def test_resume_reuses_the_runs_base_url_and_refuses_another_commands_run(tmp_path):
    with ScriptedServer({"default": answer(GOOD)}) as server:
        code, data, err = finish(cli("generate", "--task", str(TINY_ADD), "--iterations", "1", "--out",
                                     str(tmp_path / "run"), *llm_flags(server)))
        assert code == 0, err
        # no --base-url: the run's own is used (nothing is left to ask, so nothing is sent)
        code, data, err = finish(cli("generate", "--resume", str(tmp_path / "run"), "--no-cache", "--json"))
        assert code == 0, err
    code, data, err = finish(cli("bench", "--resume", str(tmp_path / "run"), "--json"), timeout=60)
    assert code == 2 and "kernelwright generate --resume" in data["error"]


@pytest.mark.slow
def test_ctrl_c_exits_at_once_and_resumes(tmp_path):
    """SIGINT while the model is thinking (a 60 s answer): exit 130 within seconds, the verified
    work kept, and --resume finishes the run."""
    run = tmp_path / "run"
    slow = {"rules": [{"match": REFLECT_MARK, "content": "Use 1024."},
                      {"match": "Your previous attempt", "delay_s": 60.0, **answer(GOOD)}],
            "default": answer(BROKEN)}
    with ScriptedServer(slow) as server:
        proc = cli("generate", "--task", str(TINY_ADD), "--iterations", "2", "--llm-seed", "3", "--out", str(run),
                   *llm_flags(server))
        deadline = time.monotonic() + 240
        while len(model_requests(server)) < 3:  # generate, reflect, and the slow fix in flight
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert time.monotonic() - sent < 20
        assert "--resume" in err
        # the first answer was broken and the fix never came: best/ is empty, and it says so
        assert "nothing was verified yet" in err and not any((run / "best").iterdir())
    with ScriptedServer({"rules": [{"match": "Your previous attempt", **answer(GOOD)}],
                         "default": answer(BROKEN)}) as server:
        code, data, err = finish(cli("generate", "--resume", str(run), *llm_flags(server)))
    assert code == 0, err
    assert data["results"][0]["best"]["mode"] == "fix"
