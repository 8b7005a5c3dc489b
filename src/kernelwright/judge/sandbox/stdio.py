"""Setup that every process running a side's code does first, a judge child (`child`) and the
profiled process of a full profile (`profile_main`): its output into its own log, and its own
Triton cache."""

from __future__ import annotations

import os
import sys


def redirect_stdio(log_path: str) -> None:
    """Stdout and stderr (and whatever the code it loads prints) into the log at `log_path`,
    stdin from /dev/null."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


def use_triton_cache(path: str | None) -> None:
    """Compile into (and load from) this side's own Triton cache (and torch.compile's): set
    before anything here compiles. Triton 3.4+ reads TRITON_CACHE_DIR through `triton.knobs` at each use unless a value
    was set on the knob, so the knob is set too; older versions read the variable at each use."""
    if not path:
        return
    os.environ["TRITON_CACHE_DIR"] = path
    # torch.compile's cache too (by default one per user in /tmp, shared by both sides)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(path, "inductor")
    try:
        from triton import knobs

        knobs.cache.dir = path
    except Exception:  # noqa: BLE001 - no knobs (Triton < 3.4): the variable is what it reads
        pass
