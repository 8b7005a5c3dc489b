"""judge/common/landlock.py, isolation.py, capabilities.py and judge/sandbox/confinement.py: each attack a candidate child could try, tried in a forked child after
`landlock.apply` (the result comes back through a pipe as JSON), next to what must keep working.

Linux with Landlock (ABI >= 6 for the signal and abstract-socket tests) or skipped; one test
simulates a kernel without Landlock."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import socket
import sys
import traceback

import pytest

from kernelwright.judge.common import capabilities, isolation, landlock, procs
from kernelwright.judge.sandbox import confinement

ABI, WHY = landlock.landlock_abi()
needs_landlock = pytest.mark.skipif(ABI is None, reason=f"no Landlock: {WHY}")
needs_abi6 = pytest.mark.skipif(ABI is None or ABI < 6, reason="Landlock ABI < 6: no scoping")
needs_abi4 = pytest.mark.skipif(ABI is None or ABI < 4, reason="Landlock ABI < 4: no TCP rules")


def read_text(path: str) -> str:
    with open(path) as f:
        return f.read()


def attempt(fn) -> str:
    """'ok', or the exception's name and errno name (e.g. 'PermissionError EACCES')."""
    try:
        fn()
        return "ok"
    except OSError as e:
        return f"{type(e).__name__} {errno.errorcode.get(e.errno, e.errno)}"
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def in_confined_child(policy_or_none, body, before=None, timeout=120.0) -> dict:
    """Fork; in the child run `before()` (unconfined setup), `landlock.apply(policy)` unless None,
    then `body(applied)` -> dict; return that dict (with 'applied') to the parent."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(r)
        procs.make_dumpable()  # as a candidate child is (pytest may be non-dumpable: a pool's coordinator)
        out: dict
        try:
            if before:
                before()
            applied = landlock.apply(policy_or_none) if policy_or_none is not None else None
            out = body(applied) or {}
            out["applied"] = applied.as_dict() if applied else None
        except BaseException:  # noqa: BLE001
            out = {"crash": traceback.format_exc()}
        data = json.dumps(out).encode()
        while data:
            data = data[os.write(w, data):]
        os._exit(0)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert chunks, f"child sent nothing (wait status {status})"
    result = json.loads(b"".join(chunks))
    assert "crash" not in result, result.get("crash")
    return result


@pytest.fixture
def dirs(tmp_path):
    """scratch (writable), src (the candidate's own source: readable), home (stands for $HOME,
    with a secret: unreachable), elsewhere (another candidate / the run directory)."""
    d = {name: tmp_path / name for name in ("scratch", "src", "home", "elsewhere")}
    for p in d.values():
        p.mkdir()
    (d["src"] / "cand.py").write_text("X = 1\n")
    (d["home"] / ".netrc").write_text("machine api password hunter2\n")
    (d["elsewhere"] / "other.py").write_text("secret = 2\n")
    return {k: str(v) for k, v in d.items()}


def small_policy(dirs, **kw) -> landlock.Policy:
    """Enough for a forked Python that has already imported what it needs."""
    return landlock.Policy(exec=confinement.python_paths() + list(confinement.SYSTEM_EXEC), read=[dirs["src"], "/proc/self"],
                          write=[dirs["scratch"]], devices=["/dev/null"], **kw)


@needs_landlock
def test_files_scratch_writable_rest_denied(dirs):
    def body(applied):
        scratch, home, elsewhere = dirs["scratch"], dirs["home"], dirs["elsewhere"]

        def write(path):
            with open(path, "w") as f:
                f.write("x")

        def read(path):
            with open(path) as f:
                f.read()

        def mk_and_rename():
            os.makedirs(os.path.join(scratch, "a", "b"))
            write(os.path.join(scratch, "a", "b", "t"))
            os.replace(os.path.join(scratch, "a", "b", "t"), os.path.join(scratch, "moved"))
            os.truncate(os.path.join(scratch, "moved"), 0)
            os.unlink(os.path.join(scratch, "moved"))

        return {"write_scratch": attempt(lambda: write(os.path.join(scratch, "ok.txt"))),
                "scratch_tree": attempt(mk_and_rename),
                "write_elsewhere": attempt(lambda: write(os.path.join(elsewhere, "evil.py"))),
                "overwrite_other_source": attempt(lambda: write(os.path.join(elsewhere, "other.py"))),
                "write_tmp": attempt(lambda: write(f"/tmp/kw-confine-{os.getpid()}")),
                "read_home": attempt(lambda: read(os.path.join(home, ".netrc"))),
                "list_home": attempt(lambda: os.listdir(home)),
                "read_other_source": attempt(lambda: read(os.path.join(elsewhere, "other.py"))),
                "read_own_source": attempt(lambda: read(os.path.join(dirs["src"], "cand.py"))),
                "write_own_source": attempt(lambda: write(os.path.join(dirs["src"], "cand.py"))),
                "read_stdlib": attempt(lambda: read(os.__file__)),
                "write_stdlib": attempt(lambda: write(os.__file__ + ".evil")),
                "read_etc_shadow": attempt(lambda: read("/etc/shadow")),
                "rename_out": attempt(lambda: os.rename(os.path.join(dirs["src"], "cand.py"),
                                                         os.path.join(scratch, "stolen.py"))),
                "symlink_escape": attempt(lambda: (os.symlink(os.path.join(home, ".netrc"),
                                                              os.path.join(scratch, "l")),
                                                   read(os.path.join(scratch, "l")))),
                "hardlink_in": attempt(lambda: os.link(os.path.join(elsewhere, "other.py"),
                                                       os.path.join(scratch, "h")))}

    res = in_confined_child(small_policy(dirs), body)
    assert res["applied"]["fs"], res["applied"]
    assert res["write_scratch"] == res["scratch_tree"] == res["read_own_source"] == res["read_stdlib"] == "ok"
    for attack in ("write_elsewhere", "overwrite_other_source", "write_tmp", "read_home", "list_home",
                   "read_other_source", "write_own_source", "write_stdlib", "read_etc_shadow"):
        assert res[attack].startswith("PermissionError"), (attack, res[attack])
    for attack in ("rename_out", "symlink_escape", "hardlink_in"):  # EXDEV / EACCES
        assert res[attack] != "ok", (attack, res[attack])
    assert not os.path.exists(os.path.join(dirs["elsewhere"], "evil.py"))


@needs_abi4
def test_tcp_connect_and_bind_denied_parent_can_connect():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    try:
        def body(applied):
            def connect():
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    pass

            def bind():
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    s.listen(1)

            return {"connect": attempt(connect), "bind": attempt(bind)}

        res = in_confined_child(landlock.Policy(exec=confinement.python_paths()), body)
        assert res["applied"]["tcp"]
        assert res["connect"].startswith("PermissionError"), res
        assert res["bind"].startswith("PermissionError"), res
        with socket.create_connection(("127.0.0.1", port), timeout=2):  # the parent still can
            pass
    finally:
        server.close()


@needs_abi4
def test_tcp_on_the_profilers_ports_alone():
    """A full profile's process (profile_main --tcp-ports) may bind and connect on the profiler's
    ports, and on no other."""
    with socket.socket() as probe:  # two free ports: one allowed, one not
        probe.bind(("127.0.0.1", 0))
        allowed = probe.getsockname()[1]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    other = server.getsockname()[1]
    try:
        def body(applied):
            def bind_allowed():
                with socket.socket() as s:
                    s.bind(("127.0.0.1", allowed))
                    s.listen(1)
                    with socket.create_connection(("127.0.0.1", allowed), timeout=2):
                        pass

            def connect_other():
                with socket.create_connection(("127.0.0.1", other), timeout=2):
                    pass

            def bind_other():
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))

            return {"allowed": attempt(bind_allowed), "connect_other": attempt(connect_other),
                    "bind_other": attempt(bind_other)}

        policy = landlock.Policy(exec=confinement.python_paths(), tcp_connect_ports=(allowed,),
                                 tcp_bind_ports=(allowed,))
        res = in_confined_child(policy, body)
        assert res["applied"]["tcp"]
        assert res["allowed"] == "ok", res
        assert res["connect_other"].startswith("PermissionError"), res
        assert res["bind_other"].startswith("PermissionError"), res
    finally:
        server.close()


@needs_abi6
def test_signals_and_abstract_sockets_to_the_outside_denied():
    parent = os.getpid()
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0kw-confine-{parent}"
    abstract.bind(name)
    abstract.listen(1)
    try:
        def body(applied):
            def ptrace_attach():
                libc = ctypes.CDLL(None, use_errno=True)
                if libc.ptrace(16, parent, None, None) != 0:  # PTRACE_ATTACH
                    e = ctypes.get_errno()
                    raise OSError(e, os.strerror(e))
                libc.ptrace(17, parent, None, None)  # PTRACE_DETACH, should we ever get here

            def abstract_connect():
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(name)

            own = os.fork()  # a process inside the domain stays reachable
            if own == 0:
                signal.pause()
                os._exit(0)
            inside = attempt(lambda: os.kill(own, signal.SIGKILL))
            os.waitpid(own, 0)
            return {"kill0": attempt(lambda: os.kill(parent, 0)),
                    "sigstop": attempt(lambda: os.kill(parent, signal.SIGSTOP)),
                    "sigterm_group": attempt(lambda: os.killpg(os.getpgid(parent), signal.SIGTERM)),
                    "ptrace": attempt(ptrace_attach),
                    "abstract_connect": attempt(abstract_connect),
                    "kill_own_child": inside}

        # own session first, as judge/child.py does (else killpg would reach the child itself)
        res = in_confined_child(landlock.Policy(exec=confinement.python_paths()), body, before=os.setsid)
        assert res["applied"]["scope_signal"] and res["applied"]["scope_abstract_unix"]
        for attack in ("kill0", "sigstop", "sigterm_group", "ptrace", "abstract_connect"):
            assert res[attack].startswith("PermissionError"), (attack, res[attack])
        assert res["kill_own_child"] == "ok"
    finally:
        abstract.close()


@needs_landlock
def test_parent_proc_entries_denied_own_allowed(dirs):
    """Allowing only /proc/self (resolved at apply time: the child's own /proc/<pid>) and
    /proc/thread-self hides the worker's environ, mem, fd, cmdline; the child's own stay."""
    parent = os.getpid()

    def body(applied):
        def read(p):
            with open(p, "rb") as f:
                f.read(1)

        return {"environ": attempt(lambda: read(f"/proc/{parent}/environ")),
                "mem": attempt(lambda: read(f"/proc/{parent}/mem")),
                "cmdline": attempt(lambda: read(f"/proc/{parent}/cmdline")),
                "fd": attempt(lambda: os.listdir(f"/proc/{parent}/fd")),
                "list_proc": attempt(lambda: os.listdir("/proc")),
                "own_environ": attempt(lambda: read("/proc/self/environ")),
                "own_status": attempt(lambda: read(f"/proc/{os.getpid()}/status")),
                "own_maps": attempt(lambda: read("/proc/self/maps")),
                "own_fds": attempt(lambda: os.listdir("/proc/self/fd"))}

    res = in_confined_child(small_policy(dirs), body)
    for attack in ("environ", "mem", "cmdline", "fd", "list_proc"):
        assert res[attack].startswith("PermissionError"), (attack, res[attack])
    for own in ("own_environ", "own_status", "own_maps", "own_fds"):
        assert res[own] == "ok", (own, res[own])


@needs_landlock
def test_pid_namespace_private_proc_hides_the_worker(dirs):
    """Where a PID namespace and a private /proc can be created: the candidate is PID 2, sees no
    other process but its namespace's init, and may be given all of /proc."""
    caps = capabilities.probe()
    if not caps.private_proc:
        pytest.skip(f"no private /proc here: {caps.notes}")
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        procs.make_dumpable()  # as a candidate child is
        try:
            kind, why = isolation.enter_pid_namespace(mount_proc=True)  # the waiter never returns
            pol = landlock.Policy(exec=confinement.python_paths(), read=["/proc"], write=[dirs["scratch"]])
            applied = landlock.apply(pol)
            out = {"kind": kind, "why": why, "pid": os.getpid(), "fs": applied.fs,
                   "procs": sorted(e for e in os.listdir("/proc") if e.isdigit()),
                   "parent_environ": attempt(lambda: read_text(f"/proc/{parent}/environ")),
                   "kill_parent": attempt(lambda: os.kill(parent, 0)),
                   "own_environ": attempt(lambda: read_text("/proc/self/environ"))}
        except BaseException:  # noqa: BLE001
            out = {"crash": traceback.format_exc()}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    res = json.loads(data)
    assert "crash" not in res, res["crash"]
    assert res["kind"].endswith("+proc") and res["pid"] == 2 and res["fs"]
    assert res["procs"] == ["1", "2"], res["procs"]
    assert res["parent_environ"].startswith("FileNotFoundError"), res
    assert res["kill_parent"] != "ok" and res["own_environ"] == "ok"
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _fork_into_pid_namespace() -> tuple[int, int, int]:
    """(pid, r, w): fork over a pipe; the child (pid 0) goes on in a PID namespace of its own, as
    its PID 2, with the pipe's read end closed. Skips where there are no PID namespaces."""
    caps = capabilities.probe()
    if not caps.pidns:
        pytest.skip(f"no PID namespace: {caps.notes}")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        isolation.enter_pid_namespace(mount_proc=False)
    return pid, r, w


def test_pid_namespace_kills_what_outlives_its_process():
    pid, r, w = _fork_into_pid_namespace()
    if pid == 0:
        stray = os.fork()
        if stray == 0:  # a daemon that leaves its group and session, then sleeps
            os.setsid()
            # its pid as the outer namespace sees it (this /proc is still the outer one)
            with open("/proc/self/status") as f:
                nspid = next(ln for ln in f if ln.startswith("NSpid:")).split()
            os.write(w, nspid[1].encode())
            os.close(w)
            signal.pause()
            os._exit(0)
        os.close(w)
        import time

        time.sleep(0.2)
        os._exit(0)  # PID 2 exits, then its init: the kernel kills the rest of the namespace
    os.close(w)
    outer = int(os.read(r, 100))
    os.close(r)
    os.waitpid(pid, 0)
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(outer, 0)
            with open(f"/proc/{outer}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.05)
    else:
        os.kill(outer, signal.SIGKILL)
        pytest.fail("a process left in the PID namespace outlived the process that started it")



def _outer_pid() -> int:
    """This process's pid as the outer PID namespace sees it (with the outer /proc mounted)."""
    with open("/proc/self/status") as f:
        return int(next(ln for ln in f if ln.startswith("NSpid:")).split()[1])


def _gone(pid: int, within: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(") ", 1)[1].startswith(("Z", "X")):
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_a_daemon_dies_with_its_worker_through_the_pid_namespace():
    """The worker itself dies mid-verdict (its waiter is SIGKILLed, as by the OOM killer): the
    candidate and a daemon it left in a session of its own die with it."""
    waiter, r, w = _fork_into_pid_namespace()
    if waiter == 0:
        if os.fork() == 0:  # the daemon
            os.setsid()
            os.write(w, f"{_outer_pid()}\n".encode())
            signal.pause()
            os._exit(0)
        os.write(w, f"{_outer_pid()}\n".encode())
        signal.pause()  # the candidate, busy for ever
        os._exit(0)
    os.close(w)
    pids = []
    with os.fdopen(r) as f:
        while len(pids) < 2:
            pids.append(int(f.readline()))
    os.kill(waiter, signal.SIGKILL)
    os.waitpid(waiter, 0)
    left = [p for p in pids if not _gone(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"outlived their worker's child: {left}"


@pytest.mark.parametrize("how, expect", [("exit", ("exit", 3)), ("abort", ("signal", signal.SIGABRT)),
                                         ("forwarded", ("exit", 5))])
def test_the_waiter_ends_as_the_candidate_did(how, expect):
    """The worker sees the candidate's own end (its code, its signal), and the signals it sends
    (the stack dump's) reach the candidate through the waiter and the namespace's init."""
    waiter, r, w = _fork_into_pid_namespace()
    if waiter == 0:
        signal.signal(signal.SIGUSR2, lambda *_: os._exit(5))
        os.write(w, b"ready")
        if how == "exit":
            os._exit(3)
        if how == "abort":
            import faulthandler
            import resource

            faulthandler.disable()  # pytest's: no stack printed for an abort that is the test
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            os.abort()
        signal.pause()
        os._exit(0)
    os.close(w)
    assert os.read(r, 5) == b"ready"
    os.close(r)
    if how == "forwarded":
        import time

        time.sleep(0.2)  # the waiter's handler is set before the inner process runs; margin for init's
        os.kill(waiter, signal.SIGUSR2)
    _, status = os.waitpid(waiter, 0)
    got = ("signal", os.WTERMSIG(status)) if os.WIFSIGNALED(status) else ("exit", os.WEXITSTATUS(status))
    assert got == expect

def test_empty_netns_blocks_udp_and_tcp():
    caps = capabilities.probe()
    if not caps.netns:
        pytest.skip(f"no network namespace: {caps.notes}")
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        def body(applied):
            def send_udp():
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                    s.sendto(b"leak", udp.getsockname())

            def tcp():
                with socket.create_connection(server.getsockname(), timeout=2):
                    pass

            return {"netns": applied.netns, "udp": attempt(send_udp), "tcp": attempt(tcp)}

        res = in_confined_child(landlock.Policy(exec=confinement.python_paths(), netns=True, allow_tcp=True), body)
        assert res["netns"] in ("net", "user+net")
        assert res["udp"] != "ok" and res["tcp"] != "ok", res
        udp.settimeout(0.2)
        with pytest.raises(socket.timeout):
            udp.recv(10)
    finally:
        udp.close()
        server.close()


def test_rlimit_file_size(dirs):
    def before():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def body(applied):
        def big():
            with open(os.path.join(dirs["scratch"], "big"), "wb") as f:
                f.write(b"x" * 200_000)

        return {"rlimits": applied.rlimits, "big": attempt(big)}

    pol = landlock.Policy(write=[dirs["scratch"]], exec=confinement.python_paths(), fsize=100_000)
    res = in_confined_child(pol, body, before=before)
    assert res["rlimits"]["fsize"] == 100_000
    assert "EFBIG" in res["big"], res


def test_landlock_unavailable_reports_without_raising(monkeypatch, dirs):
    """A kernel without Landlock (simulated: every raw syscall answers ENOSYS): apply reports the
    missing layer and raises nothing; --sandbox strict exits 2, auto warns."""
    monkeypatch.setattr(landlock, "_syscall", lambda nr, *a: (-1, errno.ENOSYS))
    assert landlock.landlock_abi() == (None, "not in this kernel (ENOSYS)")

    def body(applied):
        with open(os.path.join(dirs["home"], ".netrc")) as f:  # unconfined: it can read
            f.read()
        return {"summary": applied.summary(), "layers": applied.layers}

    res = in_confined_child(small_policy(dirs), body)
    a = res["applied"]
    assert not a["fs"] and not a["tcp"] and not a["scope_signal"] and a["landlock_abi"] is None
    assert any(m.startswith("landlock (not in this kernel") for m in a["missing"])
    assert res["summary"].startswith("Landlock unavailable")
    caps = capabilities.Capabilities(landlock_abi=None, landlock_error="not in this kernel (ENOSYS)")
    assert capabilities.check_level("strict", caps)[0] == 2
    code, warning = capabilities.check_level("auto", caps)
    assert code is None and "unconfined" in warning
    assert capabilities.check_level("off", caps) == (None, None)
    caps.landlock_abi = 7
    assert capabilities.check_level("strict", caps) == (None, None)


def test_probe_summary_never_raises():
    caps = capabilities.probe()
    line = caps.summary()
    assert ("Landlock ABI" in line) or ("no Landlock" in line)
    json.dumps(caps.as_dict())


@needs_landlock
@pytest.mark.slow
def test_torch_and_triton_interpreter_run_confined(dirs):
    """`import torch`, `import triton` and a Triton kernel under TRITON_INTERPRET=1 after the
    full allow-list of torch_policy (nothing imported before the confinement: the worst case)."""
    def before():
        confinement.use_scratch(dirs["scratch"])
        os.environ["TRITON_INTERPRET"] = "1"

    def body(applied):
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def add_one(x, out, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out + i, tl.load(x + i, mask=i < n) + 1.0, mask=i < n)

        x = torch.arange(100, dtype=torch.float32)
        out = torch.empty_like(x)
        add_one[(2,)](x, out, 100, BLOCK=64)
        secret = attempt(lambda: read_text(os.path.join(dirs["home"], ".netrc")))
        return {"ok": bool(torch.equal(out, x + 1)), "secret": secret,
                "torch": "torch" in sys.modules and torch.__version__}

    res = in_confined_child(confinement.torch_policy(dirs["scratch"], sources=[dirs["src"]]), body, before=before)
    assert res["applied"]["fs"] and res["ok"], res
    assert res["secret"].startswith("PermissionError")
