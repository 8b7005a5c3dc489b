"""Peak rates of known accelerators, to place a measured time against the roofline.

Datasheet numbers (dense, no sparsity) are upper bounds: a kernel measured faster than the bound
its own cost model allows is flagged as suspect (a cheat, a cached result or a wrong cost model).
"""

from __future__ import annotations

from dataclasses import dataclass


MATH_ALIASES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
                "fp8": "float8", "float8_e4m3fn": "float8", "float8_e5m2": "float8", "i8": "int8"}


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    bandwidth_tbs: float                       # HBM bandwidth, TB/s
    tflops: dict[str, float]                   # by math type: float64, float32, tf32, float16, bfloat16, float8

    def peak_tflops(self, math: str) -> float:
        """Peak rate for a math type; unknown types get the highest rate, so that the roofline
        stays a lower bound (a wrong name must never fail an honest kernel)."""
        math = MATH_ALIASES.get(math, math)
        return self.tflops.get(math, max(self.tflops.values()))


_SPECS = [
    # matched in order against the device name, case-insensitively
    ("H200", DeviceSpec("NVIDIA H200", 4.8, {"float64": 67, "float32": 67, "tf32": 495, "float16": 989,
                                             "bfloat16": 989, "float8": 1979, "int8": 1979})),
    ("H100 PCIe", DeviceSpec("NVIDIA H100 PCIe", 2.0, {"float64": 51, "float32": 51, "tf32": 378,
                                                       "float16": 756, "bfloat16": 756, "float8": 1513})),
    ("H100", DeviceSpec("NVIDIA H100 SXM", 3.35, {"float64": 67, "float32": 67, "tf32": 495, "float16": 989,
                                                  "bfloat16": 989, "float8": 1979, "int8": 1979})),
    ("A100", DeviceSpec("NVIDIA A100", 2.04, {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312,
                                              "bfloat16": 312, "int8": 624})),
    ("MI300X", DeviceSpec("AMD Instinct MI300X", 5.3, {"float64": 163, "float32": 163, "tf32": 654,
                                                        "float16": 1307, "bfloat16": 1307, "float8": 2615})),
    ("MI325X", DeviceSpec("AMD Instinct MI325X", 6.0, {"float64": 163, "float32": 163, "tf32": 654,
                                                        "float16": 1307, "bfloat16": 1307, "float8": 2615})),
    ("MI250", DeviceSpec("AMD Instinct MI250X", 3.2, {"float64": 95.7, "float32": 95.7, "float16": 383,
                                                       "bfloat16": 383})),
]


def spec_for(device_name: str | None) -> DeviceSpec | None:
    if not device_name:
        return None
    lowered = device_name.lower()
    for key, spec in _SPECS:
        if key.lower() in lowered:
            return spec
    return None


def roofline_ms(spec: DeviceSpec, cost: dict, dtype: str) -> float | None:
    """Lower bound on the time of a case from its cost model: max(compute time, memory time)."""
    flops, nbytes = float(cost.get("flops", 0) or 0), float(cost.get("bytes", 0) or 0)
    if flops <= 0 and nbytes <= 0:
        return None
    math = cost.get("math") or ("float8" if dtype.startswith("float8") else dtype)
    compute_s = flops / (spec.peak_tflops(math) * 1e12)
    memory_s = nbytes / (spec.bandwidth_tbs * 1e12)
    return max(compute_s, memory_s) * 1e3
