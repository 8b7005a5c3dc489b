"""`--shrink F`: a task judged at smaller problem sizes, for smoke runs on small machines.

A KernelBench level-1 problem at its own size (a 4096 x 393216 float32 input) is
`problem_too_large` on a 24 GiB box. `--shrink F` (0 < F <= 1; eval, judge-suite, generate,
optimize, bench) scales the sizes each case makes so that its input and output bytes shrink to
about F of the original, and says so everywhere: the shrunk task's ref is `shrunk:F:<ref>` (every
process that reloads it, judge children included, judges the same shrunk sizes), every verdict
carries `shrink: F`, metrics.json and the tables say the run was shrunk and label its speedups.

Which sizes scale (docs/suites.md, "Shrunk problem sizes"):
- native tasks (built-in, task files, generate's own task): the perf cases' size parameters
  (`shape` and other int tuples, upper-case int parameters such as M, N, K, B, H, S, D); the
  correctness cases are small by design (odd sizes, 1x1, the hostile cases) and are kept.
- KernelBench: the problem file's module-level sizes (`batch_size = 4096`, `dim = 393216`, tuples
  of ints), measured with meta tensors (`kernelbench.shrunk_sizes`); sizes derived from them
  (`dim2 = dim * 2`) follow.
- GEAK and TritonBench-T: their sizes are written in test code (pytest parameters, calls), not
  data: `ShrinkUnsupported`, a usage error naming the suite.

Each size dimension of at least `MIN_DIM` is scaled by one factor f (fitted so that the bytes come
to at most F of the original, where the floors allow); smaller ones (kernel sizes, strides, a
reduction's dim, a batch of 4) are kept. A power of two stays a power of two and a multiple of 16
a multiple of 16 (block sizes, head dims and `tl.dot` need them), never below `MIN_DIM`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from .model import Case, Task

PREFIX = "shrunk"
MIN_DIM = 16


class ShrinkUnsupported(ValueError):
    """A task whose sizes kernelwright cannot scale (they are written in its test code)."""


def check_factor(value: float | None) -> float | None:
    """--shrink's value: None (off) or 0 < F <= 1 (ValueError otherwise). 1 is no shrink: None."""
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= 1):
        raise ValueError(f"--shrink must be a fraction F with 0 < F <= 1 (the problem bytes kept), got {value!r}")
    return None if value == 1 else float(value)


def shrunk_ref(ref: str, factor: float) -> str:
    return f"{PREFIX}:{factor!r}:{ref}"


def split_ref(ref: str) -> tuple[float | None, str]:
    """(F, the task's own ref) of a shrunk ref; (None, ref) for any other."""
    prefix, sep, rest = ref.partition(":")
    if prefix != PREFIX or not sep:
        return None, ref
    factor, _, inner = rest.partition(":")
    return float(factor), inner


def scale_dim(n: int, f: float) -> int:
    """One size dimension `n` scaled by `f` <= 1, keeping what kernels rely on (module docstring)."""
    if n < MIN_DIM or f >= 1:
        return n
    x = n * f
    if n & (n - 1) == 0:  # a power of two
        out = 2 ** round(math.log2(max(x, 1)))
    elif n % 16 == 0:
        out = 16 * round(x / 16)
    else:
        out = round(x)
    return min(n, max(MIN_DIM, out))


def scale_value(value: Any, f: float) -> Any:
    """An int or a tuple/list of ints with each dimension scaled; anything else as it is."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return scale_dim(value, f)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return type(value)(scale_dim(v, f) for v in value)
    return value


def fit_factor(factor: float, measure: Callable[[float], int | None]) -> float | None:
    """The per-dimension f in [F, 1] whose bytes `measure(f)` come nearest (in ratio) to F of the
    original (`measure(1.0)`): bisection in log space finds the step of the rounded sizes that
    crosses F, and the nearer side of it is taken; F itself where the floors keep the bytes above
    F. None when nothing can be measured."""
    full = measure(1.0)
    if not full:
        return None
    target = factor * full
    if (measure(factor) or 0) > target:
        return factor
    lo, hi = math.log(factor), 0.0
    for _ in range(24):
        mid = (lo + hi) / 2
        if (measure(math.exp(mid)) or 0) <= target:
            lo = mid
        else:
            hi = mid
    below, above = measure(math.exp(lo)) or 0, measure(math.exp(hi)) or 0
    if below and above and above / target < target / below:
        return math.exp(hi)
    return math.exp(lo)


def shrink_task(task: Task, factor: float | None) -> Task:
    """`task` at sizes shrunk by `factor` (None or 1: the task itself), with a reloadable
    `shrunk:F:` ref, `shrink` set and a note; ShrinkUnsupported where its sizes are not data."""
    factor = check_factor(factor)
    if factor is None or task.shrink is not None:
        return task
    if task.shrinker is not None:
        shrunk, note = task.shrinker(factor)
    elif task.bind is None and task.load_impl is None:
        shrunk, note = _shrink_native(task, factor)
    else:
        why = task.shrink_unsupported or "its sizes are written in its test code, not data kernelwright can scale"
        raise ShrinkUnsupported(f"--shrink: the {task.suite} task {task.name} cannot be shrunk: {why}; run it "
                                "without --shrink")
    return replace(shrunk, ref=shrunk_ref(task.ref, factor), shrink=factor,
                   notes=[*shrunk.notes, f"shrunk (--shrink {factor:g}): {note}"])


def load_shrunk(ref: str, load: Callable[[str], Task]) -> Task:
    """A task from its ref, shrunk when the ref says so (`registry.load_task_ref`)."""
    factor, inner = split_ref(ref)
    task = load(inner)
    return task if factor is None else shrink_task(task, factor)


# -- native tasks -------------------------------------------------------------------------------
def size_params(case: Case) -> dict[str, Any]:
    """A native case's size parameters: `shape` and int tuples, and upper-case int parameters."""
    def is_size(name: str, value: Any) -> bool:
        if isinstance(value, tuple):
            return bool(value) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        return isinstance(value, int) and not isinstance(value, bool) and name.isupper()

    return {k: v for k, v in case.params.items() if is_size(k, v)}


def case_bytes(task: Task, case: Case) -> int | None:
    """The bytes a case moves: its roofline cost where the task has one, else its tuples' entries
    times the element size (a measure to fit the factor against, not the judge's size check)."""
    if task.cost is not None:
        try:
            moved = int(task.cost(case).get("bytes", 0))
            if moved > 0:
                return moved
        except Exception:  # noqa: BLE001 - a cost model that cannot read a shrunk case: the fallback
            pass
    itemsize = {"float64": 8, "float32": 4, "int64": 8, "int32": 4}.get(case.dtype, 2)
    return sum(math.prod(v) for v in size_params(case).values() if isinstance(v, tuple)) * itemsize or None


def shrink_case(task: Task, case: Case, factor: float) -> Case:
    from .model import Case as CaseType, _default_label

    sizes = size_params(case)
    if not sizes:
        return case

    def at(f: float) -> CaseType:
        params = {k: (scale_value(v, f) if k in sizes else v) for k, v in case.params.items()}
        default = case.label == _default_label(case.dtype, case.params)
        return CaseType(case.dtype, label=None if default else f"{case.label} (shrunk)", **params)

    dims = sum(1 for v in sizes.values() for d in (v if isinstance(v, tuple) else (v,)) if d >= MIN_DIM)
    f = fit_factor(factor, lambda f: case_bytes(task, at(f))) or factor ** (1 / max(dims, 1))
    return at(f)


def _shrink_native(task: Task, factor: float) -> tuple[Task, str]:
    perf = [shrink_case(task, c, factor) for c in task.perf_cases]
    before = sum(case_bytes(task, c) or 0 for c in task.perf_cases)
    after = sum(case_bytes(task, c) or 0 for c in perf)
    kept = f" ({after / before:.3g} of the bytes)" if before else ""
    return (replace(task, perf_cases=perf),
            f"perf cases {', '.join(c.label for c in perf)}{kept}; correctness cases as written")
