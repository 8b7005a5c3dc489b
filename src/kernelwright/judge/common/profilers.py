"""Reading what a hardware profiler wrote: NVIDIA Nsight Compute's CSV (`ncu --csv`) and AMD
rocprofv3's counter_collection.csv, as pure functions of the text, into the FULL profile's per-kernel
fields (docs/profile.md; /work/shared-notes/profile-contract.md).

Nothing here raises on odd input: a metric that is missing, "n/a", or not a number reads as None,
so a profiler version that renamed a metric costs that field, never the profile. Values arrive
with units and thousands separators ("10,240,000", "1.2 Mbyte" where `--print-units base` was
not given); both are read. Several launches of one kernel are one entry: bytes, sectors and
requests are summed, percentages are averaged weighted by each launch's duration (equal weights
where no duration was measured).

Standard library only (judge/common)."""

from __future__ import annotations

import csv
import io
import re

# --- Nsight Compute ------------------------------------------------------------------------

# The metrics the full profile asks ncu for (`ncu --metrics`), by what they become. Names as in
# Nsight Compute 2025.x for sm_70 and later (`ncu --query-metrics` lists them; the GPU script
# benchmarks/profile_gpu.py greps that list so a renamed one shows at once).
NCU_METRICS = {
    "duration": "gpu__time_duration.sum",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "l2_sectors": "lts__t_sectors.sum",
    "l2_hit_rate": "lts__t_sector_hit_rate.pct",
    "ld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "ld_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "st_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "st_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    # local memory traffic: register spills (and local arrays) that were executed
    "local_ld": "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum",
    "local_st": "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum",
    "dram_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "grid": "launch__grid_size",
    "registers": "launch__registers_per_thread",
}
# Warp-stall reasons: the WarpStateStats family (average warps stalled per issued instruction,
# one metric per reason), asked for with one regular expression.
NCU_STALL_REGEX = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
_STALL = re.compile(r"^smsp__(?:average_warps_issue_stalled|pcsamp_warps_issue_stalled|warp_issue_stalled)_"
                    r"([a-z0-9_]+?)(?:_per_issue_active\.ratio|_per_warp_active\.pct|\.sum|\.ratio|\.pct)?$")
# Not a stall: the warp that issued; "not_issued" variants repeat the issued ones.
_NOT_STALLS = {"selected"}
SECTOR_BYTES = 32

# Metric columns of the "details" layout (`--page details`) against the wide "raw" one.
_LONG_COLUMNS = ("Metric Name", "Metric Value")
_UNIT_SCALE = {
    "": 1.0, "byte": 1.0, "bytes": 1.0, "b": 1.0,
    "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "kib": 1024.0, "mib": 1024.0 ** 2, "gib": 1024.0 ** 3,
    # times, to milliseconds
    "second": 1e3, "s": 1e3, "msecond": 1.0, "ms": 1.0, "usecond": 1e-3, "us": 1e-3,
    "nsecond": 1e-6, "ns": 1e-6,
}


def number(text, unit: str = "") -> float | None:
    """A profiler's value as a float (scaled from `unit` to bytes or milliseconds), or None for
    "n/a", empty or non-numeric text. Thousands separators are dropped: ncu writes "10,240,000"."""
    if text is None:
        return None
    s = str(text).strip().strip('"').replace(",", "").replace("\u202f", "").replace(" ", "")
    if not s or s.lower() in ("n/a", "na", "nan", "-", "none"):
        return None
    try:
        value = float(s)
    except ValueError:
        return None
    if value != value:  # NaN
        return None
    return value * _UNIT_SCALE.get(unit.strip().lower(), 1.0)


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV part of a profiler's output: from the first line that starts with a quoted "ID"
    (ncu prints ==PROF== lines, and the profiled program may print anything, before it)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"') or line.startswith("ID,")), None)
    if start is None:
        return []
    return [row for row in csv.reader(io.StringIO("\n".join(lines[start:]))) if row]


def _ncu_launches(rows: list[list[str]]) -> list[dict]:
    """One dict per profiled launch: {"kernel", "id", metric name: (value text, unit)}."""
    header = rows[0]
    col = {name: i for i, name in enumerate(header)}
    if all(c in col for c in _LONG_COLUMNS):  # details layout: one row per (launch, metric)
        unit_at = col.get("Metric Unit")
        by_id: dict[str, dict] = {}
        for row in rows[1:]:
            if len(row) < len(header):
                continue
            launch = by_id.setdefault(row[col["ID"]], {"kernel": row[col.get("Kernel Name", 0)], "id": row[col["ID"]]})
            unit = row[unit_at] if unit_at is not None else ""
            launch[row[col["Metric Name"]]] = (row[col["Metric Value"]], unit)
        return list(by_id.values())
    body = rows[1:]
    units = [""] * len(header)
    if body and not body[0][0].strip():  # the units row: its ID cell is empty
        units, body = body[0] + [""] * (len(header) - len(body[0])), body[1:]
    launches = []
    for row in body:
        if len(row) < len(header):
            continue
        launch = {"kernel": row[col.get("Kernel Name", 0)], "id": row[0]}
        for i, name in enumerate(header):
            launch[name] = (row[i], units[i])
        launches.append(launch)
    return launches


def _value(launch: dict, metric: str) -> float | None:
    got = launch.get(metric)
    return number(got[0], got[1]) if got else None


def parse_ncu_csv(text: str) -> list[dict]:
    """Every launch in an `ncu --csv` output (raw or details page), in order: {"kernel", "id",
    "duration_ms", and each key of `NCU_METRICS` as a number or None, "stalls": {reason: value}}."""
    rows = _csv_rows(text)
    if not rows:
        return []
    out = []
    for launch in _ncu_launches(rows):
        item = {"kernel": launch["kernel"], "id": launch["id"]}
        for key, metric in NCU_METRICS.items():
            item[key] = _value(launch, metric)
        item["duration_ms"] = item.pop("duration")
        local = _sum([item["local_ld"], item["local_st"]])
        item["local_bytes"] = local * SECTOR_BYTES if local is not None else None
        stalls = {}
        for name, got in launch.items():
            match = _STALL.match(name) if isinstance(got, tuple) else None
            if match and not match.group(1).endswith("not_issued") and match.group(1) not in _NOT_STALLS:
                value = number(got[0])
                if value is not None:
                    stalls[match.group(1)] = stalls.get(match.group(1), 0.0) + value
        item["stalls"] = stalls
        out.append(item)
    return out


# --- rocprofv3 ------------------------------------------------------------------------------

# Counters asked for (`rocprofv3 --pmc`), by what they become. FETCH_SIZE and WRITE_SIZE are in
# kilobytes (rocprofv3's derived metrics, MI200/MI300 documentation); MemUnitBusy and VALUBusy are
# percentages. There is no AMD machine here: the format follows ROCm's rocprofv3 documentation
# (counter_collection.csv, one row per dispatch and counter), not a file the project's own run wrote.
ROCPROF_COUNTERS = ("FETCH_SIZE", "WRITE_SIZE", "TCC_HIT_sum", "TCC_MISS_sum", "MemUnitBusy", "VALUBusy")


def parse_rocprof_csv(text: str) -> list[dict]:
    """Every dispatch in a rocprofv3 counter_collection.csv, in dispatch order, with the same keys
    as `parse_ncu_csv` (what AMD counts no equivalent of is None; no stall reasons)."""
    reader = csv.DictReader(io.StringIO(text))
    by_dispatch: dict[str, dict] = {}
    for row in reader:
        dispatch = row.get("Dispatch_Id") or row.get("Correlation_Id") or ""
        d = by_dispatch.setdefault(dispatch, {"kernel": row.get("Kernel_Name", ""), "id": dispatch, "counters": {},
                                              "start": number(row.get("Start_Timestamp")),
                                              "end": number(row.get("End_Timestamp")),
                                              "grid": number(row.get("Grid_Size")),
                                              "workgroup": number(row.get("Workgroup_Size")),
                                              "scratch": number(row.get("Scratch_Size"))})
        value = number(row.get("Counter_Value"))
        name = (row.get("Counter_Name") or "").strip()
        if name and value is not None:
            d["counters"][name] = d["counters"].get(name, 0.0) + value
    out = []
    for d in sorted(by_dispatch.values(), key=lambda d: number(d["id"]) or 0.0):
        c = d["counters"]
        hits, misses = c.get("TCC_HIT_sum"), c.get("TCC_MISS_sum")
        item = {key: None for key in NCU_METRICS}
        item.pop("duration")
        item.update(kernel=d["kernel"], id=d["id"], stalls={},
                    duration_ms=(d["end"] - d["start"]) * 1e-6 if d["start"] is not None and d["end"] is not None else None,
                    dram_read=c["FETCH_SIZE"] * 1024 if "FETCH_SIZE" in c else None,
                    dram_write=c["WRITE_SIZE"] * 1024 if "WRITE_SIZE" in c else None,
                    l2_hit_rate=100.0 * hits / (hits + misses) if hits is not None and misses and hits + misses else None,
                    dram_pct=c.get("MemUnitBusy"), sm_pct=c.get("VALUBusy"),
                    # Grid_Size counts work-items; programs are workgroups
                    grid=d["grid"] / d["workgroup"] if d["grid"] and d["workgroup"] else None)
        # the scratch (private segment) a dispatch was given: where AMD's spills go (bytes per
        # work-item, not bytes moved: only whether there is any is used)
        item["local_bytes"] = d["scratch"]
        out.append(item)
    return out


# --- per kernel ----------------------------------------------------------------------------

def _sum(values) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _weighted(launches: list[dict], key: str) -> float | None:
    pairs = [(d[key], d.get("duration_ms")) for d in launches if d.get(key) is not None]
    if not pairs:
        return None
    if all(w is not None and w > 0 for _, w in pairs):
        return sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    return sum(v for v, _ in pairs) / len(pairs)


def _as_int(value: float | None) -> int | None:
    return int(round(value)) if value is not None else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _stalls(launches: list[dict], top: int) -> list[list]:
    """The top reasons as [reason, fraction of all stalls], duration-weighted over the launches."""
    totals: dict[str, float] = {}
    for d in launches:
        weight = d.get("duration_ms") or 1.0
        for reason, value in (d.get("stalls") or {}).items():
            totals[reason] = totals.get(reason, 0.0) + value * weight
    whole = sum(totals.values())
    if whole <= 0:
        return []
    ranked = sorted(totals.items(), key=lambda kv: -kv[1])[:top]
    return [[reason, round(value / whole, 4)] for reason, value in ranked]


def kernel_summary(name: str, launches: list[dict], top_stalls: int = 3) -> dict:
    """One FULL `kernels` entry from the launches of one kernel (`parse_ncu_csv` items)."""
    ld_sectors, ld_requests = _sum(d["ld_sectors"] for d in launches), _sum(d["ld_requests"] for d in launches)
    occupancy = _weighted(launches, "occupancy")
    return {
        "kernel": name,
        "launches": len(launches),
        "duration_ms": _sum(d.get("duration_ms") for d in launches),
        "dram_read_bytes": _as_int(_sum(d["dram_read"] for d in launches)),
        "dram_write_bytes": _as_int(_sum(d["dram_write"] for d in launches)),
        "l1_sectors_per_request": _ratio(ld_sectors, ld_requests),
        "l1_store_sectors_per_request": _ratio(_sum(d["st_sectors"] for d in launches),
                                               _sum(d["st_requests"] for d in launches)),
        "l2_sectors": _as_int(_sum(d["l2_sectors"] for d in launches)),
        "dram_throughput_pct": _weighted(launches, "dram_pct"),
        "sm_throughput_pct": _weighted(launches, "sm_pct"),
        # ncu gives a percentage of the SM's warp slots; the contract's occupancy is 0..1
        "achieved_occupancy": occupancy / 100.0 if occupancy is not None else None,
        "l2_hit_rate_pct": _weighted(launches, "l2_hit_rate"),
        "programs": _as_int(max((d["grid"] for d in launches if d.get("grid") is not None), default=None)),
        "registers": _as_int(max((d["registers"] for d in launches if d.get("registers") is not None),
                                 default=None)),
        "local_bytes": _as_int(_sum(d.get("local_bytes") for d in launches)),
        "stalls": _stalls(launches, top_stalls),
    }


def summarize(launches: list[dict], own: set[str] | None = None, last: int | None = None) -> list[dict]:
    """FULL `kernels`: one entry per kernel name, in order of first launch, keeping only the
    launches of `own` kernels (names of the kernels defined in the side's own file; None: all)
    and, of those, only the `last` ones (a profiler that saw the warm-up call too)."""
    kept = [d for d in launches if own is None or any(matches_kernel(d["kernel"], k) for k in own)]
    if last is not None:
        kept = kept[-last:] if last > 0 else []
    groups: dict[str, list[dict]] = {}
    for d in kept:
        groups.setdefault(d["kernel"], []).append(d)
    return [kernel_summary(name, group) for name, group in groups.items()]


def matches_kernel(profiled: str, own: str) -> bool:
    """Whether the profiler's kernel name is the Triton kernel `own`: ncu prints the function
    name, possibly demangled with a signature ("void name(...)") or a template; rocprofv3 adds a
    ".kd" suffix."""
    name = profiled.strip()
    if name.startswith("void "):
        name = name[5:]
    name = re.split(r"[(<]", name, maxsplit=1)[0].strip()
    if name.endswith(".kd"):
        name = name[:-3]
    return name == own
