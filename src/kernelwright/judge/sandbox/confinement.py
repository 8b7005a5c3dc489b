"""What each judge child may touch, and putting it in place right after its fork.

`enter` confines a child while it is still single-threaded (Landlock binds the calling thread and
what it starts later), both roles alike: read and execute the Python install, the system
libraries and the C compiler, read the few /etc, /proc and /sys entries torch and Triton read,
read the task's files (`read`: the benchmark checkout or the task file's directory; adapters read
them when they load an implementation, and the task is in the child's memory anyway), use the GPU
nodes, write only the child's own scratch directory, its side's Triton cache and the GPU lock
files; no TCP, no signal to and no ptrace of anything outside its own domain; rlimits on file
size, core dumps and memory. A candidate child also gets an empty network namespace (no UDP
either). Its source reaches it with the load request (its worker read the submitted file) and is
imported from its scratch (`keep_source`): other candidates' sources, the run directory, the
caches and $HOME stay out of its reach.

What `--sandbox` means: "off" confines nothing; "auto" confines with what this machine gives and
says once what is missing; "strict" judges nothing unless files, network and signals are all
confined (the coordinator refuses before starting, `capabilities.check_level`; a child that still
misses a layer fails its verdict as a judge error).

The mechanisms are in `common` (`landlock`, `isolation`; `capabilities` says what a machine
gives). `base_policy` runs in the worker, before any fork: `python_paths` looks at sys.modules
and sysconfig, which imports its data lazily.
"""

from __future__ import annotations

import os
import shutil
import site
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ..common import landlock

# What "strict" requires of a child: the three layers that keep secrets, the network and other
# processes out of a candidate's reach.
REQUIRED_LAYERS = ("fs", "tcp", "scope_signal")


# --- what torch and Triton need ------------------------------------------------------------

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
# CUDA's initialisation writes under /proc/self (measured on the H200: cudaGetDeviceCount fails
# with error 304 without it; write on /proc/self is enough, benchmarks/sandbox_probe.py --gpu)
SYSTEM_WRITE = ("/proc/self", "/proc/thread-self")
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
                 shm: bool = True, **options) -> landlock.Policy:
    """An allow-list for a candidate child that runs torch + triton: read+exec on the Python
    prefixes, sys.path and system libraries; read on the few /etc, /proc and /sys entries they
    read; read+write on `scratch` (and /dev/shm where `shm`); read/write/ioctl on the GPU nodes;
    read on the candidate's own `sources`. Not $HOME, the run directory, other caches, /tmp."""
    devs = list(DEVICES) + gpu_device_nodes() if devices is None else list(devices)
    write = [scratch, *SYSTEM_WRITE, *extra_write] + (["/dev/shm"] if shm else [])
    return landlock.Policy(read=[*SYSTEM_READ, *sources, *extra_read],
                           exec=[*python_paths(), *SYSTEM_EXEC, *compiler_paths()], write=write, devices=devs,
                           **options)


def compiler_paths() -> list[str]:
    """The installation of the C compiler Triton builds its launchers with (`CC`, else gcc or
    clang on PATH, as `triton.runtime.build` looks), where it is not under the system
    directories: e.g. /opt/gcc on the H200 machine. Its prefix: the compiler runs its own
    helpers (cc1, as, ld) from beside it."""
    found = []
    for name in (os.environ.get("CC"), "gcc", "clang", "cc"):
        path = shutil.which(name) if name else None
        if not path:
            continue
        for p in (path, os.path.realpath(path)):
            prefix = os.path.dirname(os.path.dirname(p))  # <prefix>/bin/gcc
            if prefix not in ("", "/") and not any(prefix == s or prefix.startswith(s + "/") for s in SYSTEM_EXEC):
                if prefix not in found:
                    found.append(prefix)
    return found


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


# --- a judge child's confinement ------------------------------------------------------------

@dataclass(frozen=True)
class ChildSandbox:
    """One child's confinement, decided by its worker before the fork."""

    level: str = "auto"
    scratch: str = ""                  # the child's own directory: TMPDIR, HOME, its caches
    write: tuple[str, ...] = ()        # also writable: its side's Triton cache
    read: tuple[str, ...] = ()         # the task's files (dropped for the candidate at its load)
    netns: bool = False                # an empty network namespace (the candidate's)
    pidns: bool = True                 # a PID namespace of its own: nothing it starts outlives it
    data_bytes: int | None = None      # RLIMIT_DATA (private writable memory of the process)
    nproc: int | None = None           # RLIMIT_NPROC (not enforced for root)
    max_written_bytes: int = 2 << 30   # watched by its worker (worker/limits.py): the kernel cannot
    base: landlock.Policy | None = None  # the worker's base policy (Python paths, system, devices)

    @property
    def on(self) -> bool:
        return self.level != "off" and bool(self.scratch)


def candidate_data_limit() -> int | None:
    """RLIMIT_DATA for a candidate: half of this machine's memory. A runaway allocation fails in
    the candidate (MemoryError) before it can take the host; CUDA's address reservations are not
    writable private memory, so they do not count. None where /proc/meminfo cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return None


# Processes a candidate may start beyond those its user already runs (RLIMIT_NPROC counts every
# process of the real uid). Triton's compiler and a few helpers need a handful.
EXTRA_PROCESSES = 256


def process_limit() -> int | None:
    """RLIMIT_NPROC for a child: this user's processes now plus `EXTRA_PROCESSES`. None as root,
    whom the kernel does not hold to it (a fork bomb is then bounded only by the verdict's end)."""
    uid = os.getuid()
    if uid == 0:
        return None
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                count += os.stat(f"/proc/{entry}").st_uid == uid
            except OSError:
                pass
    return count + EXTRA_PROCESSES


def base_policy() -> landlock.Policy:
    """Everything a child needs whatever its task: built once in the worker (python_paths looks
    at sys.modules and sysconfig; the forked child inherits the result)."""
    return torch_policy(scratch="", shm=True)


def _policy(box: ChildSandbox) -> landlock.Policy:
    """The file size limit is the child's own (`procs.limit_file_size`, set before)."""
    base = box.base or base_policy()
    write = [p for p in (box.scratch, *box.write, *base.write) if p]
    return replace(base, read=[*base.read, *box.read], write=write, netns=box.netns, pidns=box.pidns,
                   nproc=box.nproc,
                   data=box.data_bytes, core=0)


@dataclass
class Record:
    """What a child's confinement is: the verdict's `sandbox` field."""

    level: str
    layers: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    summary: str = ""
    # what confining the child took (sent with its description, before any foreign code ran)
    setup_ms: float = 0.0

    @property
    def complete(self) -> bool:
        return all(layer in self.layers for layer in REQUIRED_LAYERS)

    def as_dict(self) -> dict:
        return {"level": self.level, "layers": self.layers, "missing": self.missing,
                "warnings": self.warnings, "summary": self.summary, "complete": self.complete,
                "setup_ms": round(self.setup_ms, 3)}


def _record(level: str, applied: landlock.Applied) -> Record:
    return Record(level=level, layers=applied.layers, missing=list(applied.missing),
                  warnings=list(applied.warnings), summary=applied.summary())


def enter(box: ChildSandbox) -> Record:
    """Confine this freshly forked child, while it has one thread. Never raises: what did not take effect is
    in the record, which the child sends its worker with its description."""
    if not box.on:
        return Record(level="off", summary="sandbox off: this child is not confined")
    started = time.perf_counter()
    use_scratch(box.scratch)
    record = _record(box.level, landlock.apply(_policy(box)))
    record.setup_ms = (time.perf_counter() - started) * 1000
    if box.nproc is None and os.getuid() == 0:
        record.warnings.append("process count not limited (root: RLIMIT_NPROC does not bind)")
    return record


def keep_source_path(scratch: str, submitted: str) -> str:
    """Where a confined candidate keeps its source: its scratch, under the submitted file's name."""
    return os.path.join(scratch, "candidate", os.path.basename(submitted) or "candidate.py")


def keep_source(box: ChildSandbox, name: str, source: bytes) -> str:
    """The candidate's source, as its worker sent it, written into its scratch as `name`."""
    path = keep_source_path(box.scratch, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(source)
    return path
