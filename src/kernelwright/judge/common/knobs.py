"""Numbers the judge reads from `KERNELWRIGHT_*` environment variables (knobs for measuring what a
setting costs, e.g. `KERNELWRIGHT_TUNING_MS=5,25`). One parser, so that every knob fails the same
way: a value that is not understood stops the judge with a message naming the variable, the range
and an example, instead of silently falling back to the default."""

from __future__ import annotations

import os


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
