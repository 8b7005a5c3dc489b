"""Hostile candidates against the sandbox (issue 28): each tries one attack of the red-team's list
at its first call, in a real pool of two CPU workers, and says on its stdout what it managed
(`ATTACK name: ...`). The test plays the user's side: a $HOME with a secret, a run directory with
a results file (held open, as the run store holds its database), an LLM cache, a TCP server
standing for the local LLM endpoint, the installed judge. Every attack is contained: the
candidate gets a verdict with a reason, the judge goes on, nothing outside the scratch space
changed, nothing is left running."""

import hashlib
import importlib.util
import os
import shutil
import socket
import textwrap
import threading
from pathlib import Path

import pytest

import kernelwright
from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.judge.common import landlock
from kernelwright.judge.common.privdir import private_dir
from kernelwright.judge.common.procs import descendants
from kernelwright.tasks import resolve_task

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(landlock.landlock_abi()[0] is None or landlock.landlock_abi()[0] < 6,
                                 reason="needs Landlock ABI 6 (files, TCP, signals)")]

JUDGE = Path(kernelwright.__file__).resolve().parent / "judge"
SECRET = "kw-sandbox-test-secret-7731"

KERNEL = '''
import os, sys, socket, signal, ctypes, glob
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


def attempt(name, fn):
    try:
        result = fn()
        print(f"ATTACK {name}: ok {str(result)[:200]}", flush=True)
        return True
    except BaseException as exc:
        print(f"ATTACK {name}: denied {type(exc).__name__}: {exc}"[:300], flush=True)
        return False


def ancestors():
    pids, pid = [], os.getppid()
    while pid > 1 and len(pids) < 8:
        pids.append(pid)
        try:
            stat = open(f"/proc/{pid}/stat").read()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    return pids


def write(path, text="planted"):
    with open(path, "a") as f:
        f.write(text)
    return path


_done = []


def vector_add(x, y):
    if not _done:
        _done.append(1)
        ATTACK()
    return RESULT
'''

ATTACKS = {
    # rewrite the installed judge (the source, and a crafted .pyc beside it) and return wrong values
    "patch_judge": ("correctness", "wrong_values", "add(x, -y)", '''
    attempt("patch compare.py", lambda: write({compare!r}, "\\nidentical = lambda *a, **k: True\\n"))
    attempt("plant a .pyc", lambda: (os.makedirs(os.path.dirname({pyc!r}), exist_ok=True), write({pyc!r}, "x")))
'''),
    # read the user's secrets: a file in $HOME, the coordinator's and worker's environ and memory
    "read_secrets": ("passed", "passed", "add(x, y)", '''
    attempt("read $HOME secret", lambda: open({home_secret!r}).read())
    attempt("environ of the coordinator", lambda: open("/proc/{coordinator}/environ", "rb").read()[:100])
    attempt("mem of the coordinator", lambda: open("/proc/{coordinator}/mem", "rb").read(1))
    for pid in ancestors():
        attempt(f"environ of {{pid}}", lambda: open(f"/proc/{{pid}}/environ", "rb").read()[:100])
        attempt(f"mem of {{pid}}", lambda: open(f"/proc/{{pid}}/mem", "rb").read(1))
        attempt(f"fds of {{pid}}", lambda: os.listdir(f"/proc/{{pid}}/fd"))
'''),
    # ptrace the worker, signal the worker and the coordinator
    "ptrace_and_signals": ("passed", "passed", "add(x, y)", '''
    libc = ctypes.CDLL(None, use_errno=True)
    def ptrace():
        if libc.ptrace(16, os.getppid(), None, None) != 0:  # PTRACE_ATTACH
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    attempt("ptrace the worker", ptrace)
    attempt("SIGSTOP the worker", lambda: os.kill(os.getppid(), signal.SIGSTOP))
    attempt("SIGSTOP the coordinator", lambda: os.kill({coordinator}, signal.SIGSTOP))
    attempt("SIGKILL the coordinator", lambda: os.kill({coordinator}, signal.SIGKILL))
'''),
    # leave a daemon (a session of its own, re-parented away), then kill the worker to free it
    "daemon_then_kill_worker": ("passed", "passed", "add(x, y)", '''
    import time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    attempt("SIGKILL the worker", lambda: os.kill(os.getppid(), signal.SIGKILL))
'''),
    # post to the local LLM server (with a stolen key, were there one)
    "network": ("passed", "passed", "add(x, y)", '''
    attempt("TCP to the LLM server", lambda: socket.create_connection(("127.0.0.1", {port}), timeout=2))
    attempt("UDP to the LLM server", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {port})))
'''),
    # fake the run: the run directory's files, the LLM cache; spill into $HOME and the current directory
    "tamper_and_spill": ("passed", "passed", "add(x, y)", '''
    attempt("rewrite the results", lambda: write({results!r}, '{{"attempt": 1, "passed": true, "speedup": 99}}'))
    attempt("plant an LLM answer", lambda: write({cache_entry!r}))
    attempt("write $HOME", lambda: write({home!r} + "/planted"))
    attempt("write the current directory", lambda: write("planted-in-cwd"))
    attempt("write /tmp", lambda: write("/tmp/kw-sandbox-planted"))
    attempt("overwrite a neighbour's source", lambda: write({neighbour!r}, "\\nvector_add = lambda x, y: x + y\\n"))
    for path in glob.glob({private!r} + "/sources/*/*.py"):
        attempt("overwrite a source found", lambda: write(path, "\\nvector_add = lambda x, y: x + y\\n"))
    attempt("list the judge's private directory", lambda: os.listdir({private!r}))
'''),
    # fill the disk through its own scratch (64 MiB files, each under the file size limit)
    "disk_fill": ("call", "resource_limit", "add(x, y)", '''
    import tempfile, time
    block = b"\\0" * (32 << 20)
    for i in range(400):
        with open(os.path.join(tempfile.gettempdir(), f"fill-{{i}}"), "wb") as f:
            f.write(block)
        time.sleep(0.02)
'''),
    # a fork bomb (bounded here: sleeping children), as root not held by RLIMIT_NPROC
    "fork_bomb": ("call", "resource_limit", "add(x, y)", '''
    import time
    for i in range(600):
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
    time.sleep(30)
'''),
    # hold more memory than the sandbox allows (RLIMIT_DATA: half the machine's)
    "memory_hog": ("call", "out_of_memory", "add(x, y)", '''
    hog = bytearray(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)
'''),
}


def _digest(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    base = tmp_path_factory.mktemp("user")
    home, run, cache = base / "home", base / "run", base / "llm-cache"
    for d in (home, run, cache):
        d.mkdir()
    (home / "secret.txt").write_text(SECRET)
    results = run / "results.jsonl"
    results.write_text('{"attempt": 1, "passed": false}\n')
    (cache / "entry.json").write_text("{}")
    # another candidate's source, where the pool keeps submitted ones
    neighbour = private_dir() / "sources" / f"sources-{os.getpid()}-test" / "victim.py"
    neighbour.parent.mkdir(parents=True, exist_ok=True)
    neighbour.write_text("# another candidate\n")
    held = open(results)  # the coordinator holds the run's files open (/proc/<pid>/fd shows them)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    connections: list = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                connections.append(server.accept())
            except OSError:
                continue
    threading.Thread(target=accept, daemon=True).start()
    compare = JUDGE / "worker" / "compare.py"
    values = dict(compare=str(compare), pyc=importlib.util.cache_from_source(str(compare)),
                  home_secret=str(home / "secret.txt"), coordinator=os.getpid(), port=server.getsockname()[1],
                  results=str(results), cache_entry=str(cache / "entry.json"), home=str(home),
                  private=str(private_dir()), neighbour=str(neighbour))
    files = base / "candidates"
    files.mkdir()
    paths = {}
    for name, (_stage, _kind, result, attack) in ATTACKS.items():
        body = textwrap.indent(textwrap.dedent(attack.format(**values)), "    ")
        paths[name] = files / f"{name}.py"
        paths[name].write_text(KERNEL.replace("RESULT", result).replace("ATTACK()", "attack()")
                               + "\n\ndef attack():\n" + body + "\n")
    def user_files() -> dict:
        return _digest(home) | _digest(run) | _digest(cache) | _digest(neighbour.parent)
    before = {"judge": _digest(JUDGE), "user": user_files()}
    cwd = os.getcwd()
    os.chdir(base)
    try:
        task = resolve_task("vector_add")
        options = JudgeOptions(seeds=1, seed=11, perf=False, load_timeout=60, call_timeout=60, case_timeout=30,
                               max_written_bytes=256 << 20)
        with JudgePool("cpu", workers=2, options=options) as pool:
            verdicts = dict(zip(ATTACKS, pool.judge_many([(task, paths[n]) for n in ATTACKS])))
            after_good = pool.judge(task, Path(__file__).parent / "candidates" / "vector_add" / "good.py")
        left = descendants(os.getpid())
    finally:
        os.chdir(cwd)
        stop.set()
        held.close()
    after = {"judge": _digest(JUDGE), "user": user_files()}
    shutil.rmtree(neighbour.parent, ignore_errors=True)
    return dict(verdicts=verdicts, after_good=after_good, before=before, after=after, left=left,
                connections=connections, base=base)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_each_attack_gets_a_verdict_with_a_reason(attacked, name):
    stage, kind, _, _ = ATTACKS[name]
    verdict = attacked["verdicts"][name]
    if name == "fork_bomb" and os.geteuid() != 0 and verdict.kind == "runtime_error":
        # not root: the kernel's RLIMIT_NPROC refuses the fork before the worker's watch sees the
        # processes, and the candidate dies of the exception os.fork raised
        kind = "runtime_error"
        assert "BlockingIOError" in verdict.reason, verdict.reason
    assert (verdict.stage, verdict.kind) == (stage, kind), (verdict.stage, verdict.kind, verdict.reason,
                                                             verdict.log_tail[-2000:])
    assert verdict.sandbox.get("complete"), verdict.sandbox
    assert "ATTACK" in verdict.log_tail or kind in ("resource_limit", "out_of_memory", "runtime_error")
    assert ": ok" not in verdict.log_tail, verdict.log_tail[-2000:]


def test_every_candidate_had_the_layers_of_its_user(attacked):
    """Root and a plain user get different layers for the same protection: as root, namespaces
    directly (RLIMIT_NPROC binds nothing: the worker's watch counts processes); otherwise inside a
    user namespace, with RLIMIT_NPROC. Nothing asked for is missing either way (a non-dumpable
    worker's child once could not write its user namespace's id maps, and lost its netns)."""
    root = os.geteuid() == 0
    for name, verdict in attacked["verdicts"].items():
        layers, missing = verdict.sandbox["layers"], verdict.sandbox["missing"]
        assert any(layer.startswith("netns:") for layer in layers), (name, verdict.sandbox)
        pidns = next(layer for layer in layers if layer.startswith("pidns:"))
        assert pidns == ("pidns:pid+mnt+proc" if root else "pidns:user+pid+mnt+proc"), (name, pidns)
        assert root or "rlimit:nproc" in layers, (name, layers)
        assert not [m for m in missing if not m.startswith("nproc (set, but")], (name, missing)


def test_no_secret_reached_a_candidate(attacked):
    for verdict in attacked["verdicts"].values():
        assert SECRET not in verdict.log_tail and SECRET not in verdict.detail


def test_nothing_outside_the_scratch_space_changed(attacked):
    assert attacked["after"] == attacked["before"]
    assert not (attacked["base"] / "planted-in-cwd").exists()
    assert not os.path.exists("/tmp/kw-sandbox-planted")
    assert not attacked["connections"], "a candidate reached the TCP server"


def test_the_judge_goes_on_and_nothing_is_left_running(attacked):
    assert attacked["after_good"].passed, attacked["after_good"].reason
    assert attacked["left"] == [], f"processes left after the pool closed: {attacked['left']}"


DAEMON = KERNEL.replace("RESULT", "add(x, y)").replace("ATTACK()", "attack()") + '''

def attack():
    import tempfile, time
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            open(os.path.join(tempfile.gettempdir(), "daemon-ready"), "w").close()
            time.sleep(300)
        os._exit(0)
    time.sleep(300)
'''


def test_a_daemon_dies_with_its_worker(tmp_path):
    """The worker dies while it judges (SIGKILLed from outside, as by the OOM killer), after its
    candidate left a daemon in a session of its own: the candidate's PID namespace takes the
    daemon with it, the candidate gets a judge error that says why, and the pool goes on."""
    from kernelwright.judge.common import capabilities, procs

    if not capabilities.probe().pidns:
        pytest.skip("no PID namespace here")
    import signal
    import time

    path = tmp_path / "daemon.py"
    path.write_text(DAEMON)
    task = resolve_task("vector_add")
    options = JudgeOptions(seeds=1, seed=11, perf=False, load_timeout=60, call_timeout=300, case_timeout=300)
    with JudgePool("cpu", workers=1, options=options) as pool:
        pool.start()
        worker = pool._workers[0].process.pid
        future = pool.submit(task, path, candidate_id="daemon")
        deadline = time.monotonic() + 120
        while not list((private_dir() / "scratch").glob(f"w{worker}-candidate-*/daemon-ready")):
            assert time.monotonic() < deadline and not future.done(), "the daemon never started"
            time.sleep(0.1)
        tree = procs.descendants(worker)
        os.kill(worker, signal.SIGKILL)
        verdict = future.result(timeout=60)
        assert verdict.stage == "judge_error" and "worker" in verdict.reason, verdict.reason
        deadline = time.monotonic() + 10
        while [p for p in tree if procs.process_state(p) not in (None, "Z", "X")] and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [p for p in tree if procs.process_state(p) not in (None, "Z", "X")]
        procs.signal_all(left, signal.SIGKILL)
        assert len(tree) >= 4 and not left, f"outlived their worker: {left} of {tree}"
        assert pool.judge(task, Path(__file__).parent / "candidates" / "vector_add" / "good.py").passed


def test_admitted_tasks_keep_the_spares_forked_at_start(tmp_path):
    """A confined child reads only the task files it was forked with: a pool told its tasks before
    its workers start (`admit`, as `judge_many` does) forks a spare candidate process that judges
    the first candidate, where a worker that learns of the task at its first request forks it
    again (the spare it started with is gone while the first candidate still runs)."""
    import time

    from kernelwright.judge.common.procs import children_of, process_state

    task = resolve_task("vector_add")
    slow = tmp_path / "slow.py"
    slow.write_text((Path(__file__).parent / "candidates" / "vector_add" / "good.py").read_text().replace(
        "def vector_add(x, y):\n", "_slept = []\n\n\ndef vector_add(x, y):\n    import time\n"
        "    if not _slept:\n        _slept.append(time.sleep(4))\n"))
    spare_serves = {}
    for admitted in (True, False):
        options = JudgeOptions(seeds=1, seed=11, perf=False, load_timeout=60, call_timeout=60, case_timeout=30)
        with JudgePool("cpu", workers=1, options=options) as pool:
            if admitted:
                pool.admit([task])
            pool.start()
            spares = children_of(pool._workers[0].process.pid)  # the spare candidate process
            future = pool.submit(task, slow)  # submit: judge_many would admit the task itself
            deadline = time.monotonic() + 120
            while not list((private_dir() / "scratch").glob(f"w{pool._workers[0].process.pid}-reference-*")):
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(1.5)  # the reference has started: the candidate sleeps in its first call
            spare_serves[admitted] = bool(spares) and all(process_state(p) not in (None, "Z", "X") for p in spares)
            assert future.result(timeout=300).passed
    assert spare_serves == {True: True, False: False}, spare_serves
