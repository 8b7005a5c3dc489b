"""Landlock, by ctypes: the allow-list that confines the calling process (files, TCP, signals,
abstract unix sockets) and `apply(Policy)`, which also enters the layers Landlock lacks
(`isolation`: an empty network namespace, rlimits) and reports what took effect (`Applied`).

Standard library + ctypes only (the judge's core may import only the standard library, torch,
triton and numpy). Linux only; nothing here raises on a kernel that lacks a layer: it reports
what took effect. Landlock rules are checked when a file is opened (or a socket connected, a
signal sent): what the process has open already (a judge child's pipe, its log) keeps working. A
Landlock domain is inherited by every descendant and can only be narrowed, never lifted. What
was measured: docs/sandbox-notes.md. Used by `sandbox.confinement` (the judge children's policy)
and by `capabilities` (what this machine gives)."""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from .isolation import enter_empty_netns, enter_pid_namespace, set_rlimits

# --- the kernel's ABI -----------------------------------------------------------------------

# landlock_create_ruleset / add_rule / restrict_self: the same numbers in the generic syscall
# table (aarch64, riscv64, ...) and on x86_64 (added in Linux 5.13 to every table at once).
_SYSCALLS = {
    "x86_64": (444, 445, 446),
    "aarch64": (444, 445, 446),
    "arm64": (444, 445, 446),
    "riscv64": (444, 445, 446),
    "ppc64le": (444, 445, 446),
    "s390x": (444, 445, 446),
}
NR_CREATE_RULESET, NR_ADD_RULE, NR_RESTRICT_SELF = _SYSCALLS.get(platform.machine(), (None,) * 3)

LANDLOCK_CREATE_RULESET_VERSION = 1 << 0
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_RULE_NET_PORT = 2

# filesystem rights (ABI 1 unless noted)
FS_EXECUTE = 1 << 0
FS_WRITE_FILE = 1 << 1
FS_READ_FILE = 1 << 2
FS_READ_DIR = 1 << 3
FS_REMOVE_DIR = 1 << 4
FS_REMOVE_FILE = 1 << 5
FS_MAKE_CHAR = 1 << 6
FS_MAKE_DIR = 1 << 7
FS_MAKE_REG = 1 << 8
FS_MAKE_SOCK = 1 << 9
FS_MAKE_FIFO = 1 << 10
FS_MAKE_BLOCK = 1 << 11
FS_MAKE_SYM = 1 << 12
FS_REFER = 1 << 13  # ABI 2: link/rename across directories
FS_TRUNCATE = 1 << 14  # ABI 3
FS_IOCTL_DEV = 1 << 15  # ABI 5: ioctl on character/block devices
# network rights (ABI 4)
NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
# scopes (ABI 6)
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

_FS_ABI1 = (1 << 13) - 1
# the rights that apply to a file that is not a directory (the kernel refuses others on a file)
_FS_FILE_ONLY = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV

READ = FS_READ_FILE | FS_READ_DIR
READ_EXEC = READ | FS_EXECUTE
READ_WRITE = (READ_EXEC | FS_WRITE_FILE | FS_REMOVE_DIR | FS_REMOVE_FILE | FS_MAKE_DIR | FS_MAKE_REG
              | FS_MAKE_SOCK | FS_MAKE_FIFO | FS_MAKE_SYM | FS_REFER | FS_TRUNCATE)
DEVICE = FS_READ_FILE | FS_WRITE_FILE | FS_READ_DIR | FS_TRUNCATE | FS_IOCTL_DEV

_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_PR_SET_PDEATHSIG = 1

_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the uapi header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.syscall.restype = ctypes.c_long
except (OSError, AttributeError):  # not Linux / no libc: every layer reports "unavailable"
    _libc = None


def _syscall(nr: int | None, *args) -> tuple[int, int]:
    """(return value, errno) of a raw syscall; (-1, ENOSYS) where there is none. The one place
    the tests monkeypatch to simulate a kernel without Landlock."""
    if _libc is None or nr is None:
        return -1, errno.ENOSYS
    ctypes.set_errno(0)
    ret = _libc.syscall(ctypes.c_long(nr), *args)
    return ret, (ctypes.get_errno() if ret < 0 else 0)


def _prctl(option: int, arg2: int = 0) -> tuple[int, int]:
    if _libc is None:
        return -1, errno.ENOSYS
    ret = _libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    return ret, (ctypes.get_errno() if ret < 0 else 0)



def _why(err: int) -> str:
    return {errno.ENOSYS: "not in this kernel (ENOSYS)",
            errno.EOPNOTSUPP: "built in but disabled at boot (EOPNOTSUPP: add landlock to lsm=)",
            errno.EPERM: "not permitted (EPERM)"}.get(err, f"{errno.errorcode.get(err, err)}")


def landlock_abi() -> tuple[int | None, str | None]:
    """(ABI version, None) or (None, why not)."""
    ret, err = _syscall(NR_CREATE_RULESET, None, ctypes.c_size_t(0),
                        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    if ret < 0:
        return None, _why(err)
    return int(ret), None


def handled_masks(abi: int) -> tuple[int, int, int]:
    """(filesystem, network, scope) masks this ABI can handle."""
    fs = _FS_ABI1
    if abi >= 2:
        fs |= FS_REFER
    if abi >= 3:
        fs |= FS_TRUNCATE
    if abi >= 5:
        fs |= FS_IOCTL_DEV
    net = NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0
    scope = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0
    return fs, net, scope


def _attr_size(abi: int) -> int:
    return 8 if abi < 4 else 16 if abi < 6 else 24


# --- the declarative API --------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """What a confined process may still do. Paths: files or directories (a directory covers
    everything beneath it); missing ones are skipped and listed in `Applied.skipped`.
    read: read only; exec: read + execute; write: read, write, create, remove, rename (scratch);
    devices: read, write, ioctl (GPU nodes: /dev/nvidia*, /dev/kfd, /dev/dri).
    Everything else is denied once Landlock's filesystem layer applies."""

    read: Sequence[str] = ()
    exec: Sequence[str] = ()
    write: Sequence[str] = ()
    devices: Sequence[str] = ()
    allow_tcp: bool = False  # False: no TCP bind or connect at all
    tcp_connect_ports: Sequence[int] = ()  # exceptions where allow_tcp is False
    tcp_bind_ports: Sequence[int] = ()  # exceptions where allow_tcp is False (a profiler's agent listens)
    scope: bool = True  # no signals to, no abstract unix sockets of processes outside the domain
    no_new_privs: bool = True  # always set where Landlock applies (the kernel requires it unless CAP_SYS_ADMIN)
    netns: bool = False  # also enter an empty network namespace (covers UDP, which Landlock does not)
    pidns: bool = False  # run on in a PID namespace of its own with a private /proc (forks twice)
    nproc: int | None = None  # RLIMIT_NPROC (per real uid, not enforced for root)
    fsize: int | None = None  # RLIMIT_FSIZE: bytes per file written (not a total)
    data: int | None = None  # RLIMIT_DATA: brk + private writable mappings (see notes for CUDA)
    address_space: int | None = None  # RLIMIT_AS: unsafe with CUDA (it reserves terabytes of VA)
    nofile: int | None = None  # RLIMIT_NOFILE
    core: int | None = 0  # RLIMIT_CORE: no core dumps of a candidate (its memory holds inputs)


@dataclass
class Applied:
    """What `apply` did, layer by layer: for a verdict to record (`as_dict()`, `summary()`)."""

    landlock_abi: int | None = None
    landlock_error: str | None = None
    fs: bool = False  # filesystem allow-list enforced
    fs_refer: bool = False
    fs_truncate: bool = False
    fs_ioctl_dev: bool = False
    tcp: bool = False  # TCP bind/connect rules enforced
    scope_signal: bool = False
    scope_abstract_unix: bool = False
    no_new_privs: bool = False
    netns: str | None = None  # "net" (as root) / "user+net", or None
    pidns: str | None = None  # "pid+mnt+proc" (as root) / "user+pid+mnt+proc", or None
    rlimits: dict = field(default_factory=dict)  # name -> value set
    skipped: list = field(default_factory=list)  # "path (why)": rules not added
    missing: list = field(default_factory=list)  # layers asked for that did not take effect, with why
    warnings: list = field(default_factory=list)

    @property
    def layers(self) -> list[str]:
        out = []
        for name in ("fs", "fs_refer", "fs_truncate", "fs_ioctl_dev", "tcp", "scope_signal",
                     "scope_abstract_unix", "no_new_privs"):
            if getattr(self, name):
                out.append(name)
        if self.netns:
            out.append(f"netns:{self.netns}")
        if self.pidns:
            out.append(f"pidns:{self.pidns}")
        out += [f"rlimit:{k}" for k in self.rlimits]
        return out

    @property
    def confined(self) -> bool:
        """The filesystem allow-list took effect (the layer that keeps secrets out)."""
        return self.fs

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        if self.landlock_abi is None:
            head = f"Landlock unavailable: {self.landlock_error}"
        else:
            head = f"Landlock ABI {self.landlock_abi}: " + (", ".join(
                n for n, on in (("files", self.fs), ("network", self.tcp), ("signals", self.scope_signal))
                if on) or "nothing")
        extra = [f"{name} {kind}" for name, kind in (("netns", self.netns), ("pidns", self.pidns)) if kind]
        extra += [f"{k}={v}" for k, v in self.rlimits.items()]
        if self.missing:
            extra.append("missing: " + "; ".join(self.missing))
        return head + ("; " + "; ".join(extra) if extra else "")


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def _add_path_rule(ruleset_fd: int, path: str, access: int, handled_fs: int) -> str | None:
    """None, or why the rule was not added."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as e:
        return f"{path} ({e.strerror})"
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FS_FILE_ONLY
        attr = _PathBeneathAttr(access & handled_fs, fd)
        ret, err = _syscall(NR_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH),
                            ctypes.byref(attr), ctypes.c_uint32(0))
        return None if ret == 0 else f"{path} (landlock_add_rule: {_why(err)})"
    finally:
        os.close(fd)


def apply(policy: Policy) -> Applied:
    """Confine the calling process (and all it will start) to `policy`. Call it single-threaded
    (right after fork): Landlock restricts only the calling thread and what it creates later.
    Never raises: what did not take effect is in `Applied.missing`."""
    out = Applied()
    if _threads() > 1:
        out.warnings.append(f"{_threads()} threads: the others stay unconfined")
    if policy.pidns:  # first: it forks, and this process goes on as the namespace's PID 2
        kind, why = enter_pid_namespace(mount_proc=True)
        out.pidns = kind
        if kind is None or why:
            out.missing.append(f"pidns ({why})")
    if policy.netns:
        kind, why = enter_empty_netns()
        out.netns = kind
        if kind is None:
            out.missing.append(f"netns ({why})")
        elif why:
            out.warnings.append(f"netns ({why})")
    out.rlimits, failed = set_rlimits(nproc=policy.nproc, fsize=policy.fsize, data=policy.data,
                                      address_space=policy.address_space, nofile=policy.nofile,
                                      core=policy.core)
    out.missing += failed
    abi, why = landlock_abi()
    out.landlock_abi, out.landlock_error = abi, why
    if abi is None:
        out.missing.append(f"landlock ({why})")
        if policy.no_new_privs:
            out.no_new_privs = _prctl(_PR_SET_NO_NEW_PRIVS, 1)[0] == 0
        return out
    fs, net, scope = handled_masks(abi)
    if policy.allow_tcp:
        net = 0
    if not policy.scope:
        scope = 0
    attr = _RulesetAttr(fs, net, scope)
    ruleset_fd, err = _syscall(NR_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(_attr_size(abi)),
                               ctypes.c_uint32(0))
    if ruleset_fd < 0:
        out.missing.append(f"landlock (landlock_create_ruleset: {_why(err)})")
        return out
    try:
        for paths, access in ((policy.read, READ), (policy.exec, READ_EXEC), (policy.write, READ_WRITE),
                              (policy.devices, DEVICE)):
            for path in paths:
                skipped = _add_path_rule(ruleset_fd, path, access, fs)
                if skipped:
                    out.skipped.append(skipped)
        if net:
            ports = [(NET_CONNECT_TCP, p) for p in policy.tcp_connect_ports]
            ports += [(NET_BIND_TCP, p) for p in policy.tcp_bind_ports]
            for access, port in ports:
                rule = _NetPortAttr(access, int(port))
                ret, err = _syscall(NR_ADD_RULE, ctypes.c_int(ruleset_fd), ctypes.c_int(LANDLOCK_RULE_NET_PORT),
                                    ctypes.byref(rule), ctypes.c_uint32(0))
                if ret != 0:
                    out.skipped.append(f"tcp port {port} ({_why(err)})")
        ret, err = _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        out.no_new_privs = ret == 0
        ret, err = _syscall(NR_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0))
        if ret != 0:
            out.missing.append(f"landlock (landlock_restrict_self: {_why(err)})")
            return out
    finally:
        os.close(ruleset_fd)
    out.fs = True
    out.fs_refer, out.fs_truncate, out.fs_ioctl_dev = bool(fs & FS_REFER), bool(fs & FS_TRUNCATE), bool(fs & FS_IOCTL_DEV)
    out.tcp = bool(net)
    out.scope_signal, out.scope_abstract_unix = bool(scope & SCOPE_SIGNAL), bool(scope & SCOPE_ABSTRACT_UNIX_SOCKET)
    if not policy.allow_tcp and not net:
        out.missing.append(f"tcp rules (Landlock ABI {abi} < 4)")
    if policy.scope and not scope:
        out.missing.append(f"signal/abstract-socket scoping (Landlock ABI {abi} < 6)")
    if not (fs & FS_IOCTL_DEV):
        out.warnings.append(f"ioctl on devices not restricted (Landlock ABI {abi} < 5)")
    return out
