"""Specifications of known accelerators: the roofline's peak rates, and the figures an agent's
prompt shows about the GPU it writes kernels for.

Datasheet numbers (dense, no sparsity) are upper bounds: a kernel measured faster than the bound
its own cost model allows is flagged as suspect (a cheat, a cached result or a wrong cost model).
Where a product comes in variants that one device name cannot tell apart, the entry keeps the
fastest variant's rates, so that the roofline stays a lower bound on time.

One `DeviceSpec` per GPU, each figure with its public source in `sources` (by field name; a field
not named there comes from the entry's `"*"` source). `docs/knowledge.md` lists the table.
Imports nothing beyond the standard library (the judge's core may not).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, Mapping

MATH_ALIASES = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
                "fp8": "float8", "float8_e4m3fn": "float8", "float8_e5m2": "float8", "i8": "int8",
                "float8_e4m3fnuz": "float8", "float8_e5m2fnuz": "float8"}
MATH_TYPES = ("float64", "float32", "tf32", "float16", "bfloat16", "float8", "int8")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    bandwidth_tbs: float                       # HBM / DRAM bandwidth, TB/s (10^12 bytes per second)
    tflops: dict[str, float]                   # dense peak by math type: float64, float32, tf32, float16,
    #                                            bfloat16, float8 (TFLOP/s), int8 (TOP/s)
    vendor: str = ""                           # "nvidia" or "amd"
    arch: str = ""                             # compiler target: sm_90, gfx942, ...
    family: str = ""                           # Hopper, CDNA3, ...
    sm_count: int | None = None                # SMs (NVIDIA) or compute units (AMD) of the device
    warp_size: int = 32                        # threads per warp (NVIDIA) / wavefront (AMD CDNA: 64)
    smem_per_block_kb: float | None = None     # max shared memory (LDS) one block / workgroup may use, KiB
    smem_per_sm_kb: float | None = None        # shared memory (LDS) per SM / CU, KiB
    regfile_per_sm_kb: float | None = None     # register file per SM, or the VGPR file per CU, KiB
    l2_mb: float | None = None                 # L2, MB (AMD: the sum over the XCDs / GCD)
    llc_mb: float | None = None                # last-level cache beyond L2 (AMD Infinity Cache), MB
    memory_gb: float | None = None             # device memory, GB as the vendor quotes it
    memory_type: str = ""
    aliases: tuple[str, ...] = ()              # lowercase name fragments that select this entry
    sources: Mapping[str, str] = field(default_factory=dict)   # field -> URL (and a note)
    notes: str = ""                            # caveats: variants, per-die figures, uncertain numbers

    def peak_tflops(self, math: str) -> float:
        """Peak rate for a math type; unknown types get the highest rate, so that the roofline
        stays a lower bound (a wrong name must never fail an honest kernel)."""
        math = MATH_ALIASES.get(math, math)
        return self.tflops.get(math, max(self.tflops.values()))

    @property
    def registers_per_sm(self) -> int | None:
        """32-bit registers per SM (NVIDIA) or per CU (AMD: the VGPR file over 4 bytes)."""
        return int(self.regfile_per_sm_kb * 1024 // 4) if self.regfile_per_sm_kb else None

    def source_of(self, figure: str) -> str:
        """The public source of one figure (a field name, or `tflops.<math>`)."""
        if figure in self.sources:
            return self.sources[figure]
        if figure.startswith("tflops.") and "tflops" in self.sources:
            return self.sources["tflops"]
        return self.sources.get("*", "")

    def with_overrides(self, **changes: Any) -> "DeviceSpec":
        """A copy with some figures replaced (the `[gpu]` section of kernelwright.toml);
        `tflops` is merged per math type. Unknown names raise ValueError."""
        known = {f.name for f in fields(self)} - {"sources", "notes"}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown GPU figures {sorted(unknown)}; known: {sorted(known)}")
        if "tflops" in changes:
            merged = dict(self.tflops)
            merged.update({MATH_ALIASES.get(k, k): float(v) for k, v in dict(changes["tflops"]).items()})
            changes["tflops"] = merged
        overridden = ", ".join(sorted(changes))
        sources = dict(self.sources)
        for name in changes:
            sources[name] = "kernelwright.toml [gpu] override"
        return replace(self, sources=sources, **changes,
                       notes=(self.notes + " " if self.notes else "") + f"Overridden: {overridden}.")


GPUSpec = DeviceSpec  # the name the agent side uses


# -- sources ---------------------------------------------------------------------------------
_CUDA_CC = ("https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
            "#features-and-technical-specifications-technical-specifications-per-compute-capability")
_H100_DS = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/"
_HOPPER_WP = "https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper"
_HOPPER_TG = "https://docs.nvidia.com/cuda/hopper-tuning-guide/index.html"
_H200_PAGE = "https://www.nvidia.com/en-us/data-center/h200/"
_HGX_PAGE = "https://www.nvidia.com/en-us/data-center/hgx/"
_DGX_B200_DS = "https://resources.nvidia.com/en-us-dgx-systems/dgx-b200-datasheet"
_BLACKWELL_TG = "https://docs.nvidia.com/cuda/blackwell-tuning-guide/index.html"
_A100_DS = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
            "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_AMPERE_WP = ("https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
              "nvidia-ampere-architecture-whitepaper.pdf")
_AMPERE_TG = "https://docs.nvidia.com/cuda/ampere-tuning-guide/index.html"
_L40S_DS = "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_ADA_WP = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_ADA_TG = "https://docs.nvidia.com/cuda/ada-tuning-guide/index.html"
_RTX4090_PAGE = "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/"
_ROCM_SPECS = "https://rocm.docs.amd.com/en/latest/reference/gpu-specs.html"
_MI250X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"
_CDNA2_WP = ("https://www.amd.com/content/dam/amd/en/documents/instinct-business-docs/white-papers/"
             "amd-cdna2-white-paper.pdf")
_MI300X_DS = ("https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/"
              "amd-instinct-mi300x-data-sheet.pdf")
_CDNA3_WP = ("https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/white-papers/"
             "amd-cdna-3-white-paper.pdf")
_MI325X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html"
_MI355X_PAGE = "https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html"
_CDNA4_WP = ("https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/white-papers/"
             "amd-cdna-4-architecture-whitepaper.pdf")

_NV_REGS = f"{_CUDA_CC} (64K 32-bit registers per SM, at most 255 per thread)"
_AMD_TABLE = f"{_ROCM_SPECS} (CUs, wavefront, LDS, L2, Infinity Cache (L3), VGPR file)"


# -- the table: one entry per GPU ------------------------------------------------------------
SPECS: tuple[DeviceSpec, ...] = (
    DeviceSpec(
        "NVIDIA H100 SXM", 3.35,
        {"float64": 67, "float32": 67, "tf32": 495, "float16": 989, "bfloat16": 989, "float8": 1979,
         "int8": 1979},
        vendor="nvidia", arch="sm_90", family="Hopper", sm_count=132, warp_size=32,
        smem_per_block_kb=227, smem_per_sm_kb=228, regfile_per_sm_kb=256, l2_mb=50, memory_gb=80,
        memory_type="HBM3", aliases=("h100", "h100 sxm", "h100 sxm5", "h100 80gb hbm3"),
        sources={"*": _H100_DS, "sm_count": f"{_HOPPER_WP} (132 SMs on H100 SXM5)",
                 "l2_mb": f"{_HOPPER_WP} (50 MB L2)",
                 "smem_per_block_kb": f"{_HOPPER_TG} (up to 227 KB per block, 228 KB per SM)",
                 "smem_per_sm_kb": _HOPPER_TG, "regfile_per_sm_kb": _NV_REGS,
                 "tflops": f"{_H100_DS} (H100 SXM column; sparse figures halved to dense; fp64 is the "
                           "FP64 Tensor Core rate, vector FP64 is 34)"},
        notes="torch reports it as 'NVIDIA H100 80GB HBM3'."),
    DeviceSpec(
        "NVIDIA H100 PCIe", 2.0,
        {"float64": 51, "float32": 51, "tf32": 378, "float16": 756, "bfloat16": 756, "float8": 1513,
         "int8": 1513},
        vendor="nvidia", arch="sm_90", family="Hopper", sm_count=114, warp_size=32,
        smem_per_block_kb=227, smem_per_sm_kb=228, regfile_per_sm_kb=256, l2_mb=50, memory_gb=80,
        memory_type="HBM2e", aliases=("h100 pcie",),
        sources={"*": _H100_DS, "sm_count": f"{_HOPPER_WP} (114 SMs on H100 PCIe)",
                 "l2_mb": _HOPPER_WP, "smem_per_block_kb": _HOPPER_TG, "smem_per_sm_kb": _HOPPER_TG,
                 "regfile_per_sm_kb": _NV_REGS,
                 "tflops": f"{_H100_DS} (H100 PCIe column, sparse halved; fp64 = FP64 Tensor Core, "
                           "vector 26)"}),
    DeviceSpec(
        "NVIDIA H100 NVL", 3.9,
        {"float64": 60, "float32": 60, "tf32": 418, "float16": 835, "bfloat16": 835, "float8": 1671,
         "int8": 1671},
        vendor="nvidia", arch="sm_90", family="Hopper", sm_count=132, warp_size=32,
        smem_per_block_kb=227, smem_per_sm_kb=228, regfile_per_sm_kb=256, l2_mb=50, memory_gb=94,
        memory_type="HBM3", aliases=("h100 nvl",),
        sources={"*": _H100_DS, "sm_count": "uncertain: assumed 132 SMs as on H100 SXM5 (the same "
                                            "GH100 configuration); the datasheet gives no SM count",
                 "l2_mb": _HOPPER_WP, "smem_per_block_kb": _HOPPER_TG, "smem_per_sm_kb": _HOPPER_TG,
                 "regfile_per_sm_kb": _NV_REGS,
                 "tflops": f"{_H100_DS} (H100 NVL column, per GPU, sparse halved and rounded)"}),
    DeviceSpec(
        "NVIDIA H200", 4.8,
        {"float64": 67, "float32": 67, "tf32": 495, "float16": 989, "bfloat16": 989, "float8": 1979,
         "int8": 1979},
        vendor="nvidia", arch="sm_90", family="Hopper", sm_count=132, warp_size=32,
        smem_per_block_kb=227, smem_per_sm_kb=228, regfile_per_sm_kb=256, l2_mb=60, memory_gb=141,
        memory_type="HBM3e", aliases=("h200",),
        sources={"*": _H200_PAGE, "sm_count": f"{_HOPPER_WP} (same GH100 configuration as H100 SXM5; "
                                              "132 confirmed by torch's multi_processor_count on an H200)",
                 "l2_mb": "measured, not published: CUDA reports L2_cache_size = 62,914,560 bytes (60 MiB, "
                          "the full GH100 L2) on an H200 (torch.cuda.get_device_properties, this project's "
                          f"device, 2026); NVIDIA's H200 page gives no L2 size ({_HOPPER_WP}: 50 MB on H100 SXM5)",
                 "smem_per_block_kb": f"{_HOPPER_TG} (232,448 bytes opt-in per block and 233,472 per SM "
                                      "reported by torch on an H200)",
                 "smem_per_sm_kb": _HOPPER_TG,
                 "regfile_per_sm_kb": _NV_REGS,
                 "tflops": f"{_H200_PAGE} (H200 SXM column, sparse halved; fp64 = FP64 Tensor Core)"},
        notes="H200 NVL matches this entry too: same memory, lower clocks (about 84% of these peaks), so "
              "the SXM rates stay an upper bound."),
    DeviceSpec(
        "NVIDIA B200", 8.0,
        {"float64": 37, "float32": 75, "tf32": 1100, "float16": 2250, "bfloat16": 2250, "float8": 4500,
         "int8": 4500},
        vendor="nvidia", arch="sm_100", family="Blackwell", sm_count=148, warp_size=32,
        smem_per_block_kb=227, smem_per_sm_kb=228, regfile_per_sm_kb=256, l2_mb=None, memory_gb=180,
        memory_type="HBM3e", aliases=("b200",),
        sources={"*": _HGX_PAGE,
                 "tflops": f"{_HGX_PAGE} and {_DGX_B200_DS} (HGX B200 totals for 8 GPUs divided by 8, "
                           "sparse halved: FP8 72 PF sparse -> 4.5 PF dense per GPU; rounded)",
                 "bandwidth_tbs": f"{_HGX_PAGE} (64 TB/s for 8 GPUs; third-party listings give 7.7)",
                 "memory_gb": f"{_DGX_B200_DS} (1,440 GB for 8 GPUs; announced as 192 GB)",
                 "sm_count": "uncertain: 148 SMs from third-party listings (not in NVIDIA's datasheets); "
                             "torch's multi_processor_count is authoritative",
                 "l2_mb": "unknown: NVIDIA publishes no L2 size for B200 (third-party figures differ)",
                 "smem_per_block_kb": f"{_BLACKWELL_TG} / {_CUDA_CC} (compute capability 10.0)",
                 "smem_per_sm_kb": _CUDA_CC, "regfile_per_sm_kb": _NV_REGS},
        notes="Two dies seen as one device. GB200's B200 runs at higher power (about 10% higher peaks) "
              "and is not matched by this entry."),
    DeviceSpec(
        "NVIDIA A100 SXM4 80GB", 2.039,
        {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312, "int8": 624},
        vendor="nvidia", arch="sm_80", family="Ampere", sm_count=108, warp_size=32,
        smem_per_block_kb=163, smem_per_sm_kb=164, regfile_per_sm_kb=256, l2_mb=40, memory_gb=80,
        memory_type="HBM2e", aliases=("a100", "a100 sxm4 80gb", "a100 80gb"),
        sources={"*": _A100_DS, "sm_count": f"{_AMPERE_WP} (108 SMs)", "l2_mb": f"{_AMPERE_WP} (40 MB L2)",
                 "smem_per_block_kb": f"{_AMPERE_TG} (163 KB per block, 164 KB per SM)",
                 "smem_per_sm_kb": _AMPERE_TG, "regfile_per_sm_kb": _NV_REGS,
                 "tflops": f"{_A100_DS} (dense; fp64 = FP64 Tensor Core, vector 9.7)"},
        notes="Also the fallback for any other A100 name (PCIe 40/80GB have lower bandwidth, so this "
              "entry's figures are upper bounds for them). No FP8."),
    DeviceSpec(
        "NVIDIA A100 SXM4 40GB", 1.555,
        {"float64": 19.5, "float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312, "int8": 624},
        vendor="nvidia", arch="sm_80", family="Ampere", sm_count=108, warp_size=32,
        smem_per_block_kb=163, smem_per_sm_kb=164, regfile_per_sm_kb=256, l2_mb=40, memory_gb=40,
        memory_type="HBM2", aliases=("a100 sxm4 40gb",),
        sources={"*": _A100_DS, "sm_count": _AMPERE_WP, "l2_mb": _AMPERE_WP,
                 "smem_per_block_kb": _AMPERE_TG, "smem_per_sm_kb": _AMPERE_TG,
                 "regfile_per_sm_kb": _NV_REGS, "tflops": f"{_A100_DS} (dense)"}),
    DeviceSpec(
        "NVIDIA L40S", 0.864,
        {"float64": 1.43, "float32": 91.6, "tf32": 183, "float16": 362, "bfloat16": 362, "float8": 733,
         "int8": 733},
        vendor="nvidia", arch="sm_89", family="Ada Lovelace", sm_count=142, warp_size=32,
        smem_per_block_kb=99, smem_per_sm_kb=100, regfile_per_sm_kb=256, l2_mb=96, memory_gb=48,
        memory_type="GDDR6", aliases=("l40s",),
        sources={"*": _L40S_DS, "tflops": f"{_L40S_DS} (dense column)",
                 "tflops.float64": f"{_CUDA_CC} (FP64 at 1/64 of FP32 on compute capability 8.9; not on "
                                   "the datasheet)",
                 "sm_count": "uncertain: 142 SMs (18,176 CUDA cores / 128 per SM, from the datasheet)",
                 "l2_mb": f"uncertain: 96 MB, the full AD102 L2 of {_ADA_WP}; not on the datasheet",
                 "smem_per_block_kb": f"{_ADA_TG} (99 KB per block, 100 KB per SM)",
                 "smem_per_sm_kb": _ADA_TG, "regfile_per_sm_kb": _NV_REGS}),
    DeviceSpec(
        "NVIDIA GeForce RTX 4090", 1.008,
        {"float64": 1.29, "float32": 82.6, "tf32": 82.6, "float16": 330.3, "bfloat16": 165.2,
         "float8": 660.6, "int8": 660.6},
        vendor="nvidia", arch="sm_89", family="Ada Lovelace", sm_count=128, warp_size=32,
        smem_per_block_kb=99, smem_per_sm_kb=100, regfile_per_sm_kb=256, l2_mb=72, memory_gb=24,
        memory_type="GDDR6X", aliases=("rtx 4090", "geforce rtx 4090"),
        sources={"*": f"{_ADA_WP} (appendix table, GeForce RTX 4090)", "memory_gb": _RTX4090_PAGE,
                 "tflops": f"{_ADA_WP} (dense; float16 330.3 is with FP16 accumulate, 165.2 with FP32 "
                           "accumulate as tl.dot uses by default; bf16 and tf32 accumulate in FP32; "
                           "float8/int8 are the FP8-with-FP16-accumulate and INT8 rates)",
                 "tflops.float64": f"{_CUDA_CC} (1/64 of FP32 on compute capability 8.9)",
                 "smem_per_block_kb": _ADA_TG, "smem_per_sm_kb": _ADA_TG, "regfile_per_sm_kb": _NV_REGS},
        notes="GeForce tensor cores run FP32-accumulate matmuls at half rate."),
    DeviceSpec(
        "AMD Instinct MI250X", 1.6,
        {"float64": 47.9, "float32": 47.9, "float16": 191.5, "bfloat16": 191.5, "int8": 191.5},
        vendor="amd", arch="gfx90a", family="CDNA2", sm_count=110, warp_size=64,
        smem_per_block_kb=64, smem_per_sm_kb=64, regfile_per_sm_kb=512, l2_mb=8, llc_mb=None,
        memory_gb=64, memory_type="HBM2e", aliases=("mi250x", "mi250"),
        sources={"*": f"{_MI250X_PAGE} (package figures: 220 CUs, 128 GB, 3.2 TB/s, FP16 383 TFLOPS, "
                      "FP64/FP32 matrix 95.7, halved here per GCD)",
                 "tflops": f"{_MI250X_PAGE} (package peak / 2; fp64/fp32 are the matrix rates, vector "
                           "is half of them; no TF32 or FP8 on CDNA2)",
                 "sm_count": _AMD_TABLE, "warp_size": _AMD_TABLE, "smem_per_block_kb": _AMD_TABLE,
                 "smem_per_sm_kb": _AMD_TABLE, "regfile_per_sm_kb": _AMD_TABLE,
                 "l2_mb": f"{_AMD_TABLE} (8 MB per GCD)", "arch": f"{_CDNA2_WP} / {_ROCM_SPECS}"},
        notes="One MI250X is two GCDs and torch sees each as its own device: the figures here are per "
              "GCD (half the package datasheet). The MI250 (208 CUs) matches this entry as well."),
    DeviceSpec(
        "AMD Instinct MI300X", 5.3,
        {"float64": 163.4, "float32": 163.4, "tf32": 653.7, "float16": 1307.4, "bfloat16": 1307.4,
         "float8": 2614.9, "int8": 2614.9},
        vendor="amd", arch="gfx942", family="CDNA3", sm_count=304, warp_size=64,
        smem_per_block_kb=64, smem_per_sm_kb=64, regfile_per_sm_kb=512, l2_mb=32, llc_mb=256,
        memory_gb=192, memory_type="HBM3", aliases=("mi300x",),
        sources={"*": _MI300X_DS, "tflops": f"{_MI300X_DS} (dense; fp64/fp32 are the matrix rates; "
                                            "vector FP64 is 81.7)",
                 "sm_count": _AMD_TABLE, "warp_size": _AMD_TABLE, "smem_per_block_kb": _AMD_TABLE,
                 "smem_per_sm_kb": _AMD_TABLE, "regfile_per_sm_kb": _AMD_TABLE,
                 "l2_mb": f"{_AMD_TABLE} (4 MB per XCD, 8 XCDs)", "llc_mb": f"{_CDNA3_WP} / {_AMD_TABLE}",
                 "arch": _ROCM_SPECS},
        notes="8 XCDs of 38 CUs; consecutive workgroups are dealt round-robin to the XCDs."),
    DeviceSpec(
        "AMD Instinct MI325X", 6.0,
        {"float64": 163.4, "float32": 163.4, "tf32": 653.7, "float16": 1307.4, "bfloat16": 1307.4,
         "float8": 2614.9, "int8": 2614.9},
        vendor="amd", arch="gfx942", family="CDNA3", sm_count=304, warp_size=64,
        smem_per_block_kb=64, smem_per_sm_kb=64, regfile_per_sm_kb=512, l2_mb=32, llc_mb=256,
        memory_gb=256, memory_type="HBM3e", aliases=("mi325x",),
        sources={"*": _MI325X_PAGE, "tflops": f"{_MI325X_PAGE} (dense; same compute as MI300X)",
                 "sm_count": _AMD_TABLE, "warp_size": _AMD_TABLE, "smem_per_block_kb": _AMD_TABLE,
                 "smem_per_sm_kb": _AMD_TABLE, "regfile_per_sm_kb": _AMD_TABLE,
                 "l2_mb": f"{_AMD_TABLE} (4 MB per XCD)", "llc_mb": _AMD_TABLE, "arch": _ROCM_SPECS}),
    DeviceSpec(
        "AMD Instinct MI355X", 8.0,
        {"float64": 78.6, "float32": 157.3, "float16": 2516.6, "bfloat16": 2516.6, "float8": 5033.2,
         "int8": 5033.2},
        vendor="amd", arch="gfx950", family="CDNA4", sm_count=256, warp_size=64,
        smem_per_block_kb=160, smem_per_sm_kb=160, regfile_per_sm_kb=512, l2_mb=32, llc_mb=256,
        memory_gb=288, memory_type="HBM3e", aliases=("mi355x",),
        sources={"*": _MI355X_PAGE,
                 "tflops": f"{_MI355X_PAGE} (dense; 2.5 PF FP16 and 5.0 PF FP8 at 2.4 GHz, i.e. 4096 and "
                           f"8192 FLOP/clock/CU; see also {_CDNA4_WP}). No TF32 figure is given: CDNA4 has "
                           "no TF32 matrix path (emulated in software), so tf32 falls back to the highest rate "
                           "in the roofline.",
                 "sm_count": _AMD_TABLE, "warp_size": _AMD_TABLE,
                 "smem_per_block_kb": f"{_AMD_TABLE} (160 KB LDS per CU)", "smem_per_sm_kb": _AMD_TABLE,
                 "regfile_per_sm_kb": _AMD_TABLE, "l2_mb": f"{_AMD_TABLE} (4 MB per XCD)",
                 "llc_mb": _AMD_TABLE, "arch": _ROCM_SPECS},
        notes="8 XCDs of 32 CUs. The MI350X (same silicon, lower clocks) would match 'mi350x' only."),
)


def _normalize(name: str) -> str:
    return " ".join(re.sub(r"[-_/(),]+", " ", name.lower()).split())


def _alias_index() -> list[tuple[str, DeviceSpec]]:
    pairs = [(_normalize(alias), spec) for spec in SPECS for alias in spec.aliases]
    # most specific first: "h100 pcie" must win over "h100", "a100 sxm4 40gb" over "a100"
    return sorted(pairs, key=lambda pair: -len(pair[0]))


_ALIASES = _alias_index()


def spec_for(device_name: str | None) -> DeviceSpec | None:
    """The spec whose longest alias occurs in the device name as whole words (case, '-' and '_'
    ignored): "NVIDIA A100-SXM4-40GB" -> the 40GB entry, "NVIDIA H100 PCIe" -> PCIe, "NVIDIA H100
    80GB HBM3" -> SXM; "GB200" does not match "b200". None for unknown or missing names."""
    if not device_name:
        return None
    lowered = f" {_normalize(device_name)} "
    for alias, spec in _ALIASES:
        if re.search(rf"(?<![a-z0-9]){re.escape(alias)}(?![a-z0-9])", lowered):
            return spec
    return None


def spec_by_name(name: str) -> DeviceSpec | None:
    """Exact entry name (case-insensitive), else the alias match of `spec_for`."""
    for spec in SPECS:
        if spec.name.lower() == name.strip().lower():
            return spec
    return spec_for(name)


def roofline_ms(spec: DeviceSpec, cost: dict, dtype: str) -> float | None:
    """Lower bound on the time of a case from its cost model: max(compute time, memory time)."""
    flops, nbytes = float(cost.get("flops", 0) or 0), float(cost.get("bytes", 0) or 0)
    if flops <= 0 and nbytes <= 0:
        return None
    math = cost.get("math") or ("float8" if dtype.startswith("float8") else dtype)
    compute_s = flops / (spec.peak_tflops(math) * 1e12)
    memory_s = nbytes / (spec.bandwidth_tbs * 1e12)
    return max(compute_s, memory_s) * 1e3
