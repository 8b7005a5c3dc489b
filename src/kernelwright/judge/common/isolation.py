"""The layers Landlock lacks, for a freshly forked judge child: an empty network namespace (no
UDP or raw traffic either), a PID namespace with its own /proc (nothing it starts outlives it),
and rlimits. Standard library + ctypes only; each returns what took effect or why not."""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal

from .procs import close_fds_except, die_with_parent

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # not Linux / no libc: every layer reports "unavailable"
    _libc = None

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4

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


def write_id_maps(uid: int, gid: int) -> str | None:
    """Right after unshare(CLONE_NEWUSER): map `uid`/`gid` (the caller's ids outside) to
    themselves, so its files keep their owner and it may create further namespaces. None, or why
    not. A non-dumpable process's /proc/self files belong to root, so a non-root one (the worker
    makes itself non-dumpable, and its forked children inherit that) could not write its own maps:
    it is made dumpable for the three writes and put back. Candidates cannot use that moment: a
    Landlock domain forbids ptrace of (and /proc/<pid>/mem on) anything outside it."""
    was = _libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) if _libc is not None else 1
    if was == 0:
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as e:
        return f"id maps not written ({e.strerror})"
    finally:
        if was == 0:
            _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    return None


def enter_empty_netns() -> tuple[str | None, str | None]:
    """Move the calling process into a new network namespace with only a loopback that is down:
    no TCP, UDP or raw traffic anywhere (pathname unix sockets are files: Landlock's business).
    CLONE_NEWNET where this process may (as root, or inside the user namespace its PID namespace
    came with), else CLONE_NEWUSER|CLONE_NEWNET with its ids mapped to themselves (needs a
    single-threaded caller). Returns (kind, None), (kind, why) or (None, why)."""
    if _unshare(CLONE_NEWNET) == 0:
        return "net", None
    uid, gid = os.geteuid(), os.getegid()
    err = _unshare(CLONE_NEWUSER | CLONE_NEWNET)
    if err:
        return None, f"unshare: {errno.errorcode.get(err, err)}"
    return "user+net", write_id_maps(uid, gid)


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
    """Make the rest of this child run in a new PID namespace, with (mount_proc) a private /proc
    in a private mount namespace that shows only that namespace's processes: no
    /proc/<worker pid>/environ to read. Forks twice, so the caller's code goes on as PID 2:
    - the calling process becomes the *waiter*, outside the namespace: it forwards signals and
      exits with the inner process's status (or is killed with it);
    - PID 1, the namespace's *init*, reaps orphans and exits when PID 2 does; the kernel then
      kills every process left in the namespace, so nothing the candidate started (a daemon in
      a session of its own included) outlives it, even when its worker died. The candidate is
      not PID 1 itself because the kernel drops the signals a namespace's init sends itself
      without a handler (`os.abort()`, a `kill` of its own pid would do nothing);
    - PID 2 returns. Both others stay outside the Landlock domain it enters next, so the
      candidate cannot signal them; they close every descriptor but stdio (the worker's pipe
      stays the inner process's alone).
    Call before `apply` (a Landlock domain forbids mounting). Returns, in PID 2, (kind, None)
    with kind "pid+mnt+proc" / "pid+mnt" / "user+pid+mnt+proc", (kind, why) when the private
    /proc could not be mounted, or (None, why) in the caller when no namespace could be created
    (then nothing forked)."""
    flags = CLONE_NEWPID | (CLONE_NEWNS if mount_proc else 0)
    prefix = ""
    err = _unshare(flags) if os.geteuid() == 0 else errno.EPERM
    if err:
        uid, gid = os.geteuid(), os.getegid()
        err = _unshare(flags | CLONE_NEWUSER)
        if err:
            return None, f"unshare: {errno.errorcode.get(err, err)}"
        prefix = "user+"
        map_why = write_id_maps(uid, gid)
    else:
        map_why = None
    status_r, status_w = os.pipe()
    init = os.fork()
    if init:  # the waiter: outside the new namespace
        os.close(status_w)
        close_fds_except(status_r)
        _wait_forward(init, status_r)
    os.close(status_r)
    die_with_parent()
    kind, why = prefix + "pid", map_why
    if mount_proc:  # the mount shows the namespace of the process that mounts: PID 1's
        kind += "+mnt"
        err = _mount("none", "/", None, _MS_REC | _MS_PRIVATE)
        if err == 0:
            err = _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
        if err == 0:
            kind += "+proc"
        else:
            why = "; ".join(filter(None, [why, f"private /proc not mounted ({errno.errorcode.get(err, err)})"]))
    inner = os.fork()
    if inner:
        close_fds_except(status_w)
        _init(inner, status_w)
    os.close(status_w)
    die_with_parent()
    return kind, why


FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def _forward_to(pid: int) -> None:
    for sig in FORWARDED:
        try:
            signal.signal(sig, lambda s, _f: os.kill(pid, s))
        except (OSError, ValueError):
            pass


def _init(inner: int, status_w: int):
    """PID 1 of the namespace: reap whatever ends up here until `inner` exits, tell the waiter its
    raw status, exit (the kernel kills what is left). Never returns."""
    _forward_to(inner)
    status = None
    while status is None:
        try:
            pid, st = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if pid == inner:
            status = st
    try:
        os.write(status_w, (status if status is not None else 70 << 8).to_bytes(4, "little"))
    except OSError:
        pass
    os._exit(0)


def _wait_forward(init: int, status_r: int):
    """The waiter: wait for the namespace's init, then end as the inner process ended (killed by
    the same signal, or its exit code); when init died without a word (killed), as init did."""
    _forward_to(init)
    die_with_parent()
    try:  # it may end by the candidate's signal: no core dump of this copy of the worker
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError):
        pass
    while True:
        try:
            _, status = os.waitpid(init, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
    try:
        told = os.read(status_r, 4)
    except OSError:
        told = b""
    if len(told) == 4:
        status = int.from_bytes(told, "little")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)
