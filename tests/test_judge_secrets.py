"""Secrets stay out of candidates: the judge runs LLM-written code as the user, so the workers (and
every candidate forked from them) get an allow-listed environment, the coordinator is
non-dumpable, and the judge's lock files and Triton caches live in a private directory, with
the reference's cache apart from the candidates'."""

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.common.privdir import PrivateDirError, ensure_private, private_dir
from kernelwright.judge.coordinator.workerenv import worker_environment
from kernelwright.tasks import load_task_file

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-test-secret"
SECRETS = {"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET + "-anthropic", "HF_TOKEN": "hf_test_token",
           "GITHUB_TOKEN": "ghp_test_token", "AWS_SECRET_ACCESS_KEY": "aws-test-secret",
           "KERNELWRIGHT_OPENAI_API_KEY": SECRET + "-kw", "MY_SERVICE_PASSWORD": "hunter2-test"}

KERNEL = '''
import json
import os

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
    return out
'''

SPY = KERNEL + '''

def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


def _ancestors():
    pids, pid = [], os.getppid()
    while pid > 1 and len(pids) < 12:
        pids.append(pid)
        stat = _read(f"/proc/{pid}/stat")
        pid = int(stat.rsplit(")", 1)[1].split()[1]) if ")" in stat else 0
    return pids


def vector_add(x, y):
    seen = {"os.environ": dict(os.environ), "/proc/self/environ": _read("/proc/self/environ"),
            "ancestors": _ancestors()}
    for pid in seen["ancestors"]:
        seen[f"/proc/{pid}/environ"] = _read(f"/proc/{pid}/environ")
    with open(OUT, "w") as f:
        json.dump(seen, f)
    return add(x, y)
'''


def test_worker_environment_is_an_allow_list():
    source = dict(SECRETS, PATH="/usr/bin", HOME="/home/u", LC_ALL="C", TRITON_INTERPRET="1",
                  KERNELWRIGHT_TUNING_MS="3,12", CUDA_VISIBLE_DEVICES="0", PYTORCH_CUDA_ALLOC_CONF="x",
                  TRITON_CACHE_DIR="/shared/cache", SSH_AUTH_SOCK="/tmp/agent", DATABASE_URL="postgres://u:p@h",
                  KERNELWRIGHT_BASE_URL="https://user:pw@llm.example", KERNELWRIGHT_MODEL="m",
                  KERNELWRIGHT_CONFIG="/home/u/kernelwright.toml", TRITON_REDIS_URL="redis://:pw@h",
                  KERNELWRIGHT_WORKER_ENV="DATABASE_URL,MY_SERVICE_PASSWORD")
    env = worker_environment(source)
    assert not set(SECRETS) & set(env), env
    for name in ("KERNELWRIGHT_BASE_URL", "KERNELWRIGHT_MODEL", "KERNELWRIGHT_CONFIG", "TRITON_REDIS_URL"):
        assert name not in env  # the LLM layer's settings and addresses: not by prefix
    assert "SSH_AUTH_SOCK" not in env and "TRITON_CACHE_DIR" not in env  # the judge sets caches itself
    assert env["DATABASE_URL"] == "postgres://u:p@h"  # named explicitly: passed
    assert "MY_SERVICE_PASSWORD" not in env  # a credential's name is never passed, even when named
    for name in ("PATH", "HOME", "LC_ALL", "TRITON_INTERPRET", "KERNELWRIGHT_TUNING_MS", "CUDA_VISIBLE_DEVICES",
                 "PYTORCH_CUDA_ALLOC_CONF"):
        assert env[name] == source[name]


def test_a_candidate_finds_no_secret_in_any_environment(tmp_path):
    """The coordinator is exec'd with the secrets (as an agent would be); the candidate reads its
    own environment, /proc/self/environ and every ancestor's /proc/<pid>/environ."""
    leak = tmp_path / "leak.json"
    candidate = tmp_path / "spy.py"
    candidate.write_text(f"OUT = {str(leak)!r}\n" + SPY)
    coordinator = textwrap.dedent(f"""
        import ctypes, json, sys
        from kernelwright.judge import JudgeOptions, JudgePool
        from kernelwright.tasks import resolve_task
        # unconfined (a machine without Landlock): the environment allow-list alone keeps the
        # secrets out; confined, the spy could not even write its findings (test_sandbox_attacks)
        with JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, perf=False, sandbox="off")) as pool:
            verdict = pool.submit(resolve_task("vector_add"), open({str(candidate)!r}).read()).result()
            pid = pool._workers[0].process.pid
        dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
        print(json.dumps({{"stage": verdict.stage, "reason": verdict.reason, "dumpable": dumpable, "worker": pid}}))
    """)
    env = dict(os.environ, **SECRETS, PYTHONPATH=str(ROOT / "src"), KERNELWRIGHT_JUDGE_DIR=str(tmp_path / "judge"))
    done = subprocess.run([sys.executable, "-c", coordinator], env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["stage"] == "passed", result["reason"]
    assert result["dumpable"] == 0  # the coordinator's /proc entries are closed to same-user processes
    seen = json.loads(leak.read_text())
    coordinator_entry = None
    for pid in seen["ancestors"]:
        if pid != result["worker"] and coordinator_entry is None and pid != os.getpid():
            coordinator_entry = f"/proc/{pid}/environ"
    assert result["worker"] in seen["ancestors"]
    for where, text in seen.items():
        if where == coordinator_entry and os.getuid() == 0:
            continue  # root reads every process's environ; PR_SET_DUMPABLE stops only other users' processes
        for value in SECRETS.values():
            assert value not in json.dumps(text), f"{value!r} leaked through {where}"
    if os.getuid() != 0:
        assert seen[coordinator_entry].startswith("unreadable"), seen[coordinator_entry][:200]


TASK = '''
import json
import os

from kernelwright.tasks import Case
from kernelwright.tasks.inputs import randn

name = "cache_probe"
instruction = "Return x + y."
entry_point = "vector_add(x, y)"


def make_inputs(case, gen):
    return randn(gen, case.shape, case.dtype), randn(gen, case.shape, case.dtype)


def reference(x, y):
    import triton

    with open(RECORD, "w") as f:
        json.dump({"env": os.environ.get("TRITON_CACHE_DIR"), "knob": triton.knobs.cache.dir}, f)
    return x + y


visible_cases = [Case("float32", shape=(1000,))]
hidden_cases = [Case("float32", shape=(77,))]
perf_cases = [Case("float32", shape=(4096,))]
'''

PLANTER = KERNEL + '''

def vector_add(x, y):
    import triton

    mine = os.environ.get("TRITON_CACHE_DIR")
    planted = []
    # everything its environment points at: its own cache, the judge's directory, the lock files
    for folder in (mine, os.environ.get("KERNELWRIGHT_JUDGE_DIR")):
        if folder and os.path.isdir(folder):
            path = os.path.join(folder, "planted-kernel.json")
            with open(path, "w") as f:
                f.write("{}")
            planted.append(path)
            for name in os.listdir(folder):
                if name.endswith((".lock", ".turnstile")):
                    with open(os.path.join(folder, name), "a") as f:
                        f.write("garbage")
    with open(OUT, "w") as f:
        json.dump({"env": mine, "knob": triton.knobs.cache.dir, "planted": planted}, f)
    return add(x, y)
'''


def test_the_reference_compiles_into_a_cache_no_candidate_is_pointed_at(tmp_path, monkeypatch):
    judge_dir = tmp_path / "judge"
    monkeypatch.setenv("KERNELWRIGHT_JUDGE_DIR", str(judge_dir))
    ref_record, cand_record = tmp_path / "ref.json", tmp_path / "cand.json"
    task_file = tmp_path / "cache_probe.py"
    task_file.write_text(f"RECORD = {str(ref_record)!r}\n" + TASK)
    task = load_task_file(task_file)
    planter = f"OUT = {str(cand_record)!r}\n" + PLANTER
    # unconfined, as on a machine without Landlock: the caches' separation is what protects the
    # reference then (confined, the candidate cannot write the judge's directory at all, and this
    # task's reference could not write its record)
    with JudgePool("cpu", workers=1, options=JudgeOptions(seeds=1, perf=False, sandbox="off")) as pool:
        first = pool.submit(task, planter).result(timeout=120)
        again = pool.submit(task, planter).result(timeout=120)  # the same reference process, after the planting
        ref, cand = json.loads(ref_record.read_text()), json.loads(cand_record.read_text())
        ref_files = os.listdir(ref["env"])
        modes = {p: stat.S_IMODE(os.stat(p).st_mode) for p in (judge_dir, judge_dir / "triton", ref["env"], cand["env"])}
    assert first.passed and again.passed, (first.reason, again.reason)
    assert ref["env"] == ref["knob"] and cand["env"] == cand["knob"]  # Triton's knob follows the variable
    ref_dir, cand_dir = Path(ref["env"]), Path(cand["env"])
    assert ref_dir != cand_dir and ref_dir not in cand_dir.parents and cand_dir not in ref_dir.parents
    assert (judge_dir / "triton") in ref_dir.parents and (judge_dir / "triton") in cand_dir.parents
    assert "planted-kernel.json" not in ref_files
    assert cand["planted"], "the candidate planted nothing: the test proves nothing"
    assert all(mode == 0o700 for mode in modes.values()), modes
    assert not ref_dir.exists() and not cand_dir.exists()  # removed with the pool


def test_private_directory_is_made_safe(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_JUDGE_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    made = private_dir()
    assert made == tmp_path / f"kernelwright-{os.getuid()}" and stat.S_IMODE(made.stat().st_mode) == 0o700
    os.chmod(made, 0o777)
    assert stat.S_IMODE(ensure_private(made).stat().st_mode) == 0o700  # ours, but open to others: repaired
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(PrivateDirError):
        ensure_private(link)
    from kernelwright.judge.common import gpulock

    assert os.path.dirname(gpulock.lock_base()) == str(made)  # the GPU lock files live there, not in /tmp


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a directory owned by another user")
def test_a_directory_of_another_user_is_refused_and_avoided(tmp_path, monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_JUDGE_DIR", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    squatted = tmp_path / f"kernelwright-{os.getuid()}"
    squatted.mkdir(mode=0o777)
    os.chown(squatted, 65534, 65534)
    with pytest.raises(PrivateDirError):
        ensure_private(squatted)
    chosen = private_dir()  # another user took the name in /tmp: one in our home instead
    assert chosen == tmp_path / "home" / ".cache" / "kernelwright" / f"judge-{os.getuid()}"
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o700


def test_what_dead_processes_left_is_swept(tmp_path):
    from kernelwright.judge.coordinator.pool import sweep_stale

    dead = 2**22 + 12345  # above the default pid_max: no such process
    for path in (tmp_path / "triton" / f"w{dead}-reference-x", tmp_path / "sources" / f"sources-{dead}-y",
                 tmp_path / "triton" / f"w{os.getpid()}-candidate-z", tmp_path / "triton" / "other"):
        path.mkdir(parents=True)
    sweep_stale(tmp_path)
    assert sorted(os.listdir(tmp_path / "triton")) == ["other", f"w{os.getpid()}-candidate-z"]
    assert os.listdir(tmp_path / "sources") == []
