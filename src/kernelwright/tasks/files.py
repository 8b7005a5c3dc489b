"""Where a task's files are, for processes that may read only those (confined judge children):
what reloading a task from its `Task.ref` reads (`ref_files`), and the suites' shared cache of
derived data (`cache_root`), which the coordinator writes and the judge's children read."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Set by a judge worker for its children (which point their own temporary directory elsewhere):
# where the suites' shared cache is, so that they read the one the coordinator wrote.
CACHE_ROOT_ENV = "KERNELWRIGHT_SUITE_CACHE"


def cache_root() -> Path:
    """The suites' cache of derived data (perf labels, enumerated cases), shared by every process
    of the machine: one directory, so that a confined judge child can be let read just it."""
    return Path(os.environ.get(CACHE_ROOT_ENV) or Path(tempfile.gettempdir()) / "kernelwright-suite-cache")


def ref_files(ref: str) -> list[str]:
    """What a process must be able to read to reload a task from its ref: the benchmark checkout
    of an adapter's ref ("<adapter>:<root>::<name>", see `Task.ref`), or a task file's directory
    (a task file may read files beside it); and the suites' shared cache. A shrunk task's ref
    (`shrunk:F:<ref>`, tasks/shrink.py) reads what its own ref reads."""
    from .shrink import split_ref

    ref = split_ref(ref)[1]
    prefix, sep, rest = ref.partition(":")
    if sep and "::" in rest and os.sep not in prefix:
        files = [rest.rpartition("::")[0]]
    else:
        files = [os.path.dirname(os.path.abspath(ref))]
    return [*files, str(cache_root())]
