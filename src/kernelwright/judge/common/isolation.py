"""The layers Landlock lacks, for a freshly forked judge child: an empty network namespace (no
UDP or raw traffic either), a PID namespace with its own /proc (nothing it starts outlives it),
and rlimits. Standard library + ctypes only; each returns what took effect or why not."""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # not Linux / no libc: every layer reports "unavailable"
    _libc = None

_PR_SET_PDEATHSIG = 1

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8


def _unshare(flags: int) -> int:
    """0 or the errno."""
    if _libc is None:
        return errno.ENOSYS
    return 0 if _libc.unshare(ctypes.c_int(flags)) == 0 else ctypes.get_errno()


def _mount(source: str, target: str, fstype: str | None, flags: int) -> int:
    if _libc is None:
        return errno.ENOSYS
    ret = _libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None,
                      ctypes.c_ulong(flags), None)
    return 0 if ret == 0 else ctypes.get_errno()


def _write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_empty_netns() -> tuple[str | None, str | None]:
    """Move the calling process into a new network namespace with only a loopback that is down:
    no TCP, UDP or raw traffic anywhere (pathname unix sockets are files: Landlock's business).
    As root: CLONE_NEWNET; otherwise CLONE_NEWUSER|CLONE_NEWNET with this uid/gid mapped to
    themselves (needs a single-threaded caller). Returns (kind, None) or (None, why)."""
    if os.geteuid() == 0:
        err = _unshare(CLONE_NEWNET)
        if err == 0:
            return "net", None
    uid, gid = os.geteuid(), os.getegid()
    err = _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    if err:
        return None, f"unshare: {errno.errorcode.get(err, err)}"
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as e:
        return "user+net", f"id maps not written ({e.strerror}): files show as nobody"
    return "user+net", None


_RLIMITS = {"nproc": "RLIMIT_NPROC", "fsize": "RLIMIT_FSIZE", "data": "RLIMIT_DATA",
            "address_space": "RLIMIT_AS", "nofile": "RLIMIT_NOFILE", "core": "RLIMIT_CORE"}


def set_rlimits(**limits: int | None) -> tuple[dict, list]:
    """Lower soft and hard limits (never raise them). ({name: value set}, [what failed, why])."""
    done, failed = {}, []
    for name, value in limits.items():
        if value is None:
            continue
        res = getattr(resource, _RLIMITS[name], None)
        if res is None:
            failed.append(f"{name} (no {_RLIMITS[name]} here)")
            continue
        try:
            _soft, hard = resource.getrlimit(res)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (value, value))
            done[name] = value
        except (ValueError, OSError) as e:
            failed.append(f"{name} ({e})")
    if "nproc" in done and os.geteuid() == 0:
        failed.append("nproc (set, but the kernel does not enforce RLIMIT_NPROC for root)")
    return done, failed


def enter_pid_namespace(mount_proc: bool = True) -> tuple[str | None, str | None]:
    """Make the rest of this child run as PID 1 of a new PID namespace, with (mount_proc) a
    private /proc in a private mount namespace that shows only that namespace's processes: no
    /proc/<worker pid>/environ to read. Forks once: the calling process becomes a waiter that
    never returns (it exits with the inner process's status, or is killed with it; it stays
    outside the Landlock domain the inner one enters, so the candidate cannot signal it); the
    inner process returns. When the inner process (PID 1) exits, the kernel kills every process
    left in its namespace: nothing the candidate started outlives it.
    Call before `apply` (a Landlock domain forbids mounting). Returns, in the inner process,
    (kind, None) with kind "pid+mnt+proc" / "pid+mnt" / "user+pid+mnt+proc", or (None, why) in the
    calling process if nothing could be created (then no fork happened)."""
    flags = CLONE_NEWPID | (CLONE_NEWNS if mount_proc else 0)
    prefix = ""
    err = _unshare(flags) if os.geteuid() == 0 else errno.EPERM
    if err:
        uid, gid = os.geteuid(), os.getegid()
        err = _unshare(flags | CLONE_NEWUSER)
        if err:
            return None, f"unshare: {errno.errorcode.get(err, err)}"
        prefix = "user+"
        try:
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError:
            pass
    pid = os.fork()
    if pid:  # the waiter: outside the new namespace, forwards the status
        _wait_forward(pid)
    # PID 1 of the new namespace
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    kind = prefix + "pid"
    if mount_proc:
        kind += "+mnt"
        err = _mount("none", "/", None, _MS_REC | _MS_PRIVATE)
        if err == 0:
            err = _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        if err == 0:
            kind += "+proc"
        else:
            return kind, f"private /proc not mounted ({errno.errorcode.get(err, err)})"
    return kind, None


def _wait_forward(pid: int):
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        try:
            signal.signal(sig, lambda s, _f: os.kill(pid, s))
        except (OSError, ValueError):
            pass
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)
