"""The basic profile on a GPU (issue 30, items 1 and 3): the diagnoses of known kernels at the
largest timed shape, the numbers behind them, and the profile's own cost."""

import json

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import resolve_task

from .conftest import CANDIDATES

pytestmark = pytest.mark.gpu
PROFILE_CANDIDATES = CANDIDATES / "profile"


@pytest.fixture(scope="module")
def pool():
    options = JudgeOptions(seeds=1, perf_blocks=4, call_timeout=60, case_timeout=30, load_timeout=120)
    with JudgePool("auto", options=options) as p:
        assert p.backend in ("cuda", "hip")
        yield p


def _profiled(pool, task_name, path):
    task = resolve_task(task_name)
    verdict = pool.judge(task, path)
    assert verdict.passed, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    profile = verdict.profile
    shown = json.dumps(profile, indent=1)[:6000]
    assert profile.get("level") == "basic", shown
    assert not profile["errors"], shown
    assert profile["label"] == task.perf_cases[profile["case"]].label, shown
    # the profile's own cost: under 50 ms beyond its two calls a side (warm, recorded), which a
    # slow kernel (one program doing the whole tensor) makes long by itself
    calls_s = 2 * (profile["candidate"]["time_ms"] + profile["reference"]["time_ms"]) / 1e3
    assert verdict.stage_seconds["profile"] < 0.05 + calls_s, (verdict.stage_seconds, calls_s)
    return task, profile, shown, verdict.stage_seconds["profile"]


def _rules(side):
    return {d["rule"]: d for d in side["diagnosis"]}


def _check_side_shape(side, shown):
    assert side["time_ms"] > 0 and side["bytes_min"] > 0, shown
    assert side["launches"], shown
    for launch in side["launches"]:
        assert launch["programs"] == launch["grid"][0] * launch["grid"][1] * launch["grid"][2] > 0, shown
        assert launch["num_warps"] > 0 and launch["registers"], shown
        assert launch["spills"] is not None and launch["shared_bytes"] is not None, shown
        assert 0 < launch["occupancy"] <= 1 and launch["occupancy_limit"], shown
        assert launch["time_ms"] > 0 and 0 < launch["time_share"] <= 1.05, shown
    assert 0 < side["kernel_ms"] <= side["call_ms"] * 1.05, shown


@pytest.mark.parametrize("name", ["vector_add", "softmax"])
def test_memory_bound_references(pool, name):
    task, profile, shown, seconds = _profiled(pool, name, resolve_task(name).triton_reference)
    side = profile["candidate"]
    _check_side_shape(side, shown)
    assert side["bandwidth_frac"] >= 0.7, shown
    assert "memory_bound" in _rules(side), shown
    # bytes_min is the reference's inputs + outputs: the task's cost model says the same here
    case = task.perf_cases[profile["case"]]
    assert side["bytes_min"] == task.cost(case)["bytes"], shown
    assert profile["reference"]["time_ms"] > 0 and profile["reference"]["bandwidth_frac"] > 0, shown
    assert seconds < 0.05  # a fast kernel's profile: the target itself


def test_compute_bound_matmul(pool):
    _, profile, shown, _ = _profiled(pool, "matmul", resolve_task("matmul").triton_reference)
    _check_side_shape(profile["candidate"], shown)
    assert "compute_bound" in _rules(profile["candidate"]), shown


def test_strided_is_far_below_the_roofline(pool):
    _, profile, shown, _ = _profiled(pool, "vector_add", PROFILE_CANDIDATES / "strided_vector_add.py")
    side = profile["candidate"]
    _check_side_shape(side, shown)
    assert "far_below_roofline" in _rules(side) and "memory_bound" not in _rules(side), shown


def test_one_program_grid_is_too_small(pool):
    _, profile, shown, _ = _profiled(pool, "vector_add", PROFILE_CANDIDATES / "one_program_vector_add.py")
    side = profile["candidate"]
    assert side["launches"][0]["grid"] == [1, 1, 1], shown
    assert _rules(side)["grid_too_small"]["kernel"] == "one_program_add_kernel", shown


def test_spilling_kernel_spills(pool):
    _, profile, shown, _ = _profiled(pool, "vector_add", PROFILE_CANDIDATES / "spilling_vector_add.py")
    side = profile["candidate"]
    assert side["launches"][0]["num_warps"] == 1 and side["launches"][0]["spills"] > 0, shown
    assert "register_spills" in _rules(side), shown


def test_no_profile_costs_nothing(pool):
    task = resolve_task("vector_add")
    verdict = pool.judge(task, task.triton_reference, options=JudgeOptions(seeds=1, perf_blocks=4, profile="off"))
    assert verdict.passed and verdict.profile == {} and "profile" not in verdict.stage_seconds
