"""Specifications of known accelerators: the roofline's peak rates, and the figures an agent's
prompt shows about the GPU it writes kernels for.

Datasheet numbers (dense, no sparsity) are upper bounds: a kernel measured faster than the bound
its own cost model allows is flagged as suspect (a cheat, a cached result or a wrong cost model).
Where a product comes in variants that one device name cannot tell apart, the entry keeps the
fastest variant's rates, so that the roofline stays a lower bound on time.

One `DeviceSpec` per GPU, read once from `gpus.json` next to this file (the table is data: add a
GPU there), each figure with its public source in `sources` (by field name; a field not named
there comes from the entry's `"*"` source; `{NAME}` in a source stands for the file's
`references[NAME]`). A malformed file fails at import with `HardwareTableError`, naming the entry
and the field. `docs/knowledge.md` lists the table.
Imports nothing beyond the standard library (the judge's core may not).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
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
    max_warps_per_sm: int | None = None        # resident warps per SM / waves per CU (occupancy's ceiling)
    max_blocks_per_sm: int | None = None       # resident blocks per SM / workgroups per CU
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


# -- the table: one entry per GPU, in gpus.json next to this file ------------------------------
TABLE_FILE = Path(__file__).with_name("gpus.json")
_FIELDS = {f.name: f for f in fields(DeviceSpec)}
_REQUIRED = ("name", "bandwidth_tbs", "tflops")
_NUMBER_OR_NONE = ("smem_per_block_kb", "smem_per_sm_kb", "regfile_per_sm_kb", "l2_mb", "llc_mb", "memory_gb")
_TEXT = ("name", "vendor", "arch", "family", "memory_type", "notes")
_REFERENCE = re.compile(r"\{([A-Za-z0-9_]+)\}")


class HardwareTableError(ValueError):
    """gpus.json is unreadable or malformed: the message names the file, the entry and the field."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _expand(text: str, references: Mapping[str, str], where: str, depth: int = 0) -> str:
    """`text` with every {NAME} replaced by references[NAME] (which may name others in turn)."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in references:
            raise HardwareTableError(f"{where}: unknown reference {{{name}}}; known: {', '.join(sorted(references))}")
        if depth > 8:
            raise HardwareTableError(f"{where}: references nest too deep (a cycle?) at {{{name}}}")
        return _expand(references[name], references, f"{where} via {{{name}}}", depth + 1)

    return _REFERENCE.sub(one, text)


def _entry(raw: Any, index: int, references: Mapping[str, str], file: Path) -> DeviceSpec:
    where = f"{file}: gpus[{index}]"
    if not isinstance(raw, dict):
        raise HardwareTableError(f"{where}: expected an object, got {type(raw).__name__}")
    if isinstance(raw.get("name"), str):
        where += f" ({raw['name']})"
    unknown = set(raw) - set(_FIELDS)
    if unknown:
        raise HardwareTableError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(_FIELDS)}")
    missing = [name for name in _REQUIRED if name not in raw]
    if missing:
        raise HardwareTableError(f"{where}: missing field(s) {missing}")

    def bad(name: str, expected: str) -> HardwareTableError:
        return HardwareTableError(f"{where}: {name!r} must be {expected}, got {raw[name]!r}")

    for name in _TEXT:
        if name in raw and not isinstance(raw[name], str):
            raise bad(name, "a string")
    if not _is_number(raw["bandwidth_tbs"]) or raw["bandwidth_tbs"] <= 0:
        raise bad("bandwidth_tbs", "a positive number (TB/s)")
    tflops = raw["tflops"]
    if (not isinstance(tflops, dict) or not tflops
            or any(k not in MATH_TYPES or not _is_number(v) or v <= 0 for k, v in tflops.items())):
        raise bad("tflops", f"an object of positive numbers keyed by {', '.join(MATH_TYPES)}")
    for name in ("sm_count", "warp_size", "max_warps_per_sm", "max_blocks_per_sm"):
        value = raw.get(name, 1)
        if value is None and name != "warp_size":
            continue
        if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise bad(name, "a positive integer")
    for name in _NUMBER_OR_NONE:
        if name in raw and raw[name] is not None and not (_is_number(raw[name]) and raw[name] > 0):
            raise bad(name, "a positive number or null")
    if "aliases" in raw and not (isinstance(raw["aliases"], list) and all(isinstance(a, str) and a for a in raw["aliases"])):
        raise bad("aliases", "a list of non-empty strings")
    if "sources" in raw and not (isinstance(raw["sources"], dict)
                                 and all(isinstance(v, str) for v in raw["sources"].values())):
        raise bad("sources", "an object of strings")
    values = dict(raw)
    values["tflops"] = dict(tflops)
    values["aliases"] = tuple(raw.get("aliases", ()))
    values["sources"] = {k: _expand(v, references, f"{where}: sources[{k!r}]")
                         for k, v in raw.get("sources", {}).items()}
    if "notes" in raw:
        values["notes"] = _expand(raw["notes"], references, f"{where}: notes")
    return DeviceSpec(**values)


def load_table(file: Path = TABLE_FILE) -> tuple[DeviceSpec, ...]:
    """Every entry of the GPU table file, checked (HardwareTableError names what is wrong)."""
    try:
        data = json.loads(Path(file).read_text(encoding="utf-8"))
    except OSError as exc:
        raise HardwareTableError(f"{file}: cannot read the GPU table ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise HardwareTableError(f"{file}: not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), list):
        raise HardwareTableError(f'{file}: expected an object with a "gpus" list')
    references = data.get("references", {})
    if not isinstance(references, dict) or not all(isinstance(v, str) for v in references.values()):
        raise HardwareTableError(f'{file}: "references" must be an object of strings')
    specs = tuple(_entry(raw, i, references, Path(file)) for i, raw in enumerate(data["gpus"]))
    seen: set[str] = set()
    for spec in specs:
        if spec.name.lower() in seen:
            raise HardwareTableError(f"{file}: two entries are named {spec.name!r}")
        seen.add(spec.name.lower())
    return specs


SPECS: tuple[DeviceSpec, ...] = load_table()  # loaded once, at import


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
