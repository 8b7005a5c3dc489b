"""The judge's `KERNELWRIGHT_*` environment knobs: numbers for measuring what a setting costs
(`KERNELWRIGHT_TUNING_MS=5,25`), read by one parser so that every knob fails the same way (a value
that is not understood stops the judge with a message naming the variable, the range and an
example, instead of silently falling back to the default); and `KERNELWRIGHT_TRACE=1`, one line
per judged item on stderr, so a slow task shows where its time goes before its verdict exists (a
run cut short by a time limit leaves no stage_seconds)."""

from __future__ import annotations

import os
import sys
import time


def env_numbers(name: str, default: tuple[float, ...], low: float, high: float, *, whole: bool = False,
                low_open: bool = False, meaning: str = "") -> tuple[float, ...]:
    """The comma-separated numbers in `name` (as many as `default` has), each in [low, high]
    (`low_open`: above low), whole numbers when `whole`; `default` when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    parts = raw.split(",")
    try:
        values = tuple(int(p) if whole else float(p) for p in parts)
    except ValueError:
        values = ()
    fits = len(values) == len(default) and all((low < v if low_open else low <= v) and v <= high for v in values)
    if not fits:
        kind = "whole number" if whole else "number"
        count = f"{len(default)} comma-separated {kind}s" if len(default) > 1 else f"a {kind}"
        bound = f"above {low:g}" if low_open else f"from {low:g}"
        example = ",".join(f"{v:g}" for v in default)
        raise ValueError(f"{name} must be {count} {bound} to {high:g}{meaning} (e.g. {example}), got {raw!r}")
    return values


TRACE = os.environ.get("KERNELWRIGHT_TRACE", "") not in ("", "0")


def trace(task: str, what: str) -> None:
    if TRACE:
        print(f"[kernelwright worker {os.getpid()} {time.strftime('%H:%M:%S')}] {task}: {what}",
              file=sys.stderr, flush=True)
