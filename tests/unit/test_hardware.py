"""Device specs by name, and the roofline lower bound on a case's time."""

import pytest

from kernelwright.judge.common.hardware import DeviceSpec, roofline_ms, spec_for


@pytest.mark.parametrize("name,expected", [
    ("NVIDIA H200", "NVIDIA H200"),
    ("nvidia h200 nvl", "NVIDIA H200"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe"),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM"),
    ("NVIDIA H100 SXM5 80GB", "NVIDIA H100 SXM"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 SXM4 80GB"),  # fallback: the fastest A100
    ("NVIDIA H100 NVL", "NVIDIA H100 NVL"),
    ("NVIDIA B200", "NVIDIA B200"),
    ("NVIDIA L40S", "NVIDIA L40S"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ("AMD Instinct MI250X/MI250", "AMD Instinct MI250X"),
    ("AMD Instinct MI300X VF", "AMD Instinct MI300X"),
    ("AMD Instinct MI355X", "AMD Instinct MI355X"),
    ("AMD Instinct MI300X", "AMD Instinct MI300X"),
    ("AMD Instinct MI325X", "AMD Instinct MI325X"),
    ("AMD Instinct MI250X", "AMD Instinct MI250X"),
])
def test_spec_for_matches_known_devices(name, expected):
    spec = spec_for(name)
    assert spec is not None and spec.name == expected


def test_h100_pcie_and_sxm_differ():
    assert spec_for("NVIDIA H100 PCIe").bandwidth_tbs == 2.0
    assert spec_for("NVIDIA H100 80GB HBM3").bandwidth_tbs == 3.35
    assert spec_for("NVIDIA H200").bandwidth_tbs == 4.8


@pytest.mark.parametrize("name", ["cpu", "Tesla V100-SXM2-16GB", "NVIDIA GB200", "NVIDIA L40",
                                  "AMD Instinct MI300A", "", None])
def test_spec_for_unknown_or_missing_name_is_none(name):
    assert spec_for(name) is None


H200 = spec_for("NVIDIA H200")


def test_roofline_memory_bound():
    # 4.8e9 bytes at 4.8 TB/s = 1 ms; 1e9 flops at 67 TFLOP/s is far less
    assert roofline_ms(H200, {"flops": 1e9, "bytes": 4.8e9}, "float32") == pytest.approx(1.0)


def test_roofline_compute_bound_uses_the_dtype_rate():
    # 9.89e11 flops at 989 TFLOP/s (bf16) = 1 ms; 4.8e8 bytes = 0.1 ms
    assert roofline_ms(H200, {"flops": 9.89e11, "bytes": 4.8e8}, "bfloat16") == pytest.approx(1.0)
    # the same flops in float32 (67 TFLOP/s)
    assert roofline_ms(H200, {"flops": 9.89e11, "bytes": 4.8e8}, "float32") == pytest.approx(9.89e11 / 67e12 * 1e3)


def test_roofline_math_overrides_dtype_and_float8_dtypes_map_to_float8():
    cost = {"flops": 4.95e11, "math": "tf32"}
    assert roofline_ms(H200, cost, "float32") == pytest.approx(1.0)  # 495 TFLOP/s
    assert roofline_ms(H200, {"flops": 1.979e12}, "float8_e4m3fn") == pytest.approx(1.0)
    assert roofline_ms(H200, {"flops": 1.979e12}, "float8_e5m2") == pytest.approx(1.0)


def test_roofline_only_bytes_or_only_flops():
    assert roofline_ms(H200, {"bytes": 9.6e9}, "float16") == pytest.approx(2.0)
    assert roofline_ms(H200, {"flops": 9.89e11}, "float16") == pytest.approx(1.0)


@pytest.mark.parametrize("cost", [{}, {"flops": 0, "bytes": 0}, {"flops": None, "bytes": None}, {"bytes": -5}])
def test_zero_cost_has_no_bound(cost):
    assert roofline_ms(H200, cost, "float32") is None


def test_unknown_math_type_gets_the_highest_rate():
    # the roofline must stay a lower bound: an unknown name may never fail an honest kernel
    spec = DeviceSpec("x", 1.0, {"float32": 10.0, "float16": 20.0})
    assert spec.peak_tflops("float16") == 20.0
    assert spec.peak_tflops("int8") == 20.0
    assert spec.peak_tflops("fp32") == 10.0  # aliases resolve


def test_bf16_alias_uses_the_bfloat16_rate():
    assert roofline_ms(H200, {"flops": 9.89e11, "math": "bf16"}, "bfloat16") == pytest.approx(1.0)


@pytest.mark.slow
def test_builtin_cost_models_use_known_math_types():
    from kernelwright.tasks import list_builtin_tasks

    known = set(H200.tflops)
    bad = []
    for task in list_builtin_tasks():
        if task.cost is None:
            continue
        for case in task.perf_cases:
            math = task.cost(case).get("math")
            if math is not None and math not in known:
                bad.append((task.name, math))
    assert bad == []


REQUIRED_GPUS = ["NVIDIA H100 SXM", "NVIDIA H100 PCIe", "NVIDIA H200", "NVIDIA B200", "NVIDIA A100 SXM4 40GB",
                 "NVIDIA A100 SXM4 80GB", "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "AMD Instinct MI250X",
                 "AMD Instinct MI300X", "AMD Instinct MI325X", "AMD Instinct MI355X"]
FIGURES = ["bandwidth_tbs", "arch", "sm_count", "warp_size", "smem_per_block_kb", "regfile_per_sm_kb",
           "l2_mb", "memory_gb"]


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_every_required_gpu_has_its_figures_and_a_source_for_each(name):
    from kernelwright.judge.common.hardware import spec_by_name

    spec = spec_by_name(name)
    assert spec is not None and spec.name == name
    assert spec.vendor in ("nvidia", "amd")
    assert spec.arch.startswith("sm_" if spec.vendor == "nvidia" else "gfx")
    assert spec.warp_size == (32 if spec.vendor == "nvidia" else 64)
    for figure in FIGURES + [f"tflops.{m}" for m in spec.tflops]:
        source = spec.source_of(figure)
        assert source, f"{name}: no source for {figure}"
        if name != "NVIDIA B200" or figure != "l2_mb":  # NVIDIA publishes no B200 L2 size
            assert "https://" in source or source.startswith("uncertain"), (name, figure, source)
    for figure in FIGURES:
        if figure != "l2_mb" or name != "NVIDIA B200":
            assert getattr(spec, figure) not in (None, ""), (name, figure)
    assert spec.tflops["float16"] >= spec.tflops["float32"] > 0
    assert spec.registers_per_sm == (65536 if spec.vendor == "nvidia" else 131072)


def test_amd_entries_carry_infinity_cache_and_lds():
    assert spec_for("AMD Instinct MI300X").llc_mb == 256
    assert spec_for("AMD Instinct MI355X").smem_per_block_kb == 160
    assert spec_for("AMD Instinct MI300X").memory_gb == 192 and spec_for("AMD Instinct MI325X").memory_gb == 256


def test_aliases_are_unique_and_lowercase():
    from kernelwright.judge.common.hardware import SPECS

    aliases = [a for s in SPECS for a in s.aliases]
    assert len(aliases) == len(set(aliases))
    assert all(a == a.lower() for a in aliases)


def test_overrides_replace_figures_and_merge_tflops():
    spec = H200.with_overrides(bandwidth_tbs=5.0, sm_count=130, tflops={"bf16": 900})
    assert spec.bandwidth_tbs == 5.0 and spec.sm_count == 130
    assert spec.tflops["bfloat16"] == 900 and spec.tflops["float16"] == H200.tflops["float16"]
    assert "override" in spec.source_of("bandwidth_tbs") and "Overridden" in spec.notes
    assert H200.bandwidth_tbs == 4.8  # the table entry is untouched
    with pytest.raises(ValueError, match="unknown GPU figures"):
        H200.with_overrides(bandwith_tbs=5.0)


def test_fnuz_float8_names_use_the_float8_rate():
    mi300 = spec_for("AMD Instinct MI300X")
    assert mi300.peak_tflops("float8_e4m3fnuz") == mi300.tflops["float8"]


# -- the table is data (gpus.json next to hardware.py), checked when it is loaded ---------------

def _table(tmp_path, gpus, references=None):
    import json

    file = tmp_path / "gpus.json"
    file.write_text(json.dumps({"references": references or {}, "gpus": gpus}))
    return file


GOOD_ENTRY = {"name": "Test GPU", "bandwidth_tbs": 1.0, "tflops": {"float32": 10},
              "aliases": ["test gpu"], "sources": {"*": "{DS} (page 2)"}}


def test_the_table_is_read_from_the_json_file_next_to_the_module():
    from pathlib import Path

    from kernelwright.judge.common import hardware

    assert hardware.TABLE_FILE == Path(hardware.__file__).with_name("gpus.json")
    assert hardware.load_table() == hardware.SPECS and len(hardware.SPECS) >= 12
    # references are expanded: no "{NAME}" is left in any source
    assert not [s.name for s in hardware.SPECS for v in s.sources.values() if "{" in v]


def test_the_table_file_is_package_data():
    import glob
    from pathlib import Path

    from kernelwright.config import tomllib

    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kernelwright"]
    package = root / "src" / "kernelwright"
    matched = {Path(p) for pat in patterns for p in glob.glob(str(package / pat), recursive=True)}
    assert package / "judge" / "common" / "gpus.json" in matched


def test_a_good_table_loads_with_its_references(tmp_path):
    from kernelwright.judge.common.hardware import load_table

    (spec,) = load_table(_table(tmp_path, [GOOD_ENTRY], {"DS": "https://example.com/ds"}))
    assert spec.name == "Test GPU" and spec.aliases == ("test gpu",) and spec.warp_size == 32
    assert spec.source_of("bandwidth_tbs") == "https://example.com/ds (page 2)"


@pytest.mark.parametrize("change,message", [
    ({"bandwidth_tbs": "fast"}, r"gpus\[0\] \(Test GPU\): 'bandwidth_tbs' must be a positive number"),
    ({"tflops": {"fp33": 1}}, r"'tflops' must be an object of positive numbers"),
    ({"sm_count": 13.5}, r"'sm_count' must be a positive integer"),
    ({"bandwith_tbs": 2.0}, r"unknown field\(s\) \['bandwith_tbs'\]"),
    ({"sources": {"*": "{NOPE}"}}, r"unknown reference \{NOPE\}"),
])
def test_a_malformed_entry_is_named_with_its_field(tmp_path, change, message):
    from kernelwright.judge.common.hardware import HardwareTableError, load_table

    with pytest.raises(HardwareTableError, match=message):
        load_table(_table(tmp_path, [dict(GOOD_ENTRY, **change)], {"DS": "x"}))


def test_a_missing_field_a_duplicate_and_bad_json_are_errors(tmp_path):
    from kernelwright.judge.common.hardware import HardwareTableError, load_table

    entry = {k: v for k, v in GOOD_ENTRY.items() if k != "tflops"}
    with pytest.raises(HardwareTableError, match=r"missing field\(s\) \['tflops'\]"):
        load_table(_table(tmp_path, [entry], {"DS": "x"}))
    with pytest.raises(HardwareTableError, match="two entries are named"):
        load_table(_table(tmp_path, [GOOD_ENTRY, GOOD_ENTRY], {"DS": "x"}))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(HardwareTableError, match="bad.json: not valid JSON"):
        load_table(bad)
    with pytest.raises(HardwareTableError, match="cannot read"):
        load_table(tmp_path / "absent.json")
