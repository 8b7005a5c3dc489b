"""The optimizer: sees the correct kernels so far with what the judge measured (per-shape
latencies against the reference, the speedup and its interval, the roofline fraction where the
task has a cost model, the judge's notes), in ascending order of performance, and writes a
faster one. The judge's profile of the fastest kernel and of the reference (where made) comes
with them (agent/profile_text.py)."""

from __future__ import annotations

from typing import Any, Sequence

from .memory import Attempt, CaseTiming, Mode
from .profile_text import start_context
from .prompts import PromptLibrary

DEFAULT_HISTORY = 5  # GEAK's ancestor_num


def _timing_row(t: CaseTiming) -> dict[str, Any]:
    ci = f"{t.ci95[0]:.3f}-{t.ci95[1]:.3f}" if t.ci95 else "-"
    roof = f"{t.roofline_ms / t.cand_ms:.0%}" if t.roofline_ms and t.cand_ms else "-"
    return {"label": t.label, "ref_ms": t.ref_ms, "cand_ms": t.cand_ms, "speedup": t.speedup,
            "ci95_text": ci, "roofline_text": roof}


def history_view(correct: Sequence[Attempt], limit: int = DEFAULT_HISTORY) -> list[dict[str, Any]]:
    """The `limit` fastest correct kernels, slowest first (the input is in ascending order)."""
    chosen = list(correct)[-limit:] if limit > 0 else []
    return [{"index": a.index, "code": a.code or "", "strategy": a.strategy, "speedup": a.speedup,
             "ci95": a.speedup_ci95, "timings": [_timing_row(t) for t in a.timings], "flags": list(a.flags)}
            for a in chosen]


def failed_ideas(attempts: Sequence[Attempt]) -> list[str]:
    """Optimizations that did not pass, so the model does not retry them blindly."""
    out = []
    for a in attempts:
        if a.mode == Mode.OPTIMIZE and not a.passed and a.strategy:
            out.append(f"{a.strategy.strip().splitlines()[0][:200]} -> {a.kind}: {a.reason[:160]}")
    return out[-5:]


def messages(prompts: PromptLibrary, base: dict[str, Any], correct: Sequence[Attempt],
             attempts: Sequence[Attempt], limit: int = DEFAULT_HISTORY) -> list[dict]:
    # the profile is of the kernel it starts from: the fastest correct one (the last of `correct`)
    return prompts.messages("optimize", **base, history=history_view(correct, limit),
                            failed_ideas=failed_ideas(attempts), **start_context(correct))
