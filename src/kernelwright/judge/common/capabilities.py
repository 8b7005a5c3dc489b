"""What this machine gives a judge child's sandbox (`probe`, each namespace tried in a throwaway
forked child; `summary()` is `doctor`'s line) and what `--sandbox LEVEL` means here
(`check_level`). Used by the coordinator before it starts workers and by `doctor`."""

from __future__ import annotations

import errno
import os
import platform
import resource
from dataclasses import asdict, dataclass, field

from . import procs
from .isolation import (
    _RLIMITS,
    CLONE_NEWNET,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    _unshare,
    enter_pid_namespace,
    write_id_maps,
)
from .landlock import handled_masks, landlock_abi


@dataclass
class Capabilities:
    machine: str = ""
    euid: int = -1
    landlock_abi: int | None = None
    landlock_error: str | None = None
    userns: bool = False
    netns: bool = False  # an empty network namespace (as root, or with a user namespace)
    pidns: bool = False
    private_proc: bool = False  # a PID namespace with its own /proc mounted
    notes: dict = field(default_factory=dict)  # layer -> why not / how
    cgroup: str | None = None  # this process's cgroup v2 directory, if writable and delegated
    cgroup_controllers: list = field(default_factory=list)
    rlimits: list = field(default_factory=list)  # names settable here

    def summary(self) -> str:
        parts = []
        if self.landlock_abi is None:
            parts.append(f"no Landlock ({self.landlock_error})")
        else:
            _fs, net, scope = handled_masks(self.landlock_abi)
            what = ["files"] + (["network"] if net else []) + (["signals"] if scope else [])
            parts.append(f"Landlock ABI {self.landlock_abi}: {', '.join(what)}")
        ns = [n for n, ok in (("user", self.userns), ("net", self.netns), ("pid", self.pidns)) if ok]
        parts.append(("namespaces: " + ", ".join(ns) if ns else "no namespaces")
                     + (" (private /proc)" if self.private_proc else ""))
        if self.cgroup and {"memory", "pids"} <= set(self.cgroup_controllers):
            parts.append("delegated cgroup: memory and process limits by cgroup")
        else:
            why = "no delegated cgroup" if not self.cgroup else f"cgroup {self.cgroup} without memory/pids"
            mem = "memory limit by rlimit (RLIMIT_DATA)"
            nproc = "process count not limited (root)" if self.euid == 0 else "process count by RLIMIT_NPROC"
            parts.append(f"{why}: {mem}, {nproc}")
        return "; ".join(parts)

    def as_dict(self) -> dict:
        return asdict(self)


def _in_child(fn) -> tuple[bool, str]:
    """Run fn() -> (ok, message) in a throwaway forked child (what it tries may change the
    process for good: namespaces, mounts); (ok, message)."""
    def attempt() -> str:
        ok, msg = fn()
        return ("1" if ok else "0") + (msg or "")

    done, text = procs.in_fork(attempt, limit=4000)
    if not done:
        return False, text
    return text[:1] == "1", text[1:]


def _try_unshare(flags: int, maps: bool) -> tuple[bool, str]:
    uid, gid = os.geteuid(), os.getegid()
    err = _unshare(flags)
    if err:
        return False, f"unshare: {errno.errorcode.get(err, err)}"
    why = write_id_maps(uid, gid) if maps else None
    return why is None, why or ""


def _try_private_proc() -> tuple[bool, str]:
    kind, why = enter_pid_namespace(mount_proc=True)  # the caller (the throwaway child) waits
    if kind is None or why:
        return False, why or ""
    # this process goes on as PID 2, beside the namespace's init
    ok = os.getpid() == 2 and {e for e in os.listdir("/proc") if e.isdigit()} <= {"1", "2"}
    return ok, kind


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _own_cgroup() -> tuple[str | None, list, str]:
    try:
        lines = _read("/proc/self/cgroup").splitlines()
    except OSError as e:
        return None, [], f"/proc/self/cgroup: {e.strerror}"
    rel = next((ln[3:] for ln in lines if ln.startswith("0::")), None)
    if rel is None:
        return None, [], "no cgroup v2 hierarchy"
    mounts = []
    try:
        for ln in _read("/proc/self/mounts").splitlines():
            parts = ln.split()
            if parts[2] == "cgroup2":
                mounts.append(parts[1])
    except OSError:
        pass
    for m in mounts:
        path = os.path.normpath(m + rel)
        if os.path.isdir(path):
            try:
                controllers = _read(os.path.join(path, "cgroup.controllers")).split()
            except OSError:
                controllers = []
            writable = os.access(path, os.W_OK) and os.access(os.path.join(path, "cgroup.procs"), os.W_OK)
            if not writable:
                return None, controllers, f"{path} not writable (not delegated)"
            hybrid = "" if m == "/sys/fs/cgroup" else f" (hybrid mount at {m})"
            return path, controllers, f"writable{hybrid}, controllers: {' '.join(controllers) or 'none'}"
    return None, [], "cgroup2 not mounted"


def probe() -> Capabilities:
    """What this machine gives a candidate child (each namespace tried in a throwaway forked
    child). Never raises. `summary()`: one line for `doctor`."""
    caps = Capabilities(machine=platform.machine(), euid=os.geteuid())
    caps.landlock_abi, caps.landlock_error = landlock_abi()
    for name, flags, maps in (("userns", CLONE_NEWUSER, True),
                              ("netns", CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET,
                               os.geteuid() != 0),
                              ("pidns", CLONE_NEWPID if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWPID,
                               os.geteuid() != 0)):
        try:
            ok, why = _in_child(lambda flags=flags, maps=maps: _try_unshare(flags, maps))
        except OSError as e:
            ok, why = False, str(e)
        setattr(caps, name, ok)
        if not ok:
            caps.notes[name] = why
    if caps.pidns:
        try:
            ok, why = _in_child(_try_private_proc)
        except OSError as e:
            ok, why = False, str(e)
        caps.private_proc = ok
        caps.notes["private_proc"] = why
    caps.cgroup, caps.cgroup_controllers, caps.notes["cgroup"] = _own_cgroup()
    caps.rlimits = [n for n, r in _RLIMITS.items() if hasattr(resource, r)]
    if os.geteuid() == 0:
        caps.notes["nproc"] = "RLIMIT_NPROC is not enforced for root"
    return caps


LEVELS = ("auto", "strict", "off")


def check_level(level: str, caps: Capabilities | None = None) -> tuple[int | None, str | None]:
    """What `--sandbox LEVEL` means on this machine: (exit code or None, message or None).
    "strict" needs Landlock ABI 6 (files, TCP and signals): without it (2, why). "auto" without
    it: (None, a warning to print once). `caps`: a probe's result (default: ask the kernel now,
    which forks nothing)."""
    if level not in LEVELS:
        return 2, f"--sandbox must be one of {', '.join(LEVELS)}, not {level!r}"
    if level == "off":
        return None, None
    abi, why = (caps.landlock_abi, caps.landlock_error) if caps is not None else landlock_abi()
    if abi is not None and abi >= 6:
        return None, None
    if abi is None:
        missing, effect = f"Landlock unavailable ({why})", "candidates run unconfined"
    else:
        missing = (f"Landlock ABI {abi} confines files{' and TCP' if abi >= 4 else ''} but not signals "
                   "to other processes (ABI 6, Linux 6.12)")
        effect = "candidates run partly confined"
    if level == "strict":
        return 2, (f"--sandbox strict: {missing}: refusing to judge (--sandbox auto judges with what this "
                   "machine gives; a container or VM confines fully)")
    return None, f"sandbox: {missing}: {effect}"
