"""What the agent's prompt knows about the hardware and about Triton.

- `detect_gpu`: the `GPUSpec` of the GPU kernels are written for, from the judge pool's device info
  (`{"name": "NVIDIA H200", "backend": "cuda", "sm_count": 132, ...}`), a device name, or the machine
  itself (without initialising CUDA in this process), then adjusted by the `[gpu]` section of
  kernelwright.toml.
- `gpu_spec_text`: the figures as a compact markdown block.
- `triton_guide`: our guide to fast and correct Triton kernels (markdown in prompts/knowledge/): a common
  part plus the NVIDIA or AMD part picked by backend.
- `knowledge_text`: both, for the prompt.

In `kernelwright.toml`:

    [gpu]
    name = "NVIDIA H200"        # force a table entry (entry name or any name `spec_for` matches)
    bandwidth_tbs = 4.8         # or override single figures of the detected / forced entry
    sm_count = 132

    [gpu.tflops]                # dense peaks per math type, merged into the entry's
    bfloat16 = 989

A name that is not in the table plus `bandwidth_tbs` and `[gpu.tflops]` describes a custom GPU.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from ..config import Config, ConfigError, SettingSpec, load_config, register, register_table
from ..judge.common.hardware import MATH_ALIASES, SPECS, DeviceSpec, GPUSpec, spec_by_name, spec_for

__all__ = ["GPUSpec", "detect_gpu", "gpu_overrides", "gpu_spec_text", "gpu_table_markdown", "knowledge_text",
           "triton_guide", "normalize_backend", "KNOWLEDGE_DIR"]

KNOWLEDGE_DIR = Path(__file__).resolve().parent.parent / "prompts" / "knowledge"

# figures of DeviceSpec that [gpu] may set, with their types (tflops is the [gpu.tflops] table)
_OVERRIDABLE: dict[str, tuple[type, str]] = {
    "bandwidth_tbs": (float, "memory bandwidth, TB/s"),
    "sm_count": (int, "SMs (NVIDIA) or compute units (AMD)"),
    "warp_size": (int, "threads per warp / wavefront"),
    "smem_per_block_kb": (float, "max shared memory / LDS per block, KiB"),
    "smem_per_sm_kb": (float, "shared memory / LDS per SM or CU, KiB"),
    "regfile_per_sm_kb": (float, "register file per SM / VGPR file per CU, KiB"),
    "l2_mb": (float, "L2 cache, MB"),
    "llc_mb": (float, "last-level cache beyond L2 (AMD Infinity Cache), MB"),
    "memory_gb": (float, "device memory, GB"),
    "memory_type": (str, "memory technology, e.g. HBM3e"),
    "arch": (str, "compiler target, e.g. sm_90 or gfx942"),
    "family": (str, "architecture family, e.g. Hopper or CDNA3"),
    "vendor": (str, "nvidia or amd"),
}

register(
    SettingSpec("gpu.name", str, None, "GPU to write kernels for: a table entry such as 'NVIDIA H200' "
                "(default: the detected device)", "KERNELWRIGHT_GPU"),
    *(SettingSpec(f"gpu.{key}", kind, None, f"override: {help_}") for key, (kind, help_) in _OVERRIDABLE.items()),
)
register_table("gpu.tflops")


# -- overrides -------------------------------------------------------------------------------
def gpu_overrides(config: Config | None = None) -> dict[str, Any]:
    """The `[gpu]` settings that were set: {"name": ..., figure: value, "tflops": {...}}.
    Without a config, kernelwright.toml is read as `load_config()` finds it."""
    config = load_config() if config is None else config
    out: dict[str, Any] = {}
    name = _get(config, "gpu.name")
    if name:
        out["name"] = name
    for key in _OVERRIDABLE:
        value = _get(config, f"gpu.{key}")
        if value is not None:
            out[key] = value
    tflops = config.table("gpu.tflops")
    if tflops:
        try:
            out["tflops"] = {MATH_ALIASES.get(k, k): float(v) for k, v in tflops.items()}
        except (TypeError, ValueError):
            raise ConfigError(f"[gpu.tflops] expects numbers (TFLOP/s per math type), got {tflops!r}") from None
    return out


def _get(config: Config, key: str) -> Any:
    try:
        return config.get(key)
    except KeyError:  # a Config resolved before this module registered its settings
        found, value = _lookup(config, key)
        return value if found else None


def _lookup(config: Config, key: str) -> tuple[bool, Any]:
    section, _, name = key.rpartition(".")
    table = config.table(section)
    return (name in table, table.get(name))


def _apply_overrides(spec: DeviceSpec | None, overrides: Mapping[str, Any]) -> DeviceSpec | None:
    figures = {k: v for k, v in overrides.items() if k != "name"}
    name = overrides.get("name")
    if name:
        forced = spec_by_name(str(name))
        if forced is None:
            if "bandwidth_tbs" not in figures or not figures.get("tflops"):
                known = ", ".join(s.name for s in SPECS)
                raise ConfigError(f"[gpu] name = {name!r} is not in the GPU table ({known}); a custom GPU "
                                  "needs bandwidth_tbs and a [gpu.tflops] table as well")
            forced = DeviceSpec(str(name), float(figures.pop("bandwidth_tbs")), dict(figures.pop("tflops")),
                                sources={"*": "kernelwright.toml [gpu] (custom GPU)"})
        spec = forced
    if spec is None or not figures:
        return spec
    try:
        return spec.with_overrides(**figures)
    except ValueError as exc:
        raise ConfigError(f"[gpu]: {exc}") from None


# -- detection -------------------------------------------------------------------------------
def detect_gpu(device_info: Mapping[str, Any] | str | None = None, *, config: Config | None = None,
               config_path: Path | str | None = None, use_config: bool = True) -> GPUSpec | None:
    """The spec of the target GPU, or None when it is unknown (or the CPU interpreter).

    `device_info` is the judge pool's device dict (`Pool.start()` / a worker's `info`: "name",
    "backend", "sm_count", "memory_bytes"), or a device name, or None to look at this machine
    (`nvidia-smi` / `rocm-smi` / torch only if CUDA is already initialised, so that a process that
    forks judge workers later is left clean). The `[gpu]` section of the config (`config`, else the
    file at `config_path`, else kernelwright.toml as `load_config` finds it) can force an entry or
    override figures; pass `use_config=False` to ignore it."""
    if use_config and config is None:
        config = load_config(config_path)
    overrides = gpu_overrides(config) if use_config else {}
    if isinstance(device_info, str):
        device_info = {"name": device_info}
    if device_info is None and not overrides.get("name"):
        device_info = _local_device_info()
    spec = None
    if device_info and device_info.get("backend") != "cpu":
        spec = spec_for(device_info.get("name")) or _match_by_shape(device_info)
        spec = _with_measured(spec, device_info)
    return _apply_overrides(spec, overrides)


def _with_measured(spec: DeviceSpec | None, info: Mapping[str, Any]) -> DeviceSpec | None:
    """The device's own SM/CU count wins over the table (MIG slices and AMD CPX partitions have
    fewer), and on NVIDIA its L2 size too (CUDA reports the enabled L2; ROCm reports one XCD's)."""
    if spec is None:
        return None
    changes: dict[str, Any] = {}
    sources = dict(spec.sources)
    notes = []
    count = info.get("sm_count")
    if count and int(count) != spec.sm_count:
        changes["sm_count"] = int(count)
        sources["sm_count"] = "reported by the device (torch multi_processor_count)"
        notes.append(f"The device reports {count} SMs/CUs (table: {spec.sm_count}): a partition?")
    l2 = info.get("l2_bytes")
    if spec.vendor == "nvidia" and l2 and round(int(l2) / 2**20, 1) != spec.l2_mb:
        changes["l2_mb"] = round(int(l2) / 2**20, 1)
        sources["l2_mb"] = "reported by the device (torch L2_cache_size)"
    if not changes:
        return spec
    return replace(spec, **changes, sources=sources,
                   notes=" ".join(x for x in (spec.notes, *notes) if x))


def _match_by_shape(info: Mapping[str, Any]) -> DeviceSpec | None:
    """An unrecognised name (e.g. an empty one on ROCm, or a gfx target string): the single table
    entry with the same SM/CU count and memory size (within 10%), if there is exactly one."""
    count, memory = info.get("sm_count"), info.get("memory_bytes")
    arch = str(info.get("arch") or info.get("name") or "").lower()
    if not count or not memory:
        return None
    hits = [s for s in SPECS if s.sm_count == int(count) and s.memory_gb
            and abs(float(memory) / 1e9 - s.memory_gb) <= 0.1 * s.memory_gb
            and (not re.search(r"gfx\d+|sm_\d+", arch) or s.arch in arch)]
    return hits[0] if len(hits) == 1 else None


def _local_device_info() -> dict[str, Any] | None:
    """This machine's first GPU without creating a CUDA context here."""
    try:
        import sys

        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            return {"name": props.name, "backend": "hip" if torch.version.hip else "cuda",
                    "sm_count": int(props.multi_processor_count), "memory_bytes": int(props.total_memory)}
    except Exception:  # noqa: BLE001 - fall through to the tools
        pass
    name = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if name:
        return {"name": name.splitlines()[0].strip(), "backend": "cuda"}
    out = _run(["rocm-smi", "--showproductname"])
    if out:
        for pattern in (r"Card (?:series|SKU|model)\s*:\s*(.*MI\d+\w*.*)", r"(MI\d{3}\w*)"):
            match = re.search(pattern, out)
            if match:
                return {"name": match.group(1).strip(), "backend": "hip"}
    return None


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


# -- text for the prompt ---------------------------------------------------------------------
_MATH_LABELS = {"float64": "FP64", "float32": "FP32", "tf32": "TF32", "float16": "FP16", "bfloat16": "BF16",
                "float8": "FP8", "int8": "INT8"}


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:g}"


def gpu_spec_text(spec: GPUSpec | None) -> str:
    """A compact markdown block of the GPU's figures, with units (sources are in the data and docs)."""
    if spec is None:
        return "### Target GPU\nUnknown GPU: no specifications available; use portable, conservative settings."
    amd = spec.vendor == "amd"
    unit, lanes = ("CUs", "wavefront") if amd else ("SMs", "warp")
    head = ", ".join(x for x in (spec.family, spec.arch) if x)
    lines = [f"### Target GPU: {spec.name}" + (f" ({head})" if head else "")]
    if spec.sm_count:
        lines.append(f"- {spec.sm_count} {unit}; {lanes} size {spec.warp_size}")
    mem = []
    if spec.smem_per_block_kb:
        per = f" ({_num(spec.smem_per_sm_kb)} KB per {unit[:-1]})" if spec.smem_per_sm_kb else ""
        mem.append(f"{'LDS' if amd else 'shared memory'} up to {_num(spec.smem_per_block_kb)} KB per "
                   f"{'workgroup' if amd else 'block'}{per}")
    if spec.regfile_per_sm_kb:
        mem.append(f"{'VGPR file' if amd else 'register file'} {_num(spec.regfile_per_sm_kb)} KB per "
                   f"{unit[:-1]} ({spec.registers_per_sm:,} 32-bit registers)")
    if mem:
        lines.append("- " + "; ".join(mem))
    cache = []
    if spec.l2_mb:
        cache.append(f"L2 {_num(spec.l2_mb)} MB")
    if spec.llc_mb:
        cache.append(f"Infinity Cache {_num(spec.llc_mb)} MB" if amd else f"last-level cache {_num(spec.llc_mb)} MB")
    memory = f"memory {_num(spec.memory_gb)} GB {spec.memory_type}".rstrip() if spec.memory_gb else "memory"
    cache.append(f"{memory} at {spec.bandwidth_tbs:g} TB/s")
    lines.append("- " + "; ".join(cache))
    rates = [f"{_MATH_LABELS.get(m, m)} {_num(v)}" for m, v in spec.tflops.items() if m != "int8"]
    if rates:
        peak = "- dense peak TFLOP/s: " + ", ".join(rates)
        if "int8" in spec.tflops:
            peak += f"; INT8 {_num(spec.tflops['int8'])} TOP/s"
        lines.append(peak)
        ridge = spec.tflops.get("float16") or max(spec.tflops.values())
        lines.append(f"- ridge point: about {ridge * 1e12 / (spec.bandwidth_tbs * 1e12):.0f} FLOP/byte at FP16 "
                     f"and {spec.peak_tflops('float32') / spec.bandwidth_tbs:.0f} at FP32: below it a kernel is "
                     "memory-bound, and its target is bytes moved / bandwidth")
    if spec.notes:
        lines.append(f"- note: {spec.notes}")
    return "\n".join(lines)


def normalize_backend(backend: str | None) -> str:
    """'nvidia', 'amd', 'cpu' or '' (unknown) from a backend or device name: cuda/hip/rocm/sm_90/gfx942/..."""
    b = (backend or "").strip().lower()
    if b in ("cuda", "nvidia", "ptx") or b.startswith("sm_") or "nvidia" in b:
        return "nvidia"
    if b in ("hip", "rocm", "amd", "amdgcn") or b.startswith("gfx") or "amd" in b or "instinct" in b:
        return "amd"
    if b in ("cpu", "interpreter", "interpret"):
        return "cpu"
    return ""


@functools.lru_cache(maxsize=None)
def _section(name: str) -> str:
    return (KNOWLEDGE_DIR / f"{name}.md").read_text().strip()


def triton_guide(backend: str | None) -> str:
    """The guide: the common part plus the backend's part (both vendor parts when the backend is
    unknown; the interpreter note for 'cpu')."""
    kind = normalize_backend(backend)
    parts = [_section("common")]
    if kind in ("nvidia", ""):
        parts.append(_section("nvidia"))
    if kind in ("amd", ""):
        parts.append(_section("amd"))
    if kind == "cpu":
        parts.append(_section("interpreter"))
    return "\n\n".join(parts)


def knowledge_text(backend: str | None, spec: GPUSpec | None) -> str:
    """The hardware block and the guide, for the prompt. The backend defaults to the spec's vendor."""
    if not backend and spec is not None:
        backend = spec.vendor
    return f"{gpu_spec_text(spec)}\n\n{triton_guide(backend)}\n"


# -- the table for docs/knowledge.md ---------------------------------------------------------
def gpu_table_markdown() -> str:
    """The GPU table as markdown (figures, then each figure's source): docs/knowledge.md embeds it
    between `<!-- gpu-table -->` markers, and a test keeps the two in sync."""
    def cell(value: Any, unit: str = "") -> str:
        return "?" if value in (None, "") else f"{_num(value) if isinstance(value, (int, float)) else value}{unit}"

    head = ("| GPU | arch | SMs/CUs | warp | smem/LDS per block | regs per SM/CU | L2 | LLC | memory | "
            "bandwidth | FP64 | FP32 | TF32 | FP16 | BF16 | FP8 | INT8 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for s in SPECS:
        rates = [cell(s.tflops.get(m)) if m in s.tflops else "-" for m in
                 ("float64", "float32", "tf32", "float16", "bfloat16", "float8", "int8")]
        lines.append("| " + " | ".join([
            s.name, s.arch, cell(s.sm_count), str(s.warp_size), cell(s.smem_per_block_kb, " KB"),
            cell(s.regfile_per_sm_kb, " KB"), cell(s.l2_mb, " MB"), cell(s.llc_mb, " MB") if s.llc_mb else "-",
            f"{cell(s.memory_gb, ' GB')} {s.memory_type}".strip(), f"{s.bandwidth_tbs:g} TB/s", *rates]) + " |")
    lines.append("")
    lines.append("Peaks are dense TFLOP/s (INT8: TOP/s); `-` means no such math on that GPU, `?` a figure "
                 "not published.")
    lines.append("")
    lines.append("Sources, per GPU and figure (`*`: every figure not listed separately):")
    lines.append("")
    for s in SPECS:
        lines.append(f"- **{s.name}**" + (f" — {s.notes}" if s.notes else ""))
        for key, source in s.sources.items():
            lines.append(f"  - `{key}`: {source}")
    return "\n".join(lines)
