"""The usage table shown during runs."""

from __future__ import annotations

import io

from rich.console import Console

from kernelwright.llm import TokenUsage, UsageLedger, UsageRecord
from kernelwright.llm.display import live_usage, usage_table


def render(table) -> str:
    console = Console(file=io.StringIO(), width=120)
    console.print(table)
    return console.file.getvalue()


def cells(lines: list[str], first: str) -> list[str]:
    row = next(line for line in lines if line.strip("│ ").startswith(first))
    return [cell.strip() for cell in row.strip().strip("│").split("│")]


def record(task: str, cost: float | None, cache_hit: bool = False) -> UsageRecord:
    usage = TokenUsage() if cache_hit else TokenUsage(1000, 200)  # as the client records hits
    return UsageRecord("openai/m", usage, 0.5, cost, cache_hit, 0 if cache_hit else 1,
                       {"task": task})


def test_table_shows_totals_per_task_and_overall():
    ledger = UsageLedger()
    for r in (record("softmax", 0.01), record("softmax", 0.0, cache_hit=True),
              record("matmul", 0.02)):
        ledger.record(r)

    lines = render(usage_table(ledger, by="task")).splitlines()

    assert cells(lines, "softmax") == ["softmax", "2", "1", "0", "1,000", "200", "0.0100"]
    assert cells(lines, "matmul") == ["matmul", "1", "0", "0", "1,000", "200", "0.0200"]
    assert cells(lines, "total") == ["total", "3", "1", "0", "2,000", "400", "0.0300"]


def test_unknown_prices_make_the_total_a_lower_bound():
    ledger = UsageLedger()
    ledger.record(record("softmax", None))

    assert "≥ 0.0000" in render(usage_table(ledger))


def test_live_view_follows_the_ledger():
    ledger = UsageLedger()
    console = Console(file=io.StringIO(), width=120, force_terminal=False)

    with live_usage(ledger, by="task", console=console) as live:
        ledger.record(record("rmsnorm", 0.5))
        shown = render(live.renderable)

    assert "rmsnorm" in shown and "0.5000" in shown
