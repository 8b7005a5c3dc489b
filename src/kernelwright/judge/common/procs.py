"""Process hygiene for the judge: nothing a candidate starts may outlive its verdict.

Linux only: children die with their parent (PR_SET_PDEATHSIG), each candidate gets its own process
group, and the worker is a child subreaper so that grandchildren which daemonize themselves are
re-parented to it and can be found and killed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import time
from typing import Callable

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except OSError:  # not Linux: the protections degrade to process groups only
    _libc = None


def die_with_parent() -> None:
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def close_fds_except(keep: int) -> None:
    """Close every descriptor but stdio and `keep`: a forked child drops what it inherited (the
    worker's channel to the coordinator, other children's pipes)."""
    try:
        max_fd = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        max_fd = 4096
    os.closerange(3, keep)
    os.closerange(keep + 1, max_fd)


def make_undumpable() -> None:
    """Trusted processes (worker, reference child) hold reference outputs and pristine inputs: a
    non-dumpable process's memory cannot be read through /proc/<pid>/mem or ptrace by another
    process of the same (non-root) user, such as a candidate's."""
    if _libc is not None:
        _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def make_dumpable() -> None:
    """A candidate child, forked from its non-dumpable worker: dumpable again, as any program is, so
    that as non-root it may open its own /proc/self files (environ, fd/, its namespaces' id maps),
    as it may as root. Its memory holds nothing of the user's; its Landlock domain already keeps
    other candidates from reading it."""
    if _libc is not None:
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def limit_file_size(max_bytes: int) -> None:
    """No file the candidate writes (its log included) may grow past `max_bytes`: a candidate
    printing forever is stopped by SIGXFSZ instead of filling the disk."""
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    except (ValueError, OSError):
        pass


def become_subreaper() -> None:
    if _libc is not None:
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def kill_group(pid: int) -> None:
    """SIGKILL the process group led by `pid` (and `pid` itself if it left the group)."""
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


def reap(pid: int, timeout: float = 5.0) -> int | None:
    """Wait for `pid` to exit; return its raw wait status, or None if it is still running."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (field 3 onwards), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def parent_map() -> dict[int, list[int]]:
    """Every live process's children by parent pid: one scan of /proc."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return parents
    for entry in entries:
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and len(fields) > 1:
                parents.setdefault(int(fields[1]), []).append(int(entry))
    return parents


def children_of(pid: int, parents: dict[int, list[int]] | None = None) -> list[int]:
    """Direct children of `pid`, read from /proc (orphans re-parented to a subreaper included);
    `parents`: a `parent_map` already read, to look again without another scan."""
    return list((parent_map() if parents is None else parents).get(pid, []))


def kill_strays(keep: set[int]) -> list[int]:
    """Kill and reap every child of this process not in `keep` (escaped candidate processes)."""
    killed = []
    for _ in range(3):  # a stray may fork while we look: look again
        strays = [p for p in children_of(os.getpid()) if p not in keep]
        if not strays:
            break
        for pid in strays:
            kill_group(pid)
            reap(pid, timeout=2.0)
            killed.append(pid)
    return killed


def describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        text = {"SIGSEGV": "segmentation fault", "SIGBUS": "bus error", "SIGABRT": "aborted",
                "SIGKILL": "killed", "SIGFPE": "floating-point exception", "SIGILL": "illegal instruction",
                "SIGXFSZ": "stopped at the file size limit (printed or wrote too much)"}
        return f"{text.get(name, 'terminated')} ({name})"
    if os.WIFEXITED(status):
        return f"exited with status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def descendants(*pids: int, parents: dict[int, list[int]] | None = None) -> list[int]:
    """Every live descendant of `pids` (children, their children, ...), whatever process group or
    session they moved to; `parents`: a `parent_map` already read."""
    parents = parent_map() if parents is None else parents
    found, todo = [], list(pids)
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return found


def ancestry(pid: int, limit: int = 64) -> list[int]:
    """`pid`'s parent, its parent's parent, ... up to init (or the first that is gone), from /proc:
    a few reads, where `descendants` scans every process."""
    chain: list[int] = []
    while pid > 1 and len(chain) < limit:
        fields = _stat_fields(pid)
        if not fields or len(fields) < 2 or not fields[1].isdigit():
            break
        pid = int(fields[1])
        chain.append(pid)
    return chain


def cpu_seconds(pids) -> dict[int, float]:
    """User + system CPU time used so far by each of the processes `pids` (all its threads; a
    process that is gone is left out), from /proc/<pid>/stat."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    found = {}
    for pid in pids:
        fields = _stat_fields(pid)
        if fields and len(fields) > 12:
            found[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15)
    return found


def signal_all(pids, sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def process_state(pid: int) -> str | None:
    """`pid`'s state letter from /proc/<pid>/stat (R running, S sleeping, D uninterruptible, T
    stopped by a signal, t stopped by a debugger, Z zombie, ...), or None when it is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


STATE_NAMES = {"R": "running", "S": "sleeping", "D": "in uninterruptible sleep (waiting on the kernel)",
               "T": "stopped by a signal", "t": "stopped by a debugger", "Z": "a zombie", "X": "dead",
               "I": "idle"}


def kill_tree(pid: int, rounds: int = 10) -> list[int]:
    """SIGKILL `pid` and every process it started, wherever they went (another process group or
    session; orphans re-parented to `pid` when it is a subreaper). The tree is frozen first (SIGSTOP,
    looked at again until a look finds nothing new), so nothing in it forks while it is killed and
    nothing is re-parented away from it before its turn. Returns the descendants it killed."""
    signal_all([pid], signal.SIGSTOP)
    frozen: list[int] = []
    for _ in range(rounds):
        fresh = [p for p in descendants(pid) if p not in frozen and process_state(p) not in (None, "Z", "X")]
        if not fresh:
            break
        signal_all(fresh, signal.SIGSTOP)
        frozen += fresh
    signal_all(frozen, signal.SIGKILL)
    kill_group(pid)
    return frozen


def in_fork(fn: Callable[[], str], limit: int = 1 << 20) -> tuple[bool, str]:
    """fn() run in a throwaway forked child, its text sent back through a pipe (at most `limit`
    bytes): (True, text), or (False, why) when fn raised (its repr) or the child died first."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = "1" + fn()
        except BaseException as exc:  # noqa: BLE001 - the child must never unwind into the caller
            out = "0" + repr(exc)
        os.write(w, out.encode(errors="replace")[:limit])
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    text = data.decode(errors="replace")
    return (text[:1] == "1", text[1:]) if text else (False, "child died")
