"""KERNELWRIGHT_TRACE=1: one line per judged item on stderr, so a slow task shows where its time
goes before its verdict exists (a run cut short by a time limit leaves no stage_seconds)."""

from __future__ import annotations

import os
import sys
import time

TRACE = os.environ.get("KERNELWRIGHT_TRACE", "") not in ("", "0")


def trace(task: str, what: str) -> None:
    if TRACE:
        print(f"[kernelwright worker {os.getpid()} {time.strftime('%H:%M:%S')}] {task}: {what}",
              file=sys.stderr, flush=True)
