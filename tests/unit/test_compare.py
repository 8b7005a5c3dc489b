"""Output comparison: tolerances, NaN/inf semantics, mismatch reports, and bitwise identity."""

import math

import pytest
import torch

from kernelwright.judge.worker.compare import Mismatch, compare_outputs, compare_tensor, identical
from kernelwright.tasks.model import DEFAULT_TOLERANCES, Tolerance

NAN, INF = float("nan"), float("inf")


def t64(*values):
    return torch.tensor(values, dtype=torch.float64)


def default_tolerance(dtype: str) -> Tolerance:
    return Tolerance(*DEFAULT_TOLERANCES.get(dtype, (0.0, 0.0)))


def meta(t: torch.Tensor) -> dict:
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}


# --- compare_tensor ------------------------------------------------------------------------------

def test_exactly_at_the_tolerance_boundary_passes():
    # |out - ref| == atol + rtol * |ref| exactly (all values are exact binary fractions)
    ref = t64(1.0, -2.0, 0.0)
    out = t64(1.75, -3.25, -0.25)  # allowed: 0.25 + 0.5 * [1, 2, 0] = [0.75, 1.25, 0.25]
    assert compare_tensor(out, ref, atol=0.25, rtol=0.5, what="output").ok


def test_just_above_the_tolerance_boundary_fails():
    ref = t64(1.0, -2.0, 0.0)
    out = t64(1.75, -3.25 - 2**-40, -0.25)
    result = compare_tensor(out, ref, atol=0.25, rtol=0.5, what="output")
    assert not result.ok
    assert result.detail["mismatched"] == 1 and result.detail["first_index"] == [1]


def test_rtol_scales_with_the_reference_not_the_output():
    # |out - ref| = 10; allowed = rtol * |ref| = 0.5 * 10 = 5 (would be 10 if scaled by |out| = 20)
    assert not compare_tensor(t64(20.0), t64(10.0), atol=0.0, rtol=0.5, what="output").ok
    assert compare_tensor(t64(10.0), t64(20.0), atol=0.0, rtol=0.5, what="output").ok


def test_zero_tolerance_requires_exact_values():
    assert compare_tensor(t64(1.0, 2.0), t64(1.0, 2.0), 0.0, 0.0, "output").ok
    assert not compare_tensor(t64(1.0, 2.0), t64(1.0, 2.0 + 2**-50), 0.0, 0.0, "output").ok


def test_nan_where_reference_is_finite_fails_and_is_reported():
    result = compare_tensor(t64(1.0, NAN, NAN), t64(1.0, 2.0, 3.0), 1e-3, 1e-3, "output")
    assert not result.ok
    assert result.detail["nan_where_reference_finite"] == 2
    assert result.detail["mismatched"] == 2
    assert result.detail["first_index"] == [1]
    assert math.isnan(result.detail["got"]) and result.detail["expected"] == 2.0
    assert "2 NaN where the reference is finite" in result.reason
    assert result.detail["max_abs_error"] == 0.0  # NaN differences are left out of the max


def test_nan_where_reference_is_nan_passes():
    assert compare_tensor(t64(NAN, 1.0), t64(NAN, 1.0), 0.0, 0.0, "output").ok


def test_finite_where_reference_is_nan_fails():
    result = compare_tensor(t64(0.0), t64(NAN), 1.0, 1.0, "output")
    assert not result.ok
    assert result.detail["nan_where_reference_finite"] == 0
    assert "NaN where the reference is finite" not in result.reason


def test_matching_infinities_pass():
    assert compare_tensor(t64(INF, -INF, 1.0), t64(INF, -INF, 1.0), 0.0, 0.0, "output").ok


@pytest.mark.parametrize("out,ref", [
    pytest.param(INF, -INF, marks=(), id="inf_vs_-inf"),
    pytest.param(-INF, INF, marks=(), id="-inf_vs_inf"),
    pytest.param(1.0, INF, marks=(), id="finite_vs_inf"),
    pytest.param(INF, 1e300, id="inf_vs_finite"),
    pytest.param(-INF, 0.0, id="-inf_vs_zero"),
])
def test_opposite_or_unmatched_infinity_fails(out, ref):
    result = compare_tensor(t64(out), t64(ref), 1e-3, 1e-3, "output")
    assert not result.ok
    assert result.detail["got"] == out and result.detail["expected"] == ref
    assert result.detail["max_abs_error"] is None  # no finite difference at all


def test_shape_mismatch_message():
    result = compare_tensor(torch.zeros(2, 3), torch.zeros(3, 2), 1.0, 1.0, "output 1")
    assert not result.ok
    assert result.reason == "output 1: shape [2, 3] differs from expected [3, 2]"


def test_empty_tensors_match():
    assert compare_tensor(torch.zeros(0, 5), torch.ones(0, 5), 0.0, 0.0, "output").ok


def test_first_mismatch_index_and_max_abs_error():
    ref = torch.zeros(3, 4, dtype=torch.float64)
    out = ref.clone()
    out[1, 2] = 0.5
    out[2, 0] = -3.0
    out[0, 1] = 1e-6  # within tolerance, but still counted in max_abs_error
    result = compare_tensor(out, ref, 1e-3, 0.0, "output")
    assert not result.ok
    d = result.detail
    assert d["first_index"] == [1, 2]  # row-major first
    assert d["got"] == 0.5 and d["expected"] == 0.0
    assert d["mismatched"] == 2 and d["total"] == 12
    assert d["max_abs_error"] == 3.0
    assert d["atol"] == 1e-3 and d["rtol"] == 0.0
    assert "output: 2 of 12 elements outside tolerance (atol=0.001, rtol=0)" in result.reason
    assert "first at (1, 2): got 0.5, expected 0" in result.reason


def test_integer_outputs_are_compared_exactly_with_zero_tolerance():
    ref = torch.tensor([1, 2, 3], dtype=torch.int32)
    assert compare_tensor(ref.clone(), ref, 0.0, 0.0, "output").ok
    result = compare_tensor(torch.tensor([1, 2, 4], dtype=torch.int32), ref, 0.0, 0.0, "output")
    assert not result.ok and result.detail["first_index"] == [2]


def test_bool_outputs():
    ref = torch.tensor([True, False, True])
    assert compare_tensor(ref.clone(), ref, 0.0, 0.0, "output").ok
    assert not compare_tensor(torch.tensor([True, True, True]), ref, 0.0, 0.0, "output").ok


def test_bfloat16_outputs_within_and_beyond_default_tolerance():
    atol, rtol = DEFAULT_TOLERANCES["bfloat16"]
    ref = torch.tensor([1.0, -4.0], dtype=torch.bfloat16)
    one_ulp = torch.tensor([1.0078125, -4.03125], dtype=torch.bfloat16)  # next bf16 values
    assert compare_tensor(one_ulp, ref, atol, rtol, "output").ok
    far = torch.tensor([1.0625, -4.0], dtype=torch.bfloat16)
    result = compare_tensor(far, ref, atol, rtol, "output")
    assert not result.ok and result.detail["got"] == 1.0625


def test_float32_output_against_float64_reference():
    ref = torch.tensor([1 / 3], dtype=torch.float64)
    assert compare_tensor(ref.to(torch.float32), ref, 1e-5, 1e-4, "output").ok


def test_large_int64_outputs_are_exact():
    ref = torch.tensor([2**53 + 1], dtype=torch.int64)
    assert not compare_tensor(torch.tensor([2**53], dtype=torch.int64), ref, 0.0, 0.0, "output").ok


# --- compare_outputs -----------------------------------------------------------------------------

def test_all_outputs_matching():
    outs = [torch.ones(2, 2), torch.tensor([1, 2], dtype=torch.int64)]
    assert compare_outputs(outs, [o.clone() for o in outs], [meta(o) for o in outs], default_tolerance).ok


@pytest.mark.parametrize("n_out,n_ref", [(1, 2), (3, 1), (0, 1)])
def test_wrong_number_of_outputs(n_out, n_ref):
    outs, refs = [torch.zeros(1)] * n_out, [torch.zeros(1)] * n_ref
    result = compare_outputs(outs, refs, [meta(r) for r in refs], default_tolerance)
    assert not result.ok
    assert result.reason == f"returned {n_out} output(s); expected {n_ref}"


def test_wrong_shape_message_single_output():
    ref = torch.zeros(4, 4)
    result = compare_outputs([torch.zeros(16)], [ref], [meta(ref)], default_tolerance)
    assert not result.ok
    assert result.reason == "output: wrong shape [16], expected [4, 4]"


def test_wrong_dtype_message_names_the_output_index():
    refs = [torch.zeros(2), torch.zeros(2, dtype=torch.float16)]
    outs = [torch.zeros(2), torch.zeros(2, dtype=torch.float32)]
    result = compare_outputs(outs, refs, [meta(r) for r in refs], default_tolerance)
    assert not result.ok
    assert result.reason == "output 1: wrong dtype float32, expected float16"


def test_values_use_the_tolerance_of_the_expected_dtype():
    seen = []

    def tolerance_for(dtype):
        seen.append(dtype)
        return Tolerance(0.5, 0.0)

    ref = torch.zeros(3, dtype=torch.float16)
    assert compare_outputs([torch.full((3,), 0.5, dtype=torch.float16)], [ref], [meta(ref)], tolerance_for).ok
    result = compare_outputs([torch.full((3,), 0.75, dtype=torch.float16)], [ref], [meta(ref)], tolerance_for)
    assert not result.ok and result.reason.startswith("output: 3 of 3 elements outside tolerance")
    assert seen == ["float16", "float16"]


def test_first_failing_output_is_reported():
    refs = [torch.zeros(2), torch.zeros(2)]
    outs = [torch.zeros(2), torch.tensor([0.0, 9.0])]
    result = compare_outputs(outs, refs, [meta(r) for r in refs], default_tolerance)
    assert not result.ok and result.reason.startswith("output 1:")
    assert result.detail["first_index"] == [1]


def test_integer_outputs_exact_with_default_tolerances():
    ref = torch.tensor([5, 6, 7], dtype=torch.int64)
    result = compare_outputs([torch.tensor([5, 6, 8])], [ref], [meta(ref)], default_tolerance)
    assert not result.ok and result.detail["atol"] == 0.0 and result.detail["rtol"] == 0.0


def test_mismatch_default_fields():
    m = Mismatch(True)
    assert m.reason == "" and m.detail == {}


# --- identical -----------------------------------------------------------------------------------

def test_identical_same_values():
    a = [torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([True, False])]
    assert identical(a, [x.clone() for x in a])


def test_identical_nan_with_same_payload_is_equal():
    a = torch.tensor([NAN, 1.0])
    assert identical([a], [a.clone()])
    assert not torch.equal(a, a.clone())  # value equality would say otherwise


def test_identical_nan_with_different_payload_differs():
    a = torch.tensor([0x7FC00000], dtype=torch.int32).view(torch.float32)
    b = torch.tensor([0x7FC00001], dtype=torch.int32).view(torch.float32)
    assert math.isnan(a.item()) and math.isnan(b.item())
    assert not identical([a], [b])


def test_identical_negative_zero_differs_from_zero():
    assert not identical([torch.tensor([-0.0])], [torch.tensor([0.0])])
    assert torch.equal(torch.tensor([-0.0]), torch.tensor([0.0]))  # though they compare equal


def test_identical_rejects_different_dtype_shape_or_count():
    x = torch.zeros(4, dtype=torch.int32)
    assert not identical([x], [x.view(torch.float32)])  # same bits, different dtype
    assert not identical([x], [x.reshape(2, 2)])
    assert not identical([x], [x, x])
    assert identical([], [])


def test_identical_empty_and_zero_dim_and_strided():
    assert identical([torch.empty(0, 3)], [torch.empty(0, 3)])
    assert identical([torch.tensor(2.5)], [torch.tensor(2.5)])
    m = torch.arange(12.0).reshape(3, 4)
    assert identical([m.t()], [m.t().contiguous()])
    assert not identical([torch.tensor(2.5)], [torch.tensor(2.25)])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_fast_check_agrees_with_the_full_report_on_every_kind_of_value(monkeypatch, dtype):
    """`within_tolerance` (the fast yes/no) must say yes exactly when the full numpy report finds
    nothing: NaN on both sides, infinities of either sign, values on the boundary, across slices."""
    import kernelwright.judge.worker.compare as compare

    monkeypatch.setattr(compare, "FAST_CHECK_CHUNK", 7)  # many slices, and a short last one
    specials = torch.tensor([0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-3, 1.001, 65504.0])
    gen = torch.Generator().manual_seed(0)
    for trial in range(300):
        n = int(torch.randint(1, 40, (1,), generator=gen))
        ref = specials[torch.randint(0, len(specials), (n,), generator=gen)].to(dtype)
        out = ref.clone()
        k = int(torch.randint(0, 3, (1,), generator=gen))  # 0, 1 or 2 positions changed
        for pos in torch.randint(0, n, (k,), generator=gen).tolist():
            out[pos] = specials[int(torch.randint(0, len(specials), (1,), generator=gen))].to(dtype)
        atol, rtol = (0.0, 0.0) if trial % 5 == 0 else (1e-3, 1e-3)
        fast = compare.within_tolerance(out, ref, atol, rtol)
        monkeypatch.setattr(compare, "within_tolerance", lambda *a, **k: False)
        full = compare.compare_tensor(out, ref, atol, rtol, "output").ok
        monkeypatch.undo()
        monkeypatch.setattr(compare, "FAST_CHECK_CHUNK", 7)
        assert fast == full, (out, ref, atol, rtol)


def test_bitwise_equal_outputs_pass_without_the_float64_check(monkeypatch):
    """Identical values (NaN and infinities in the same places included) meet the tolerance rule,
    so they are settled by one memory comparison: the float64 check is never reached."""
    from kernelwright.judge.worker import compare

    def refuse(*args, **kwargs):
        raise AssertionError("the float64 check ran on identical outputs")

    monkeypatch.setattr(compare, "within_tolerance", refuse)
    ref = torch.tensor([1.5, float("nan"), float("inf"), -float("inf"), 0.0], dtype=torch.float16)
    assert compare.compare_tensor(ref.clone(), ref, 0.0, 0.0, "output").ok
    ints = torch.arange(10)
    assert compare.compare_tensor(ints.clone(), ints, 0.0, 0.0, "output").ok
    # anything else still takes the full rule: -0.0 is not bitwise 0.0, yet within tolerance
    monkeypatch.undo()
    assert compare.compare_tensor(torch.tensor([-0.0]), torch.tensor([0.0]), 0.0, 0.0, "output").ok
    assert not compare.compare_tensor(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), 0.1, 0.0, "output").ok


def test_complex_outputs_are_compared_in_both_parts():
    ref = torch.tensor([1 + 1j, 2 - 3j], dtype=torch.complex64)
    assert compare_tensor(ref.clone(), ref, 0.0, 0.0, "output").ok
    wrong = ref.clone()
    wrong[1] = 2 + 3j  # same real part: a cast to float64 would have passed it
    result = compare_tensor(wrong, ref, 1e-3, 1e-3, "output")
    assert not result.ok and result.detail["first_index"] == [1, 1]
    assert result.detail["got"] == 3.0 and result.detail["expected"] == -3.0


def test_the_report_is_the_same_across_slices(monkeypatch):
    import kernelwright.judge.worker.compare as compare

    gen = torch.Generator().manual_seed(1)
    ref = torch.randn(7, 11, generator=gen)
    out = ref.clone()
    out[2, 3], out[5, 0], out[6, 10] = math.nan, ref[5, 0] + 4.0, ref[6, 10] - 0.5
    whole = compare.compare_tensor(out, ref, 1e-3, 1e-3, "output")
    monkeypatch.setattr(compare, "FAST_CHECK_CHUNK", 5)
    sliced = compare.compare_tensor(out, ref, 1e-3, 1e-3, "output")
    assert whole.reason == sliced.reason
    assert {k: v for k, v in whole.detail.items() if k != "got"} == {k: v for k, v in sliced.detail.items() if k != "got"}
    assert sliced.detail["mismatched"] == 3 and sliced.detail["first_index"] == [2, 3]
    assert sliced.detail["max_abs_error"] == pytest.approx(4.0)
    assert sliced.detail["nan_where_reference_finite"] == 1


def test_float32_certifies_only_what_float64_would(monkeypatch):
    """Half-precision slices are settled in float32 only with a margin; a value exactly on the
    boundary (which float32 cannot certify) still passes, through the float64 rule."""
    ref = torch.tensor([1.0, 2.0, 4.0] * 1000, dtype=torch.float16)
    out = ref.clone()
    out[3] = 1.0 + 0.5  # |diff| = 0.5 = atol + rtol * 1 exactly
    assert compare_tensor(out, ref, 0.25, 0.25, "output").ok
    out[3] = 1.0 + 0.5 + 2 ** -10  # one fp16 step beyond
    assert not compare_tensor(out, ref, 0.25, 0.25, "output").ok
