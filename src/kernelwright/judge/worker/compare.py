"""Compare candidate outputs with reference outputs (trusted side, CPU, float64).

A mismatch report says where and by how much, because the reflector turns it into a fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..common.digests import bitwise_equal, identical  # noqa: F401 - compare's callers use them too
from ..common.verdict import output_name


@dataclass
class Mismatch:
    ok: bool
    reason: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    # a verdict.FailureKind value: wrong_values, wrong_shape_dtype, or unwritten_output (a
    # mismatching element whose every byte is the harness's 0xFF poison: never written)
    kind: str = ""


WRONG_VALUES, WRONG_SHAPE_DTYPE, UNWRITTEN_OUTPUT = "wrong_values", "wrong_shape_dtype", "unwritten_output"


def _poisoned(t: torch.Tensor) -> torch.Tensor:
    """Per element of the 1-D tensor `t`: are all its bytes 0xFF (the poison the candidate's
    outputs are filled with before each call)? Computed NaNs have other bits (0x7FC00000)."""
    size = t.element_size()
    raw = t.contiguous().view(torch.uint8).reshape(-1, size)
    return (raw == 0xFF).all(dim=1)


# Elements per slice of the fast check: small enough for float64 copies to stay in cache-sized
# pieces, large enough for torch's threads. (One pass of numpy temporaries over a 8192x8192 output
# took 11.5 s on two cores; this check takes 0.4 s.)
FAST_CHECK_CHUNK = 1 << 18


# float32 holds every value of these exactly, so one float32 subtraction, product and sum are off by
# a few units in the last place at most: a margin of 1e-6 makes a float32 "within" certain. What it
# cannot certify goes to float64. (1 GiB of fp16 that differs from its reference by rounding took
# 12 s in float64 on one core.)
_SINGLE_OK = (torch.float16, torch.bfloat16, torch.float32)
_SINGLE_MARGIN = 1.0 - 1e-6


def _surely_within(x: torch.Tensor, y: torch.Tensor, atol: float, rtol: float) -> bool:
    # max(|x - y| - allowed) <= 0, in arithmetic only (boolean tensor ops are several times
    # slower on CPU): a NaN anywhere, or an infinity in either, makes the max NaN or positive,
    # and such a slice goes to the float64 rule, which knows what equal infinities mean.
    x, y = x.to(torch.float32), y.to(torch.float32)
    allowed = y.abs().mul_(rtol).add_(atol).mul_(_SINGLE_MARGIN)
    return float(torch.sub(x, y).abs_().sub_(allowed).max()) <= 0.0


def within_tolerance(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """The same rule as `compare_tensor` (|out - ref| <= atol + rtol * |ref|, NaN only where the
    reference is NaN, infinities only where they match), answered yes or no without building a
    report: in float64 slices with torch's multithreaded kernels. The full report is built only
    for the outputs that fail."""
    if out.shape != ref.shape:
        return False
    o, r = out.reshape(-1), ref.reshape(-1)
    single = o.dtype in _SINGLE_OK and r.dtype in _SINGLE_OK
    for start in range(0, o.numel(), FAST_CHECK_CHUNK):
        oc, rc = o[start:start + FAST_CHECK_CHUNK], r[start:start + FAST_CHECK_CHUNK]
        if single:
            if _surely_within(oc, rc, atol, rtol):
                continue
        elif oc.dtype == rc.dtype and bitwise_equal(oc, rc):
            continue  # within any tolerance
        x, y = oc.to(torch.float64), rc.to(torch.float64)
        # (x and y may be the caller's own float64 tensors: nothing below writes to them)
        allowed = y.abs().mul_(rtol).add_(atol)
        near = torch.sub(x, y).abs_().le_(allowed).logical_and_(allowed.isfinite())  # an infinite reference allows nothing
        if bool(near.all()):
            continue
        same = (x == y).logical_or_(x.isnan().logical_and_(y.isnan()))  # equal infinities, NaN on both
        if not bool(near.logical_or_(same).all()):
            return False
    return True


def compare_tensor(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, what: str) -> Mismatch:
    """Elementwise |out - ref| <= atol + rtol * |ref|; NaN passes only where the reference is NaN."""
    if out.dtype == ref.dtype and identical([out], [ref]):
        # Bitwise equal values meet the rule (equal NaNs and infinities included) and take one
        # pass of memory comparison instead of float64 arithmetic: a 1 GiB output of ROCm's
        # rmsnorm_fwd, judged against itself, spent 14 s per case in the float64 check.
        return Mismatch(True)
    if not out.is_floating_point() and not ref.is_floating_point() and not out.is_complex() and not ref.is_complex():
        return _compare_exact(out, ref, what)
    if out.shape != ref.shape:
        return Mismatch(False, f"{what}: shape {list(out.shape)} differs from expected {list(ref.shape)}",
                        kind=WRONG_SHAPE_DTYPE)
    shape = list(out.shape)
    complex_parts = out.is_complex() or ref.is_complex()
    if out.is_complex() or ref.is_complex():
        # real and imaginary parts, each under the rule (a cast to float64 would drop the imaginary part)
        out, ref = (torch.view_as_real(t.to(torch.complex128)) for t in (out, ref))
        shape.append(2)
    elif within_tolerance(out, ref, atol, rtol):
        return Mismatch(True)
    if out.numel() == 0:
        return Mismatch(True)
    return _tolerance_report(out.reshape(-1), ref.reshape(-1), shape, atol, rtol, what, complex_parts)


@dataclass
class _Tally:
    """What the float64 report found so far, slice by slice."""
    bad: int = 0
    nan_where_finite: int = 0
    poisoned: int = 0
    first: int | None = None
    max_err: float | None = None


def _tally_slice(t: _Tally, o: torch.Tensor, r: torch.Tensor, start: int, atol: float, rtol: float,
                 complex_parts: bool) -> None:
    """Add one slice [start, start + FAST_CHECK_CHUNK) of the flattened outputs to the tally."""
    x = o[start:start + FAST_CHECK_CHUNK].to(torch.float64)
    y = r[start:start + FAST_CHECK_CHUNK].to(torch.float64)
    diff = torch.sub(x, y).abs_()
    bad = ~(diff <= y.abs().mul_(rtol).add_(atol))  # NaN differences count as bad
    x_nan, y_nan, y_inf = x.isnan(), y.isnan(), y.isinf()
    both_nan = x_nan & y_nan
    same_inf = x.isinf() & y_inf & (x.sign() == y.sign())
    bad &= ~(both_nan | same_inf)
    bad |= y_inf & ~same_inf  # an infinite reference would make the allowed error infinite
    count = int(bad.sum())
    if count:
        t.bad += count
        if not complex_parts:
            t.poisoned += int((bad & _poisoned(o[start:start + FAST_CHECK_CHUNK])).sum())
        if t.first is None:
            t.first = start + int(bad.nonzero()[0, 0])
    finite = diff.isfinite() & ~both_nan
    if bool(finite.any()):
        chunk_max = float(diff[finite].max())
        t.max_err = chunk_max if t.max_err is None else max(t.max_err, chunk_max)
    t.nan_where_finite += int((x_nan & y.isfinite()).sum())


def _tolerance_report(o: torch.Tensor, r: torch.Tensor, shape: list[int], atol: float, rtol: float, what: str,
                      complex_parts: bool) -> Mismatch:
    """The tolerance rule over flattened outputs, in float64 slices (whole-tensor float64
    temporaries of a GiB output took a minute), and what it found, for the reflector."""
    t = _Tally()
    for start in range(0, o.numel(), FAST_CHECK_CHUNK):
        _tally_slice(t, o, r, start, atol, rtol, complex_parts)
    if t.bad == 0:
        return Mismatch(True)
    first = t.first
    # (a complex output's index ends with the part: 0 real, 1 imaginary)
    index = [int(i) for i in np.unravel_index(first, shape)] if shape else []
    detail = {
        "mismatched": t.bad,
        "total": int(o.numel()),
        "first_index": index,
        "got": float(o[first]),
        "expected": float(r[first]),
        "max_abs_error": t.max_err,
        "nan_where_reference_finite": t.nan_where_finite,
        "poisoned": t.poisoned,
        "atol": atol,
        "rtol": rtol,
    }
    reason = (
        f"{what}: {t.bad} of {o.numel()} elements outside tolerance (atol={atol:g}, rtol={rtol:g}); "
        f"first at {tuple(detail['first_index'])}: got {detail['got']:.6g}, expected {detail['expected']:.6g}"
    )
    if t.nan_where_finite:
        reason += f"; {t.nan_where_finite} NaN where the reference is finite (unwritten or uninitialized output?)"
    return Mismatch(False, reason, detail, UNWRITTEN_OUTPUT if t.poisoned else WRONG_VALUES)


def _compare_exact(out: torch.Tensor, ref: torch.Tensor, what: str) -> Mismatch:
    """Integer and bool outputs: exact, in integer arithmetic (float64 loses int64 values > 2**53)."""
    out64, ref64 = out.to(torch.int64), ref.to(torch.int64)
    if out.shape == ref.shape and torch.equal(out64, ref64):
        return Mismatch(True)
    o, r = out64.numpy(), ref64.numpy()
    if o.shape != r.shape:
        return Mismatch(False, f"{what}: shape {list(o.shape)} differs from expected {list(r.shape)}",
                        kind=WRONG_SHAPE_DTYPE)
    bad = o != r
    n_bad = int(bad.sum())
    if n_bad == 0:
        return Mismatch(True)
    poisoned = int((torch.from_numpy(bad.reshape(-1)) & _poisoned(out.reshape(-1))).sum()) if out.dtype != torch.bool else 0
    first = np.unravel_index(int(np.argmax(bad)), o.shape)
    detail = {"mismatched": n_bad, "total": int(o.size), "first_index": [int(i) for i in first],
              "got": int(o[first]), "expected": int(r[first]), "poisoned": poisoned, "atol": 0, "rtol": 0}
    return Mismatch(False, f"{what}: {n_bad} of {o.size} integer elements differ (exact match required); "
                    f"first at {tuple(detail['first_index'])}: got {detail['got']}, expected {detail['expected']}",
                    detail, UNWRITTEN_OUTPUT if poisoned else WRONG_VALUES)


def compare_outputs(outs: list[torch.Tensor], refs: list[torch.Tensor], metas: list[dict[str, Any]],
                    tolerance_for, names: list[str] | None = None, atol_scales: list[float] | None = None) -> Mismatch:
    """Check count, shape and dtype against the native-dtype reference, then values. A failure
    names the output as the task's own test does where `names` says (a TritonBench-T result key,
    `test_case_1`), else by its position. `atol_scales`: per output, a factor on its atol (a
    derived hidden case's, tasks/derived.py)."""
    if len(outs) != len(refs):
        return Mismatch(False, f"returned {len(outs)} output(s); expected {len(refs)}", kind=WRONG_SHAPE_DTYPE)
    for i, (out, ref, meta) in enumerate(zip(outs, refs, metas)):
        what = output_name(i, names, len(outs))
        got_dtype = str(out.dtype).removeprefix("torch.")
        if list(out.shape) != list(meta["shape"]):
            return Mismatch(False, f"{what}: wrong shape {list(out.shape)}, expected {meta['shape']}",
                            kind=WRONG_SHAPE_DTYPE)
        if got_dtype != meta["dtype"]:
            return Mismatch(False, f"{what}: wrong dtype {got_dtype}, expected {meta['dtype']}",
                            kind=WRONG_SHAPE_DTYPE)
        tol = tolerance_for(meta["dtype"])
        scale = atol_scales[i] if atol_scales and i < len(atol_scales) else 1.0
        result = compare_tensor(out, ref, tol.atol * scale, tol.rtol, what)
        if not result.ok:
            return result
    return Mismatch(True)
