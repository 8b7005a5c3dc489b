"""Numerically hostile hidden cases: the vocabulary, which tasks must have them, and the checks.

A task is *numerically sensitive* when one of its tags is in `REQUIRED_BY_TAG` (softmax, attention's
online softmax, normalization, scans, quantization, activations), or when it declares
`numerics = (...)` itself. Such a task must have, for every kind it requires (the union of its
tags' kinds and its own `numerics`), at least one **hidden** case marked
`Case(..., hostile="KIND")` (or `hostile="KIND+OTHER"` for a case that is several at once);
`make_inputs` reads `case.get("hostile")` and the other case parameters to build such inputs.

Two checks, both raising `TaskFileError` (see docs/tasks.md, "Numerically hostile cases"):

* `coverage_problems(...)` (every load; no code of the task runs): kinds are known, and every
  required kind has a hidden case marked with it;
* `evidence_problems(task)` (with the degeneracy check, on the CPU): the inputs that
  `make_inputs` builds for each marked case (seed 0) really show the kind, e.g. a
  "large-magnitude" case has an input with |x| >= 100, a "neg-inf-mask" case has -inf entries but
  no row made only of -inf. The evidence is a floor, not a proof that the case is hard.
"""

from __future__ import annotations

import difflib
from typing import Any, Iterable, Sequence

import torch

from .model import TaskFileError
from .validate import make_inputs

# kind -> what its inputs must show (the evidence check), in words for the messages and docs
KINDS: dict[str, str] = {
    "large-magnitude": "an input with |x| >= 100 (past float32 exp overflow at 88.7)",
    "all-negative": "an input row (last dimension, at least 2 entries) whose entries are all < 0",
    "constant-rows": "an input row (at least 2 entries) whose entries are all equal",
    "neg-inf-mask": "an input with -inf entries, but no row made only of -inf",
    "zero-rows": "an input row that is all zeros (for a 1-D per-row input such as a scale, a zero entry)",
    "long-rows": "an input whose last dimension is at least 65536",
    "odd-sizes": "an input with an odd dimension (1 counts)",
    "non-contiguous": "an input tensor that is not contiguous",
}
LARGE_MAGNITUDE = 100.0
LONG_ROW = 65536

# tag -> the hostile kinds a task with that tag must have hidden cases for
REQUIRED_BY_TAG: dict[str, tuple[str, ...]] = {
    "softmax": ("large-magnitude", "all-negative", "constant-rows", "neg-inf-mask", "odd-sizes"),
    "online-softmax": ("large-magnitude", "odd-sizes"),
    "normalization": ("large-magnitude", "constant-rows", "odd-sizes"),
    "scan": ("long-rows", "odd-sizes"),
    "quantization": ("zero-rows", "odd-sizes"),
    "activation": ("large-magnitude", "odd-sizes"),
    "numerics": (),  # a generic "this op is sensitive" tag: at least one hostile hidden case of any kind
}


def case_kinds(case: Any) -> tuple[str, ...]:
    """The hostile kinds a case is marked with: `hostile="kind"` or `hostile="kind+other"` (a tuple of
    kinds works too, but its default label reads "kindxother")."""
    value = case.get("hostile") if hasattr(case, "get") else None
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split("+"))
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return (repr(value),)  # reported as an unknown kind


def _unknown(kind: str) -> str:
    close = difflib.get_close_matches(kind, list(KINDS), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown hostile kind {kind!r}{hint}; known kinds: {', '.join(KINDS)}"


def required_kinds(tags: Iterable[str], numerics: Iterable[str]) -> tuple[list[str], list[str]]:
    """(required kinds in a stable order, the tags that made the task sensitive)."""
    tags = list(tags)
    sensitive_tags = [t for t in tags if t in REQUIRED_BY_TAG]
    kinds: list[str] = []
    for tag in sensitive_tags:
        kinds += [k for k in REQUIRED_BY_TAG[tag] if k not in kinds]
    kinds += [k for k in numerics if k not in kinds]
    return kinds, sensitive_tags


def coverage_problems(tags: Sequence[str], numerics: Sequence[str] | None, visible: Sequence[Any],
                      hidden: Sequence[Any]) -> list[str]:
    """What is missing for the task's declared or tag-implied sensitivity (empty: all covered)."""
    problems: list[str] = []
    declared = list(numerics or ())
    for kind in declared:
        if kind not in KINDS:
            problems.append("numerics: " + _unknown(kind))
    for case in list(visible) + list(hidden):
        for kind in case_kinds(case):
            if kind not in KINDS:
                problems.append(f"case {case.label!r}: " + _unknown(kind))
    if problems:
        return problems
    kinds, sensitive_tags = required_kinds(tags, declared)
    if not kinds and not sensitive_tags:
        return []
    covered = {k for case in hidden for k in case_kinds(case)}
    why = (f"tags {', '.join(repr(t) for t in sensitive_tags)}" if sensitive_tags else "") + \
          (" and " if sensitive_tags and declared else "") + ("its numerics declaration" if declared else "")
    missing = [k for k in kinds if k not in covered]
    if missing:
        examples = "; ".join(f'Case(..., hostile="{k}") with {KINDS[k]}' for k in missing)
        problems.append(f"numerically sensitive ({why}) but no hidden case is marked for: {', '.join(missing)}. "
                        f"Add hidden cases such as {examples}, built by make_inputs from the case's "
                        "parameters (see docs/tasks.md, 'Numerically hostile cases')")
    elif not covered:
        problems.append(f"numerically sensitive ({why}) but no hidden case is marked hostile: add at least one "
                        'hidden Case(..., hostile="KIND") (see docs/tasks.md, \'Numerically hostile cases\')')
    return problems  # a visible case may be marked too, but only hidden ones count


# -- evidence: the inputs of a marked case show its kind --------------------------------------

def _tensors(args: Sequence[Any]) -> list[torch.Tensor]:
    return [a for a in args if isinstance(a, torch.Tensor)]


def _rows(t: torch.Tensor) -> torch.Tensor:
    t = t.detach().to("cpu")
    if t.dim() == 0:
        return t.reshape(1, 1)
    return t.reshape(-1, t.shape[-1]) if t.shape[-1] > 0 else t.reshape(0, 0)


def _shows(kind: str, tensors: list[torch.Tensor]) -> bool:
    floats = [t for t in tensors if t.is_floating_point()]
    if kind == "large-magnitude":
        return any(t.numel() and (t.double().abs().nan_to_num(0.0, 0.0, 0.0).max() >= LARGE_MAGNITUDE) for t in floats)
    if kind == "all-negative":
        return any(t.dim() >= 1 and t.shape[-1] >= 2 and bool((_rows(t).double() < 0).all(dim=-1).any())
                   for t in floats)
    if kind == "constant-rows":
        for t in floats:
            if t.dim() >= 1 and t.shape[-1] >= 2 and t.numel():
                r = _rows(t).double()
                if bool((torch.isfinite(r).all(dim=-1) & (r == r[:, :1]).all(dim=-1)).any()):
                    return True
        return False
    if kind == "neg-inf-mask":
        with_inf = [t for t in floats if t.numel() and bool(torch.isneginf(t).any())]
        return bool(with_inf) and not any(bool(torch.isneginf(_rows(t)).all(dim=-1).any()) for t in with_inf)
    if kind == "zero-rows":
        for t in tensors:
            if not t.numel():
                continue
            if t.dim() <= 1:
                if bool((t.detach().cpu() == 0).any()):
                    return True
            elif bool((_rows(t) == 0).all(dim=-1).any()):
                return True
        return False
    if kind == "long-rows":
        return any(t.dim() >= 1 and t.shape[-1] >= LONG_ROW for t in tensors)
    if kind == "odd-sizes":
        return any(d % 2 == 1 for t in tensors for d in t.shape)
    if kind == "non-contiguous":
        return any(not t.is_contiguous() for t in tensors)
    return False


def evidence_problems(task: Any, seed: int = 0) -> list[str]:
    """Marked hidden cases whose inputs (built on the CPU with `seed`) do not show their kind."""

    problems = []
    for case in task.hidden_cases:
        kinds = [k for k in case_kinds(case) if k in KINDS]
        if not kinds:
            continue
        args = make_inputs(task, case, seed)
        tensors = _tensors(args)
        for kind in kinds:
            if not _shows(kind, tensors):
                problems.append(f"hidden case {case.label!r} is marked {kind!r} but its inputs do not show it: "
                                f"expected {KINDS[kind]}")
    return problems


# -- helpers for task files' make_inputs ------------------------------------------------------

def hostile_rows(x: torch.Tensor, kinds: Any, gen: torch.Generator, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Reshape the rows (last dimension) of a float32 tensor `x` for structural hostile kinds.

    `kinds` is `case.get("hostile")` (a kind, a tuple of kinds, or None). Handled here:
      constant-rows  every third row (from row 0) holds one value: a dyadic k/8 in [-4, 4], so
                     that sums of it are exact and a two-pass mean gives exactly that value;
                     rows 1, 4, ... (every third, from row 1) are all zeros when the tensor has
                     at least 3 rows
      neg-inf-mask   about a quarter of the entries are -inf; row 0 keeps a single finite entry,
                     row 1 (if any) has its first half -inf; never a whole row; the columns in
                     `keep` (one per row, e.g. a target class) stay finite
      non-contiguous returns a column slice of a wider tensor (same values, row stride N + 37)
    Magnitude and sign (large-magnitude, all-negative) come from the task's own scale/shift
    parameters. Other kinds leave x as it is. Draws from `gen` only for the kinds present.
    """
    kinds = tuple(kinds.split("+")) if isinstance(kinds, str) else tuple(kinds or ())
    if not kinds or x.dim() == 0:
        return x
    shape = x.shape
    rows = x.reshape(-1, shape[-1]).clone()
    m, n = rows.shape
    if "constant-rows" in kinds and n:
        picks = torch.randint(-32, 33, (m, 1), generator=gen, device=gen.device).to(rows.dtype) / 8
        const = torch.arange(m, device=rows.device) % 3 == 0
        rows = torch.where(const[:, None], picks.expand(m, n), rows)
        if m >= 3:
            rows[1::3] = 0.0
    if "neg-inf-mask" in kinds and n >= 2:
        mask = torch.rand((m, n), generator=gen, device=gen.device) < 0.25
        if n >= 2:
            mask[0] = True
        if m >= 2:
            mask[1, : n // 2] = True
        finite = keep.reshape(-1, 1) if keep is not None else torch.randint(0, n, (m, 1), generator=gen,
                                                                              device=gen.device)
        mask.scatter_(1, finite.clamp(0, n - 1), False)  # at least one finite entry per row
        rows = rows.masked_fill(mask, float("-inf"))
    rows = rows.reshape(shape)
    if "non-contiguous" in kinds:
        wide = torch.zeros(shape[:-1] + (shape[-1] + 37,), dtype=rows.dtype, device=rows.device)
        wide[..., : shape[-1]] = rows
        rows = wide[..., : shape[-1]]
    return rows


def hostile_cast(x: torch.Tensor, dtype: Any) -> torch.Tensor:
    """`x.to(dtype)` that keeps a non-contiguous view non-contiguous (`.to` of a view may copy it
    to a dense tensor only when the dtype changes; then the slice is taken again)."""
    target = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if x.is_contiguous() or x.dtype == target:
        return x.to(target)
    n = x.shape[-1]
    wide = torch.zeros(x.shape[:-1] + (n + 37,), dtype=target, device=x.device)
    wide[..., :n] = x.to(target)
    return wide[..., :n]


def check_hostile_evidence(task: Any) -> None:
    """Raise `TaskFileError(path, "hostile cases: ...")` if a hidden case marked `hostile=KIND`
    builds inputs (on the CPU, seed 0) that do not show that kind (see `kernelwright.tasks.hostile`)."""
    try:
        problems = evidence_problems(task)
    except TaskFileError:
        raise
    except Exception as exc:  # the task's own make_inputs failed on a hostile case
        raise TaskFileError(task.source_path, f"make_inputs failed on a hostile case: {type(exc).__name__}: {exc}") from exc
    if problems:
        raise TaskFileError(task.source_path, "hostile cases: " + "; ".join(problems))


__all__ = ["KINDS", "LARGE_MAGNITUDE", "LONG_ROW", "REQUIRED_BY_TAG", "case_kinds", "check_hostile_evidence", "coverage_problems",
           "evidence_problems", "hostile_cast", "hostile_rows", "required_kinds"]
