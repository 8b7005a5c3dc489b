"""Who holds a GPU's lock, from the kernel's lock table (/proc/locks): the processes a long drain
waits for (named in traces), whether another worker's timing turn really holds the GPU while
a child says it queues for it (the worker's clock stops only then: `channel.ReplyClock`), and
which of them belong to a given process tree (a candidate holding the lock between its requests:
`lockguard`)."""

from __future__ import annotations

import fcntl
import os

from .privdir import lock_base


def lock_holders(lock) -> list[str]:
    """The processes holding `lock` (an open lock file), each with what it is doing as far as the
    kernel says: its state, the wait channel it sleeps in, and the commands of its children (a
    check holding the GPU while it waits for gcc or ptxas shows them); an exclusive holder is
    named as a timing turn. From /proc; [] elsewhere."""
    try:
        inode = os.fstat(lock.fileno()).st_ino
    except OSError:
        return []
    holders = _holders_of({inode}, _flock_table() or [])
    # an exclusive holder is another worker's timing turn, not a check that is slow to let go
    return [("the timing turn of " if exclusive else "") + _describe_process(str(pid))
            for pid, exclusive in holders.items()]


def _holders_of(inodes: set[int], table: list[tuple[int, int, bool]]) -> dict[int, bool]:
    """pid -> whether exclusively, of the processes holding any of the files `inodes` in `table`."""
    holders: dict[int, bool] = {}
    for pid, inode, exclusive in table:
        if inode in inodes:
            holders[pid] = holders.get(pid, False) or exclusive
    return holders


def _flock_table() -> list[tuple[int, int, bool]] | None:
    """(pid, inode, exclusive) of every flock held on this machine, from /proc/locks (waiters left
    out); None where it cannot be read."""
    try:
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    table = []
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK" or not fields[4].isdigit():
            continue
        inode = fields[5].rsplit(":", 1)[-1]
        if inode.isdigit():
            table.append((int(fields[4]), int(inode), fields[3] == "WRITE"))
    return table


_FLOCKS_LISTED: bool | None = None


def flocks_listed() -> bool:
    """Whether /proc/locks lists this process's flocks (a lock of our own must show up): some
    kernels, or sandboxes such as gVisor, may give no table or an empty one, and an empty table
    would read as "nobody holds the GPU". Checked once per process."""
    global _FLOCKS_LISTED
    if _FLOCKS_LISTED is None:
        import tempfile

        with tempfile.TemporaryFile() as probe:
            fcntl.flock(probe, fcntl.LOCK_EX)
            inode = os.fstat(probe.fileno()).st_ino
            table = _flock_table() or []
            _FLOCKS_LISTED = (os.getpid(), inode, True) in table
    return _FLOCKS_LISTED


def _gpu_lock_table() -> tuple[dict[str, int], list[tuple[int, int, bool]]] | None:
    """(inode of each of this GPU's lock files that exists, by suffix; the flock table), or None
    when it cannot be known (no lock files yet, /proc/locks not listing flocks)."""
    base = lock_base()
    inodes = {}
    for name in (".lock", ".turnstile"):
        try:
            inodes[name] = os.stat(base + name).st_ino
        except OSError:
            pass
    if not inodes or not flocks_listed():
        return None
    table = _flock_table()
    return None if table is None else (inodes, table)


def gpu_lock_holders() -> dict[int, bool] | None:
    """pid -> whether exclusively, of every process holding this GPU's lock or its turnstile
    (either file will do: a candidate may have made one of them itself). None when it cannot be
    known."""
    known = _gpu_lock_table()
    return None if known is None else _holders_of(set(known[0].values()), known[1])


def timing_turn_elsewhere(ours: set[int]) -> bool | None:
    """Whether a process outside `ours` (a worker's own process tree) holds this GPU's lock
    exclusively or its turnstile: the only reason a check may queue for the GPU. None when it
    cannot be known (either lock file missing, /proc/locks not listing flocks). A child's "waiting"
    notice stops its worker's clock only while this holds (`channel.ReplyClock`): a candidate
    cannot stop its own clock by claiming to wait, nor by holding the lock itself."""
    known = _gpu_lock_table()
    if known is None or len(known[0]) < 2:
        return None
    inodes, table = known
    lock, turnstile = inodes[".lock"], inodes[".turnstile"]
    return any(pid not in ours and (inode == turnstile or (inode == lock and exclusive))
               for pid, inode, exclusive in table)


def _describe_process(pid: str) -> str:
    def read(path: str) -> str:
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return ""

    stat = read(f"/proc/{pid}/stat").rpartition(")")[2].split()  # state, parent, ...
    wchan = read(f"/proc/{pid}/wchan")
    children = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            children += read(f"/proc/{pid}/task/{tid}/children").split()
    except OSError:
        pass
    commands = [read(f"/proc/{child}/comm") or "?" for child in children]
    parts = [f"{stat[0]}, child of {stat[1]}" if len(stat) > 1 else "gone"]
    if wchan and wchan != "0":
        parts.append(f"in {wchan}")
    if commands:
        parts.append("children: " + ", ".join(commands))
    return f"pid {pid} ({'; '.join(parts)})"
