"""Derived hidden cases: a problem's own inputs drawn again from other distributions.

A suite adapter's problem comes with one input distribution (KernelBench's ReLU draws `torch.rand`,
non-negative), and a wrong kernel can be right on all of it: a ReLU that returns its input passes.
The built-in tasks carry hand-written hostile cases (`tasks.hostile`); an adapter cannot write
them per problem, so it adds `derived_cases()` to its hidden cases and every one of them is the
problem's own inputs (same shapes, dtypes, integer and index tensors), with each floating-point
tensor transformed by each judge child (`judge/sandbox/harness.bound_case`, after the adapter's
`bind`; see docs/tasks.md, "Derived hidden cases"):

  signed           every entry's sign drawn at random (magnitudes kept, so the scale the problem
                   and its tolerance were made for is kept too)
  large-magnitude  every entry times `LARGE_SCALE` (signs kept, so a reference defined only for
                   positive inputs, a log or a sqrt, is still defined there)

The reference runs first, on the trusted side: where its outputs hold NaN or inf, or it raises,
the problem is not defined on those inputs and the case is dropped, recorded in the verdict (a
skipped case and a flag), never failed. A derived case runs under the first seed only (its worth is
the distribution, not one more draw of it), and its atol is scaled by the reference output's mean
magnitude (at least 1): a sign flip turns a sum of positive terms into a cancelling one, whose
rounding error is that of its terms, not of its small result.
"""

from __future__ import annotations

from typing import Any

from .hostile import LARGE_MAGNITUDE
from .model import Case

LARGE_SCALE = LARGE_MAGNITUDE  # 100: the hostile-case floor of "large magnitude" (past exp's overflow)
KINDS: dict[str, str] = {
    "signed": "every floating-point input entry with a random sign (magnitudes kept)",
    "large-magnitude": f"every floating-point input entry times {LARGE_SCALE:g} (signs kept)",
}
DROPPED = "hidden case dropped"
# A derived case's signs come from the item's seed, mixed so that they are not the stream the
# problem's own inputs were drawn from under that seed.
SIGN_SEED_MIX = 0x5EED_51C5


class NothingToDerive(ValueError):
    """The problem's inputs hold no floating-point tensor: a derived case would be the same case."""


def derived_cases(what: str) -> list[Case]:
    """The derived hidden cases of an adapter problem whose inputs are `what` (for the labels)."""
    return [Case("any", label=f"{what}, {KINDS[kind]}", derived=kind) for kind in KINDS]


def derived_kind(case: Any) -> str | None:
    value = case.get("derived") if hasattr(case, "get") else None
    return value if value in KINDS else None


def derive_inputs(args: tuple, kind: str, gen) -> tuple:
    """`args` with each floating-point tensor of at least one dimension transformed by `kind`
    (nested lists and tuples too); everything else as it is. A 0-d tensor is left alone: it is a
    parameter (a scale, an eps) more often than data. `gen` is the case's generator (its initial
    seed picks the signs); raises NothingToDerive when nothing was transformed."""
    import torch

    if kind not in KINDS:
        raise ValueError(f"unknown derived case kind {kind!r}; known: {', '.join(KINDS)}")
    seed = (int(gen.initial_seed()) ^ SIGN_SEED_MIX) % (2**63)
    signs = type(gen)(device=gen.device)  # the judge's own Generator class (not a name foreign code can rebind)
    signs.manual_seed(seed)
    changed = 0

    def walk(value: Any) -> Any:
        nonlocal changed
        if isinstance(value, torch.Tensor):
            if not value.is_floating_point() or value.dim() == 0 or value.numel() == 0:
                return value
            changed += 1
            return _transformed(torch, value, kind, signs)
        if isinstance(value, (list, tuple)):
            return type(value)(walk(v) for v in value)
        return value

    out = tuple(walk(a) for a in args)
    if not changed:
        raise NothingToDerive("the problem's inputs hold no floating-point tensor to transform")
    return out


SIGN_CHUNK = 1 << 24  # entries whose signs are drawn at once: 16 MiB of int8 however large the input


def _transformed(torch, x, kind: str, signs) -> Any:
    # A copy that keeps x's strides (clone's preserve_format): a derived case keeps the layout.
    # The copy is the only memory it adds (the judge's budget holds the inputs twice per child).
    y = x.detach().clone()
    if kind == "large-magnitude":
        return y.mul_(LARGE_SCALE)
    if not y.is_contiguous():  # a strided copy is flipped whole
        _flip_signs(torch, y, signs)
        return y
    flat = y.view(-1)
    for start in range(0, flat.numel(), SIGN_CHUNK):
        _flip_signs(torch, flat[start:start + SIGN_CHUNK], signs)
    return y


def _flip_signs(torch, part, signs) -> None:
    bits = torch.randint(0, 2, tuple(part.shape), generator=signs, device=signs.device, dtype=torch.int8)
    part.mul_(bits.mul_(2).sub_(1).to(part.device))


def nonfinite_reason(outputs: list, names: list[str] | None = None) -> str | None:
    """Why a derived case is dropped when the reference's `outputs` hold NaN or inf (None if not)."""
    import torch

    for i, t in enumerate(outputs):
        if not isinstance(t, torch.Tensor) or not (t.is_floating_point() or t.is_complex()) or not t.numel():
            continue
        finite = torch.isfinite(t)
        if bool(finite.all()):
            continue
        # (named as the judge's failures name outputs: judge/common/verdict.output_name)
        what = names[i] if names and i < len(names) and names[i] else "output" if len(outputs) == 1 else f"output {i}"
        what_bad = "NaN" if bool(torch.isnan(t).any()) else "inf"
        return f"{DROPPED}: the reference is not defined there ({what_bad} in {what})"
    return None


def raised_reason(exc: BaseException) -> str:
    if isinstance(exc, NothingToDerive):
        return f"{DROPPED}: {exc}"
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"{DROPPED}: the reference is not defined there (it raised {type(exc).__name__}{': ' + text if text else ''})"


def mean_magnitude(t) -> float:
    """Mean |t| of a floating-point tensor, in float64 slices (outputs can be gigabytes)."""
    import torch

    flat, total, chunk = t.reshape(-1), 0.0, 1 << 20
    for start in range(0, flat.numel(), chunk):
        total += float(flat[start:start + chunk].to(torch.float64).abs().sum())
    return total / max(flat.numel(), 1)


def atol_scales(references: list) -> list[float]:
    """Per output, what a derived case's atol is multiplied by: its mean magnitude, at least 1."""
    import torch

    return [max(1.0, mean_magnitude(r)) if isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel()
            else 1.0 for r in references]


__all__ = ["DROPPED", "KINDS", "LARGE_SCALE", "NothingToDerive", "atol_scales", "derive_inputs", "derived_cases",
           "derived_kind", "nonfinite_reason", "raised_reason"]
