"""A profile (`Verdict.profile`, docs/profile.md) as rich tables for people: `kernelwright profile`.

A pure function of the profile dict (`profile_table`), so it is tested on a recorded profile
without a GPU. The numbers are formatted by the same helpers as the prompts' (agent/profile_text.py),
so a person reads what the optimizer read. Every string that came from a profile is escaped: a
kernel name is the candidate's to choose, and rich markup in it must print as written.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..agent.profile_text import (
    MAX_FULL_KERNELS,
    as_number,
    clip,
    header,
    human_bytes,
    measured_line,
    pct,
    skipped_line,
)

MAX_ROWS = 32  # the judge keeps at most 32 launches per side; a person may read them all
NO_PROFILE = "none was made (profiling off, or the kernel did not pass)"
SIDE_TITLES = {"candidate": "candidate (launches: its own process's report)", "reference": "reference"}


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else escape(str(value))


def _grid(x: dict[str, Any]) -> str | None:
    grid = x.get("grid")
    if not isinstance(grid, list):
        return None
    text = "x".join(str(g) for g in grid)
    # a 2-d or 3-d grid's program count is not read at a glance
    if sum(1 for g in grid if g != 1) > 1 and x.get("programs") is not None:
        text += f" ({x['programs']})"
    return text


def _pair(a: Any, b: Any, sep: str = "/") -> str | None:
    if a is None and b is None:
        return None
    return f"{'-' if a is None else a}{sep}{'-' if b is None else b}"


LEGEND = ("w/s: warps/stages; regs: registers per thread; smem: shared memory; occ.: theoretical occupancy and "
          "what limits it; %call: share of the call's device time")
LIMIT_ABBREV = {"registers": "regs", "shared_memory": "smem", "warps": "warps", "blocks": "blocks"}


def launches_table(side: dict[str, Any], title: str) -> Table:
    """One side's own launches, in order (headers short enough for 80 columns: the caption says them)."""
    table = Table(title=escape(title), box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    launches = [x for x in side.get("launches") or () if isinstance(x, dict)]
    for col in ("kernel", "grid", "w/s", "regs", "spills", "smem", "occ.", "ms", "%call"):
        table.add_column(col, justify="left" if col in ("kernel", "grid", "occ.") else "right",
                         overflow="fold")
    for x in launches[:MAX_ROWS]:
        occupancy = pct(x.get("occupancy"))
        if occupancy and x.get("occupancy_limit"):
            occupancy += f" {LIMIT_ABBREV.get(x['occupancy_limit'], x['occupancy_limit'])}"
        table.add_row(_cell(clip(x.get("kernel"), 80)), _cell(_grid(x)), _cell(_pair(x.get("num_warps"), x.get("num_stages"))),
                      _cell(x.get("registers")), _cell(x.get("spills")), _cell(human_bytes(x.get("shared_bytes"))),
                      _cell(occupancy), _cell(_fmt(x.get("time_ms"))), _cell(pct(x.get("time_share"))))
    more = len(launches) - min(len(launches), MAX_ROWS) + int(as_number(side.get("more_launches")) or 0)
    if more:
        table.add_row(f"and {more} more", *[""] * 8)
    if not launches:
        table.add_row("no launch of its own kernels recorded", *[""] * 8)
    return table


def full_table(full: dict[str, Any], title: str) -> RenderableType:
    """The full profile's counters per kernel (Nsight Compute / rocprofv3, run by the judge)."""
    if full.get("skipped"):
        return Text(f"{title}: no full profile: {clip(full['skipped'], 300)}", style="yellow")
    dram = human_bytes(full.get("dram_bytes"))
    caption = f"{full.get('tool') or 'profiler'}, {as_number(full.get('seconds')) or 0:.1f} s" + (
        f", DRAM traffic {dram}" if dram else "") + "; r/w: read/written; sect/req: L1 sectors per request (16 when lanes read contiguous 16-byte vectors)"
    table = Table(title=escape(f"{title}: full profile"), caption=escape(caption), box=box.SIMPLE_HEAD,
                  title_justify="left", caption_justify="left", pad_edge=False)
    for col in ("kernel", "DRAM r/w", "sect/req", "DRAM%", "SM%", "L2hit%", "occ.", "top stalls"):
        table.add_column(col, justify="left" if col in ("kernel", "top stalls") else "right", overflow="fold")
    kernels = [k for k in full.get("kernels") or () if isinstance(k, dict)]
    for k in kernels[:MAX_FULL_KERNELS * 4]:
        stalls = [s for s in k.get("stalls") or () if isinstance(s, (list, tuple)) and len(s) == 2]
        top = ", ".join(f"{clip(r, 40)} {pct(f) or '-'}" for r, f in stalls[:3])
        table.add_row(_cell(clip(k.get("kernel"), 80)),
                      _cell(_pair(human_bytes(k.get("dram_read_bytes")), human_bytes(k.get("dram_write_bytes")))),
                      _cell(_fmt(k.get("l1_sectors_per_request"))),
                      _cell(_fmt(k.get("dram_throughput_pct"))), _cell(_fmt(k.get("sm_throughput_pct"))),
                      _cell(_fmt(k.get("l2_hit_rate_pct"))), _cell(pct(k.get("achieved_occupancy"))), _cell(top))
    return table


def _fmt(value: Any) -> str | None:
    value = as_number(value)
    return None if value is None else f"{value:.4g}"


def diagnosis_text(side: dict[str, Any], title: str) -> Text:
    diags = [d for d in side.get("diagnosis") or () if isinstance(d, dict) and d.get("text")]
    if not diags:
        return Text(f"{title}: no diagnosis", style="dim")
    text = Text()
    for i, d in enumerate(diags):
        text.append(("\n" if i else "") + f"{title}: ", style="bold")
        text.append(clip(d["text"], 300))
        text.append(f"  [{clip(d.get('rule'), 40)}]", style="dim")
    return text


def profile_table(profile: Any) -> RenderableType:
    """The profile for a terminal: its header, then per side a table of its launches, its
    diagnoses and its full-profile counters; a skipped profile is its sentence."""
    if not isinstance(profile, dict) or not profile:
        return Text(f"no profile: {NO_PROFILE}", style="yellow")
    if profile.get("skipped") or not any(isinstance(profile.get(s), dict) for s in SIDE_TITLES):
        return Text(skipped_line(profile.get("skipped") or "it holds no measurement"), style="yellow")
    parts: list[RenderableType] = [Text(header(profile), style="bold"), Text(LEGEND, style="dim")]
    for name, title in SIDE_TITLES.items():
        side = profile.get(name)
        if not isinstance(side, dict):
            continue
        parts.append(launches_table(side, title))
        parts.append(Text(f"{name}: {measured_line(side)}"))
        parts.append(diagnosis_text(side, name))
        if isinstance(side.get("full"), dict) and side["full"]:
            parts.append(full_table(side["full"], name))
    for error in profile.get("errors") or ():
        parts.append(Text(f"not measured: {clip(error, 300)}", style="yellow"))
    return Group(*parts)
