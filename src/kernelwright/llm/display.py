"""Usage shown during runs: a rich table of totals (overall and per tag value) and a live view
that refreshes as calls are recorded.

    with live_usage(client.ledger, by="task"):
        run_all_tasks()
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.live import Live
from rich.table import Table

from .accounting import UsageLedger, UsageTotals


def usage_table(ledger: UsageLedger, *, by: str | None = None, title: str = "LLM usage") -> Table:
    """Totals per value of tag `by` (if given) and overall."""
    table = Table(title=title)
    for column, justify in [(by or "", "left"), ("calls", "right"), ("cached", "right"),
                            ("failed", "right"), ("tokens in", "right"), ("tokens out", "right"),
                            ("cost (USD)", "right")]:
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    rows = list(ledger.totals_by(by).items()) if by else []
    for name, totals in rows + [("total", ledger.totals())]:
        table.add_row(name, *_cells(totals), end_section=name == rows[-1][0] if rows else False)
    return table


def _cells(totals: UsageTotals) -> list[str]:
    cost = f"{totals.cost_usd:.4f}"
    if totals.calls_with_unknown_cost:
        # Some calls have no known price: the sum is a lower bound.
        cost = f"≥ {cost}"
    return [str(totals.calls), str(totals.cache_hits), str(totals.failed_calls),
            f"{totals.input_tokens:,}", f"{totals.output_tokens:,}", cost]


@contextmanager
def live_usage(ledger: UsageLedger, *, by: str | None = None,
               console: Console | None = None) -> Iterator[Live]:
    """Keep a usage table on screen, redrawn after every recorded call."""
    with Live(usage_table(ledger, by=by), console=console, refresh_per_second=4) as live:
        ledger.add_listener(lambda _record: live.update(usage_table(ledger, by=by)))
        yield live
