"""Confinement of a candidate child: Landlock (via ctypes), no_new_privs, an empty network
namespace, a PID namespace with its own /proc, rlimits; and `probe()`, what this machine gives.

Standard library + ctypes only (the judge's core may import only the standard library, torch,
triton and numpy). Linux only; nothing here raises on a kernel or machine that lacks a layer: it
reports what took effect (`Applied`) or what is available (`Capabilities`).

Typical use, in a freshly forked child (single-threaded), after every trusted module it will need
is imported and before the candidate is imported:

    policy = confine.torch_policy(scratch="/run/kw/cand-17", sources=["/run/kw/cand-17/src"])
    confine.use_scratch(policy.write[0])     # TMPDIR, Triton/Inductor/CUDA caches, HOME
    applied = confine.apply(policy)          # record applied.as_dict() in the verdict

Landlock rules are checked when a file is opened (or a socket connected, a signal sent): what the
child has open already (its pipe to the worker, its log) keeps working. A Landlock domain is
inherited by every descendant and can only be narrowed, never lifted. Layers Landlock lacks (UDP,
pathname unix sockets, resource limits, killing what outlives a verdict) are the other helpers;
see docs/sandbox-notes.md for what was measured.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
import site
import stat
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

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

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
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
    scope: bool = True  # no signals to, no abstract unix sockets of processes outside the domain
    no_new_privs: bool = True  # always set where Landlock applies (the kernel requires it unless CAP_SYS_ADMIN)
    netns: bool = False  # also enter an empty network namespace (covers UDP, which Landlock does not)
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
        extra = [f"netns {self.netns}"] if self.netns else []
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
    if policy.netns:
        kind, why = enter_empty_netns()
        out.netns = kind
        if kind is None:
            out.missing.append(f"netns ({why})")
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
            for port in policy.tcp_connect_ports:
                rule = _NetPortAttr(NET_CONNECT_TCP, int(port))
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


# --- the layers Landlock lacks --------------------------------------------------------------


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


# --- a policy for torch + triton ------------------------------------------------------------

# Found by trial (docs/sandbox-notes.md): what `import torch`, `import triton` and a Triton kernel
# need beyond the Python prefix and sys.path.
SYSTEM_EXEC = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt/rocm",
               "/usr/local/cuda", "/etc/alternatives")
SYSTEM_READ = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/nsswitch.conf",
    "/etc/passwd", "/etc/group", "/etc/os-release", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf",
    "/etc/mime.types", "/etc/gai.conf",
    "/proc/self", "/proc/thread-self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/filesystems",
    "/proc/sys/kernel", "/proc/sys/vm", "/proc/mounts", "/proc/loadavg", "/proc/driver",
    "/sys/devices/system/cpu", "/sys/devices/system/node", "/sys/fs/cgroup", "/sys/bus/pci", "/sys/devices/pci0000:00",
    "/sys/class", "/sys/module/amdgpu", "/sys/module/nvidia",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom", "/dev/random", "/dev/nvidiactl",
           "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset", "/dev/nvidia-caps",
           "/dev/kfd", "/dev/dri")


def gpu_device_nodes() -> list[str]:
    try:
        return [f"/dev/{n}" for n in sorted(os.listdir("/dev")) if n.startswith("nvidia") and n[6:].isdigit()]
    except OSError:
        return []


def python_paths(sys_path: bool = False) -> list[str]:
    """What the interpreter and its packages need to read and execute: the prefixes (a venv's and
    its base interpreter's), the standard library, site-packages, and the top-level directory of
    every package already imported from elsewhere (editable installs, PYTHONPATH: kernelwright
    itself). Not sys.path's other entries (the current directory, a script's directory, every
    editable checkout), unless `sys_path`. Resolved paths too where they are links."""
    cands = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)]
    try:  # sysconfig imports its data module lazily: build the policy in the worker, before fork
        cands += [sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")]
        cands += site.getsitepackages()
    except Exception:  # noqa: BLE001, S110 - some virtualenvs' site.py; an unreadable prefix
        pass
    cands += [p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p or "lib-dynload" in p)]
    if sys_path:
        cands += [p for p in sys.path if p]
    covered = {c.rstrip("/") + "/" for p in cands if p for c in (p, os.path.realpath(p))}
    prefixes = tuple(covered)
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if "." in name or not isinstance(f, str) or f.startswith(prefixes):
            continue
        real = os.path.realpath(f)
        if real.startswith(prefixes):
            continue
        top = os.path.dirname(real)  # a package's directory, or a lone module's
        cands.append(top)
        prefixes += (top.rstrip("/") + "/",)
    seen: list[str] = []
    for p in cands:
        for q in (p, os.path.realpath(p)) if p else ():
            if os.path.exists(q) and q not in seen:
                seen.append(q)
    return seen


def torch_policy(scratch: str, sources: Sequence[str] = (), extra_read: Sequence[str] = (),
                 extra_write: Sequence[str] = (), devices: Sequence[str] | None = None,
                 shm: bool = True, **options) -> Policy:
    """An allow-list for a candidate child that runs torch + triton: read+exec on the Python
    prefixes, sys.path and system libraries; read on the few /etc, /proc and /sys entries they
    read; read+write on `scratch` (and /dev/shm where `shm`); read/write/ioctl on the GPU nodes;
    read on the candidate's own `sources`. Not $HOME, the run directory, other caches, /tmp."""
    devs = list(DEVICES) + gpu_device_nodes() if devices is None else list(devices)
    write = [scratch, *extra_write] + (["/dev/shm"] if shm else [])
    return Policy(read=[*SYSTEM_READ, *sources, *extra_read], exec=[*python_paths(), *SYSTEM_EXEC],
                  write=write, devices=devs, **options)


def use_scratch(scratch: str) -> dict:
    """Point every cache and temporary directory the child may use at `scratch` (call before
    `apply`): TMPDIR/TEMP/TMP (and `tempfile`'s cached choice, which a forked child inherits),
    HOME (~/.triton, ~/.cache), XDG_CACHE_HOME, TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR,
    CUDA_CACHE_PATH (the driver's JIT cache), MIOPEN/ROCm's user db. Returns what was set."""
    env = {"TMPDIR": scratch, "TEMP": scratch, "TMP": scratch, "HOME": scratch,
           "XDG_CACHE_HOME": os.path.join(scratch, ".cache"),
           "TRITON_CACHE_DIR": os.path.join(scratch, "triton"),
           "TORCHINDUCTOR_CACHE_DIR": os.path.join(scratch, "inductor"),
           "CUDA_CACHE_PATH": os.path.join(scratch, "cuda"),
           "MIOPEN_USER_DB_PATH": os.path.join(scratch, "miopen"),
           "MIOPEN_CUSTOM_CACHE_DIR": os.path.join(scratch, "miopen")}
    os.makedirs(scratch, exist_ok=True)
    os.environ.update(env)
    tempfile.tempdir = scratch
    if "triton" in sys.modules:
        try:
            from triton import knobs

            knobs.cache.dir = env["TRITON_CACHE_DIR"]
        except Exception:  # noqa: BLE001, S110 - Triton < 3.4 reads the variable
            pass
    return env


# --- what this machine gives ----------------------------------------------------------------


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
    """Run fn() in a throwaway forked child; (ok, message)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            ok, msg = fn()
        except BaseException as e:  # noqa: BLE001
            ok, msg = False, repr(e)
        os.write(w, (("1" if ok else "0") + (msg or ""))[:4000].encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 4096):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    text = data.decode(errors="replace")
    return (text[:1] == "1", text[1:]) if text else (False, "child died")


def _try_unshare(flags: int, maps: bool) -> tuple[bool, str]:
    uid, gid = os.geteuid(), os.getegid()
    err = _unshare(flags)
    if err:
        return False, f"unshare: {errno.errorcode.get(err, err)}"
    if maps:
        try:
            _write_file("/proc/self/setgroups", "deny")
            _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
            _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as e:
            return False, f"id maps: {e.strerror}"
    return True, ""


def _try_private_proc() -> tuple[bool, str]:
    kind, why = enter_pid_namespace(mount_proc=True)  # the caller (the throwaway child) waits
    if kind is None or why:
        return False, why or ""
    ok = os.getpid() == 1 and {e for e in os.listdir("/proc") if e.isdigit()} <= {"1"}
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


def check_level(level: str, caps: Capabilities) -> tuple[int | None, str | None]:
    """What `--sandbox LEVEL` means on this machine: (exit code or None, message or None).
    strict without Landlock's filesystem layer: (2, why); auto without it: (None, a warning to
    print once); otherwise (None, None)."""
    if level == "off":
        return None, None
    if caps.landlock_abi is not None:
        return None, None
    msg = f"sandbox: Landlock unavailable ({caps.landlock_error}): candidates run unconfined"
    if level == "strict":
        return 2, msg.replace("candidates run unconfined", "--sandbox strict refuses to judge")
    return None, msg
