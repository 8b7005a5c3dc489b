"""Sanity checks on a task's own definition, run on the CPU before any kernel is judged.

A task whose reference output does not depend on its inputs (or is constant, all zero, or not
finite) cannot tell a correct kernel from a wrong one: `return torch.zeros_like(x)` or a kernel
that never reads its input would pass. `check_not_degenerate` rejects such tasks by running the
reference on the smallest case (and the next visible case, if any) under two input seeds.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from .model import Case, Task, TaskFileError

# Seeds for the two runs that must give different outputs; any two distinct seeds would do.
DEGENERACY_SEEDS = (0, 1)
# An output whose spread is below this fraction of its magnitude counts as constant. Real
# outputs (even a softmax over a long row) vary by far more; float64 round-off is far less.
CONSTANT_RTOL = 1e-9


def as_tuple(result: Any) -> tuple:
    """The entry point may return one tensor or a tuple/list of them; always see a tuple."""
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def upcast_inputs(args: Sequence[Any]) -> tuple:
    """Floating-point tensors to float64; integer tensors and Python scalars unchanged.

    This is how the reference is evaluated when `task.reference_in_float64` is set: the exact
    answer for the given (already rounded) inputs, against which every kernel's rounding is judged.
    """
    return tuple(a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                 for a in args)


def make_inputs(task: Task, case: Case, seed: int, device: str | torch.device = "cpu") -> tuple:
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    args = task.make_inputs(case, gen)
    if not isinstance(args, tuple):
        raise TaskFileError(task.source_path, f"make_inputs must return a tuple of arguments, got {type(args).__name__}")
    return args


def run_reference(task: Task, args: Sequence[Any], float64: bool | None = None) -> tuple:
    """The reference's outputs as a tuple, in float64 if the task is judged that way."""
    if float64 is None:
        float64 = task.reference_in_float64
    with torch.no_grad():
        return as_tuple(task.reference(*(upcast_inputs(args) if float64 else tuple(args))))


def _describe(index: int, n_outputs: int) -> str:
    return f"output {index}" if n_outputs > 1 else "the output"


def _problems_in(outputs: tuple, case: Case) -> list[str]:
    problems = []
    n = len(outputs)
    for i, out in enumerate(outputs):
        what = f"{_describe(i, n)} on case {case.label!r}"
        if not isinstance(out, torch.Tensor):
            problems.append(f"{what} is a {type(out).__name__}, not a tensor")
            continue
        if out.numel() == 0:
            problems.append(f"{what} is empty")
            continue
        values = out.detach().to("cpu")
        if values.dtype == torch.bool:
            values = values.to(torch.int64)
        if values.is_floating_point() and not torch.isfinite(values).all():
            bad = (~torch.isfinite(values)).sum().item()
            problems.append(f"{what} has {bad} NaN/inf element(s)")
            continue
        values = values.to(torch.float64)
        if not values.any():
            problems.append(f"{what} is all zeros")
        elif values.numel() > 1:
            spread = (values.max() - values.min()).item()
            scale = values.abs().max().item()
            if spread <= CONSTANT_RTOL * scale:
                problems.append(f"{what} is constant ({values.flatten()[0].item():g} everywhere)")
    return problems


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(
        isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape
        and torch.equal(x.cpu(), y.cpu())
        for x, y in zip(a, b)
    )


def degeneracy_problems(task: Task, cases: Sequence[Case] | None = None) -> list[str]:
    """Everything degenerate about the task's reference on `cases` (default: first two visible)."""
    if cases is None:
        cases = task.visible_cases[:2]
    problems: list[str] = []
    for case in cases:
        try:
            runs = [run_reference(task, make_inputs(task, case, seed)) for seed in DEGENERACY_SEEDS]
        except TaskFileError:
            raise
        except Exception as exc:  # the task's own code failed: report it as a task-file problem
            raise TaskFileError(task.source_path,
                                f"reference failed on case {case.label!r}: {type(exc).__name__}: {exc}") from exc
        problems += _problems_in(runs[0], case)
        if _same(runs[0], runs[1]):
            problems.append(f"outputs on case {case.label!r} are identical for input seeds "
                            f"{DEGENERACY_SEEDS[0]} and {DEGENERACY_SEEDS[1]}: they do not depend on the inputs")
    return problems


def check_not_degenerate(task: Task, cases: Sequence[Case] | None = None) -> None:
    """Raise `TaskFileError(path, "degenerate: ...")` if the task cannot discriminate kernels.

    Runs on the CPU; the smallest case (the first visible one) should be small enough for that.
    """
    problems = degeneracy_problems(task, cases)
    if problems:
        raise TaskFileError(task.source_path, "degenerate: " + "; ".join(problems))


__all__ = ["as_tuple", "check_not_degenerate", "degeneracy_problems", "make_inputs", "run_reference",
           "upcast_inputs"]
