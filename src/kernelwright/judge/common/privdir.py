"""The judge's private directory: its GPU lock files, the sources `JudgePool.submit` writes, and
the Triton caches of its children live here, never in world-writable /tmp.

Where: `KERNELWRIGHT_JUDGE_DIR` if set (the pool sets it for its workers, so that every process
of one run agrees); else `<tmp>/kernelwright-<uid>` (the way tmux and ssh-agent keep their
sockets: local, per user, and every run of this user finds the same GPU lock files); else, when
another user already took that name, `~/.cache/kernelwright/judge-<uid>`.
Every directory on the way that we create is made 0700; the final one must be owned by this user
and is repaired to 0700 if group or others could write to it; one owned by another user, or a
symlink, is refused.

What this protects against: other users of the machine (they can no longer hold, replace or
symlink the lock files, nor plant files in our Triton caches). It does not protect against a
process of the same user, such as a candidate: it can write anywhere we can.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

ENV = "KERNELWRIGHT_JUDGE_DIR"


class PrivateDirError(RuntimeError):
    """The judge's private directory exists but is not safe to use (another owner, a symlink)."""


def ensure_private(path: str | os.PathLike) -> Path:
    """Create `path` (mode 0700, parents as needed) or check an existing one: a directory, not a
    symlink, owned by this user; group/other permissions are removed. Returns the path."""
    path = Path(path)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
    except FileExistsError:
        pass  # a file or a dangling symlink: refused below
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise PrivateDirError(f"{path} is not a directory (a symlink or a file): refusing to use it")
    if info.st_uid != os.getuid():
        raise PrivateDirError(f"{path} belongs to uid {info.st_uid}, not to this user ({os.getuid()}): "
                              f"refusing to use it (set {ENV} to a directory of your own)")
    if stat.S_IMODE(info.st_mode) & 0o077:
        os.chmod(path, 0o700)  # ours, but others could read or write it: repaired
    return path


def private_dir() -> Path:
    """The judge's private directory, created (or checked and repaired) now."""
    chosen = os.environ.get(ENV)
    if chosen:
        return ensure_private(chosen)
    try:
        return ensure_private(Path(tempfile.gettempdir()) / f"kernelwright-{os.getuid()}")
    except (PrivateDirError, OSError):
        # another user took the name first (or /tmp is unusable): a directory in our home, which
        # nobody else can create
        return ensure_private(Path.home() / ".cache" / "kernelwright" / f"judge-{os.getuid()}")


def lock_base() -> str:
    """This GPU's lock files, in the judge's private directory (0700, owned by this user: see
    `ensure_private`), not in world-writable /tmp where another user could hold them or plant symlinks.
    Every judge process of this user agrees on it (the pool passes it to its workers)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("HIP_VISIBLE_DEVICES") or "0"
    return os.path.join(private_dir(), f"gpu-{visible.replace(',', '_').replace(os.sep, '_')}")
