"""The basic profile's trusted side on hand-built numbers: occupancy from the GPU table, each
diagnosis rule, the SIDE builder, the strict validation of a child's profile reply, the option,
and that no failure of the profile step changes a verdict (issue 30, items 1 and 3)."""

from types import SimpleNamespace

import pytest

from kernelwright.judge.common import diagnosis
from kernelwright.judge.common.hardware import spec_by_name
from kernelwright.judge.common.messages import LaunchRecord, MessageError, Profile, parse_reply
from kernelwright.judge.common.options import JudgeOptions
from kernelwright.judge.common.profile import build_side, occupancy
from kernelwright.judge.common.requests import ProfileRequest, parse_request
from kernelwright.judge.common.verdict import Verdict

H200 = spec_by_name("NVIDIA H200")
MI300X = spec_by_name("AMD Instinct MI300X")
L40S = spec_by_name("NVIDIA L40S")


# -- occupancy ------------------------------------------------------------------------------------
def test_the_table_has_occupancy_limits_with_sources():
    assert (H200.max_warps_per_sm, H200.max_blocks_per_sm) == (64, 32)
    assert (L40S.max_warps_per_sm, L40S.max_blocks_per_sm) == (48, 24)
    assert MI300X.max_warps_per_sm == 32
    for spec in (H200, L40S, MI300X):
        assert spec.source_of("max_warps_per_sm").startswith("https://")


def test_occupancy_full_when_warps_bind():
    occ = occupancy(H200, num_warps=4, registers=32, shared_bytes=0)
    # 32 regs x 32 lanes = 1024 per warp; 65536 / 4096 = 16 blocks, as the warps allow (64 / 4)
    assert (occ.fraction, occ.limit, occ.blocks) == (1.0, "warps", 16)


def test_occupancy_limited_by_registers_in_256_register_units():
    # 130 registers: 130 x 32 = 4160, rounded up to 4352 per warp; 65536 // (4352 x 8) = 1 block
    occ = occupancy(H200, num_warps=8, registers=130, shared_bytes=0)
    assert (occ.limit, occ.blocks, occ.fraction) == ("registers", 1, 0.125)


def test_occupancy_limited_by_shared_memory_with_the_reserved_kib():
    # 100 KiB + 1 KiB reserved per block: two fit in 228 KiB
    occ = occupancy(H200, num_warps=4, registers=32, shared_bytes=100 * 1024)
    assert (occ.limit, occ.blocks, occ.fraction) == ("shared_memory", 2, 0.125)
    # 112.5 KiB + 1 KiB fits twice in 228 KiB; 113.5 KiB + 1 KiB only once
    assert occupancy(H200, 4, 32, 112 * 1024 + 512).blocks == 2
    assert occupancy(H200, 4, 32, 113 * 1024 + 512).blocks == 1


def test_occupancy_limited_by_blocks():
    occ = occupancy(H200, num_warps=1, registers=16, shared_bytes=0)
    assert (occ.limit, occ.blocks, occ.fraction) == ("blocks", 32, 0.5)


def test_occupancy_amd_vgpr_granule():
    # 90 VGPRs round to 96; a wave of 64 lanes takes 6144 of the CU's 131072: 21 waves, 5 blocks of 4
    occ = occupancy(MI300X, num_warps=4, registers=90, shared_bytes=0)
    assert MI300X.registers_per_sm == 131072
    assert (occ.limit, occ.blocks) == ("registers", 5)
    assert occ.fraction == round(20 / 32, 4)


def test_occupancy_unknown_without_figures():
    assert occupancy(None, 4, 32, 0).fraction is None
    assert occupancy(H200, 0, 32, 0).limit is None


# -- the SIDE builder ---------------------------------------------------------------------------
def _reply(*launches, call_ms=1.0, io_bytes=3 << 26):
    return Profile(op="profile", launches=list(launches), io_bytes=io_bytes, call_ms=call_ms)


def _launch(kernel="k", grid=(1024, 1, 1), warps=4, regs=32, spills=0, shared=0, ms=0.9):
    return LaunchRecord(kernel=kernel, grid=list(grid), num_warps=warps, num_stages=3, registers=regs,
                        spills=spills, shared_bytes=shared, time_ms=ms)


def test_side_fractions_come_from_the_judges_time_and_bytes():
    nbytes = 4_800_000_000  # 4.8 GB in 1 ms on a 4.8 TB/s GPU: all of its bandwidth
    side = build_side(_reply(_launch(ms=0.5), call_ms=0.8), 1.0, nbytes, H200, flops=67e9 * 0.25, peak_tflops=67)
    assert side["bandwidth_frac"] == pytest.approx(1.0)
    assert side["flop_frac"] == pytest.approx(0.25)
    assert side["kernel_ms"] == 0.5 and side["call_ms"] == 0.8
    (launch,) = side["launches"]
    assert launch["programs"] == 1024 and launch["time_share"] == pytest.approx(0.625)
    assert launch["occupancy"] == 1.0 and launch["occupancy_limit"] == "warps"
    assert set(launch) == {"kernel", "grid", "programs", "num_warps", "num_stages", "registers", "spills",
                           "shared_bytes", "occupancy", "occupancy_limit", "time_ms", "time_share"}


def test_side_without_a_reply_keeps_the_judges_numbers():
    side = build_side(None, 2.0, 4_800_000_000, H200, None, None)
    assert side["bandwidth_frac"] == pytest.approx(0.5) and side["launches"] == []
    assert side["flop_frac"] is None and side["call_ms"] is None


# -- the rules ----------------------------------------------------------------------------------
def _rules(side, peak=None):
    return [d["rule"] for d in diagnosis.diagnose(side, H200, peak)]


def _side(**over):
    base = {"bandwidth_frac": None, "flop_frac": None, "call_ms": 1.0, "kernel_ms": 0.95, "launches": []}
    return {**base, **over}


def _ln(**over):
    base = {"kernel": "k", "programs": 4096, "num_warps": 4, "registers": 32, "spills": 0, "shared_bytes": 0,
            "occupancy": 1.0, "occupancy_limit": "warps"}
    return {**base, **over}


def test_memory_bound_at_60_percent():
    (d,) = diagnosis.memory_bound(_side(bandwidth_frac=0.82), H200)
    assert d["text"] == "memory-bound at 82% of peak bandwidth (3.9 of 4.8 TB/s): little left to gain"
    assert not diagnosis.memory_bound(_side(bandwidth_frac=0.59), H200)


def test_compute_bound_at_half_the_peak():
    assert _rules(_side(flop_frac=0.5, bandwidth_frac=0.1), peak=989) == ["compute_bound"]
    assert "compute_bound" not in _rules(_side(flop_frac=0.49, bandwidth_frac=0.1))


def test_far_below_roofline_under_30_percent_of_both():
    assert _rules(_side(bandwidth_frac=0.12, flop_frac=0.01)) == ["far_below_roofline"]
    assert _rules(_side(bandwidth_frac=0.31, flop_frac=0.01)) == []
    assert _rules(_side()) == []  # neither known: nothing said


def test_grid_too_small_below_the_sm_count():
    (d,) = diagnosis.grid_too_small(_side(launches=[_ln(programs=1)]), H200)
    assert d["kernel"] == "k" and d["value"] == 1.0 and "131 SMs stay idle" in d["text"]
    assert not diagnosis.grid_too_small(_side(launches=[_ln(programs=132)]), H200)


def test_register_spills():
    (d,) = diagnosis.register_spills(_side(launches=[_ln(spills=96, registers=255)]), H200)
    assert "spills 96 register(s)" in d["text"]
    assert not diagnosis.register_spills(_side(launches=[_ln(spills=None)]), H200)


def test_low_occupancy_below_a_quarter():
    (d,) = diagnosis.low_occupancy(_side(launches=[_ln(occupancy=0.125, occupancy_limit="registers")]), H200)
    assert "12% (limited by registers)" in d["text"]
    assert not diagnosis.low_occupancy(_side(launches=[_ln(occupancy=0.25)]), H200)


def test_shared_memory_limited_below_half():
    side = _side(launches=[_ln(occupancy=0.375, occupancy_limit="shared_memory", shared_bytes=60000)])
    assert [d["rule"] for d in diagnosis.shared_memory_limited(side, H200)] == ["shared_memory_limited"]
    side = _side(launches=[_ln(occupancy=0.5, occupancy_limit="shared_memory")])
    assert not diagnosis.shared_memory_limited(side, H200)


def test_time_outside_kernels_below_half_of_the_call():
    (d,) = diagnosis.time_outside_kernels(_side(launches=[_ln()], kernel_ms=0.2, call_ms=1.0), H200)
    assert d["value"] == 0.2 and "20%" in d["text"]
    assert not diagnosis.time_outside_kernels(_side(launches=[_ln()], kernel_ms=0.5, call_ms=1.0), H200)
    assert not diagnosis.time_outside_kernels(_side(kernel_ms=None), H200)  # a torch reference


def test_every_rule_documents_its_threshold():
    for rule in (*diagnosis.RULES, diagnosis.compute_bound):
        assert rule.__doc__ and any(ch.isdigit() for ch in rule.__doc__), rule.__name__


# -- the wire -------------------------------------------------------------------------------------
GOOD = {"op": "profile", "ok": True, "seq": 3, "io_bytes": 100, "call_ms": 0.5, "more_launches": 0,
        "launches": [{"kernel": "add", "grid": [4, 1, 1], "num_warps": 4, "num_stages": 3, "registers": 24,
                      "spills": 0, "shared_bytes": 0, "time_ms": 0.4}]}


def test_a_profile_reply_parses():
    reply = parse_reply(GOOD, "profile", "candidate")
    assert isinstance(reply, Profile) and reply.launches[0].grid == [4, 1, 1]


@pytest.mark.parametrize("change", [
    {"io_bytes": -1}, {"io_bytes": "100"}, {"call_ms": float("nan")}, {"launches": "many"},
    {"launches": [{"kernel": "add", "grid": [4, 1], "num_warps": 4}]},
    {"launches": [{"kernel": "add", "grid": [4, 1, 1], "num_warps": True}]},
    {"launches": [{"kernel": "x" * 300, "grid": [1, 1, 1], "num_warps": 4}]},
    {"launches": [{"kernel": "add", "grid": [1, 1, 1], "num_warps": 4, "time_ms": -1.0}]},
    {"launches": [{"grid": [1, 1, 1], "num_warps": 4}]},
    {"launches": [GOOD["launches"][0]] * 33},
])
def test_a_malformed_profile_reply_is_a_message_error(change):
    with pytest.raises(MessageError):
        parse_reply({**GOOD, **change}, "profile", "candidate")


def test_the_request_and_the_option():
    assert isinstance(parse_request({"op": "profile", "case": 2, "seed": 7, "seq": 1}), ProfileRequest)
    assert JudgeOptions().profile == "basic"
    with pytest.raises(ValueError, match="profile must be one of off, basic, full"):
        JudgeOptions(profile="bogus")
    with pytest.raises(MessageError):
        parse_request({"op": "judge", "task_ref": "t", "candidate_path": "c", "seeds": [1],
                       "options": {**JudgeOptions().to_wire(), "profile": "loud"}}, _worker_table())


def _worker_table():
    from kernelwright.judge.common.requests import WORKER_REQUESTS

    return WORKER_REQUESTS


def test_the_verdict_carries_its_profile():
    v = Verdict(task="t", candidate="c", stage="passed", call=True, correct=True, reason="passed", kind="passed",
                profile={"skipped": "why"})
    assert Verdict.from_dict(v.to_dict()).profile == {"skipped": "why"}


# -- a profile never changes a verdict ---------------------------------------------------------------
def test_a_failing_profile_step_is_written_down_not_raised(monkeypatch):
    from kernelwright.judge.worker import profiling

    verdict = Verdict(task="t", candidate="c", stage="passed", call=True, correct=True, reason="passed",
                      kind="passed")
    j = SimpleNamespace(verdict=verdict, opts=JudgeOptions(), task=None)

    def broken(*args):
        raise RuntimeError("a bug in the profile")

    monkeypatch.setattr(profiling, "_profile", broken)
    profiling.run_profile(SimpleNamespace(device="cuda", info={}), j, True)
    assert verdict.profile == {"skipped": "the profile failed: a bug in the profile"}
    assert verdict.stage == "passed" and "profile" in verdict.stage_seconds
    j.opts = JudgeOptions(profile="off")
    verdict.profile = {}
    profiling.run_profile(SimpleNamespace(device="cuda", info={}), j, True)
    assert verdict.profile == {}
