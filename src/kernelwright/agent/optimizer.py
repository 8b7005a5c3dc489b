"""The optimizer: sees the correct kernels so far with what the judge measured (per-shape
latencies against the reference, the speedup and its interval, the roofline fraction where the
task has a cost model, the judge's notes), in ascending order of performance, and writes a
faster one. The judge's profile of the fastest kernel and of the reference (where made) comes
with them (agent/profile_text.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .memory import Attempt, CaseTiming, Mode
from .profile_text import start_context
from .prompts import PromptLibrary

if TYPE_CHECKING:
    from .archive import Choice, Entry

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
        if a.mode in (Mode.OPTIMIZE, Mode.CROSSOVER) and not a.passed and a.strategy:
            out.append(f"{a.strategy.strip().splitlines()[0][:200]} -> {a.kind}: {a.reason[:160]}")
    return out[-5:]


def messages(prompts: PromptLibrary, base: dict[str, Any], correct: Sequence[Attempt],
             attempts: Sequence[Attempt], limit: int = DEFAULT_HISTORY) -> list[dict]:
    # the profile is of the kernel it starts from: the fastest correct one (the last of `correct`)
    return prompts.messages("optimize", **base, history=history_view(correct, limit),
                            failed_ideas=failed_ideas(attempts), **start_context(correct))


def entry_view(entry: Entry) -> dict[str, Any]:
    """An archive entry as the templates show a kernel; `index` names its island and attempt,
    since it may come from another run."""
    a = entry.attempt
    return {"index": f"run {entry.run}, attempt {entry.index}", "code": entry.code, "strategy": entry.strategy,
            "speedup": entry.speedup, "ci95": a.speedup_ci95 if a else None,
            "timings": [_timing_row(t) for t in a.timings] if a else [], "flags": list(a.flags) if a else []}


def evolve_messages(prompts: PromptLibrary, base: dict[str, Any], choice: Choice,
                    attempts: Sequence[Attempt]) -> list[dict]:
    """--search evolve: the optimizer's prompt (the parent and its inspirations, each with its
    speed) or the crossover prompt (the parent and its mate); the profile is the parent's."""
    context = {**base, "failed_ideas": failed_ideas(attempts), **start_context([choice.parent.attempt])}
    if context["profile"]:
        context["profile_subject"] = f"the parent (run {choice.parent.run}, attempt {choice.parent.index})"
    if choice.mode == Mode.CROSSOVER:
        mates = [entry_view(choice.parent), entry_view(choice.inspirations[0])]
        return prompts.messages("crossover", **context, mates=mates)
    return prompts.messages("optimize", **context, history=[entry_view(choice.parent)], evolve=True,
                            inspirations=[entry_view(e) for e in choice.inspirations])
