"""The red-team's "fake the run" inside a real agent run: the scripted model answers with a kernel
that, when judged, looks for the run directory (at its path, and through the coordinator's
`/proc/<pid>/fd`), tries to rewrite the run store, the run's and the user's LLM cache, and to
post to the LLM server itself with the agent's key. Every try is denied; the candidate's attempt
is recorded with the reason it failed; the run goes on to the good kernel; the store, the caches
and the server hold only what the coordinator put there."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from .agent_support import GOOD, answer, role_of, spec
from kernelwright.agent.app import make_llm, open_run, run_session
from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.common import landlock
from kernelwright.llm.testing import ScriptedServer

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif((landlock.landlock_abi()[0] or 0) < 6,
                                 reason="needs Landlock ABI 6 (files, TCP, signals)")]

ATTACK = '''def vector_add(x, y):
    import glob, os, socket
    coordinator, run, user_cache, port = {coordinator}, {run!r}, {user_cache!r}, {port}
    found, denied, ok = [], [], []
    try:
        found += [os.readlink(f"/proc/{{coordinator}}/fd/{{fd}}") for fd in os.listdir(f"/proc/{{coordinator}}/fd")]
    except OSError as exc:
        denied.append(f"fds: {{type(exc).__name__}}")
    found += [os.path.join(run, n) for n in ("run.sqlite", "llm-cache.sqlite", "best")]
    found += glob.glob(run + "/**", recursive=True) + [os.path.join(user_cache, "llm-cache.sqlite")]
    for path in sorted(set(p for p in found if p.startswith((run, user_cache)))):
        try:
            with open(path if not path.endswith("best") else path + "/kernel.py", "ab") as f:
                f.write(b"PLANT" + b"ED-7731")  # never in its own source: the caches hold that
            ok.append(path)
        except OSError as exc:
            denied.append(f"{{os.path.basename(path)}}: {{type(exc).__name__}}")
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.0\\r\\nContent-Length: 2\\r\\n\\r\\n{{}}")
        ok.append("tcp")
    except OSError as exc:
        denied.append(f"tcp: {{type(exc).__name__}}")
    raise RuntimeError(f"hostile: ok={{ok}} denied={{denied}}")
'''


def _digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_hostile_candidate_cannot_fake_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-kernelwright-test-secret")
    run, user_cache = tmp_path / "run", tmp_path / "user-cache"
    config = tmp_path / "kernelwright.toml"
    config.write_text(f'[llm]\ncache_dir = "{user_cache}"\n')
    server = ScriptedServer({"default": answer(GOOD)})  # bound: its port goes into the hostile kernel
    hostile = GOOD.split("def vector_add")[0] + ATTACK.format(
        coordinator=os.getpid(), run=str(run), user_cache=str(user_cache), port=server.port)
    server.script = type(server.script).from_dict({"sequence": [answer(hostile)], "default": answer(GOOD)})
    with server:
        store, run_spec = open_run(run, spec(iterations=2, optimizer=False), False)
        llm = make_llm(run_spec, store, config, {"base_url": server.openai_base_url})
        with JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1)) as pool:
            pool.start()
            results, errors = run_session(run_spec, store, llm, pool, device_info=pool.device_info,
                                          backend=pool.backend)
        roles = [role_of(r.prompt) for r in server.requests]
    assert not errors, errors
    attempts = store.attempts("tiny_add", 0)
    assert [a.kind for a in attempts] == ["runtime_error", "passed"], [(a.kind, a.reason) for a in attempts]
    reason = attempts[0].reason
    assert "hostile: ok=[]" in reason, reason  # it ran, and every write and the connection were denied
    assert "run.sqlite: PermissionError" in reason and "tcp: " in reason, reason
    # generate, reflect on the failure, fix: a request of the candidate's (body "{}") has no prompt
    assert roles == ["generate", "reflect", "fix"], roles
    assert results[0].best["index"] == 1
    # nothing but the coordinator wrote there: no planted bytes in the store, the caches or best/
    for path in _digest(run) | _digest(user_cache):
        assert b"PLANTED-7731" not in Path(path).read_bytes(), path
    assert (user_cache / "llm-cache.sqlite").exists(), "the user's cache was not used: nothing was tried on it"
