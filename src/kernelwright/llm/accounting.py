"""Token usage, estimated cost and running totals.

Costs are estimates from a price table (USD per million tokens). The built-in table holds list
prices of a few common models as published by the providers; they change, so users override or
extend it in `[llm.prices."provider/model"]`. A model missing from the table has an *unknown*
cost (None), never 0, so totals cannot silently understate spending; set its prices to 0 for a
free local server.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping

from .errors import LLMConfigError

PRICES_AS_OF = "2025-10"


@dataclass(frozen=True)
class TokenUsage:
    """Token counts of one response. `input_tokens` includes `cached_input_tokens`;
    `output_tokens` includes `reasoning_tokens` (both as OpenAI reports them; the Anthropic
    adapter converts to this convention)."""

    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int | None = None  # None: the provider does not report it
    cached_input_tokens: int | None = None


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M input tokens
    output: float  # USD per 1M output tokens (reasoning tokens are billed as output)
    cached_input: float | None = None  # USD per 1M cache-read input tokens; None: as input

    def cost(self, usage: TokenUsage) -> float:
        cached = usage.cached_input_tokens or 0
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return (
            (usage.input_tokens - cached) * self.input
            + cached * cached_rate
            + usage.output_tokens * self.output
        ) / 1_000_000


# List prices, USD per 1M tokens, as of PRICES_AS_OF. Estimates: check the provider's page.
BUILTIN_PRICES: dict[str, Price] = {
    "openai/gpt-5": Price(1.25, 10.00, 0.125),
    "openai/gpt-5-mini": Price(0.25, 2.00, 0.025),
    "openai/gpt-4.1": Price(2.00, 8.00, 0.50),
    "openai/gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "openai/gpt-4o": Price(2.50, 10.00, 1.25),
    "openai/gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "openai/o3": Price(2.00, 8.00, 0.50),
    "openai/o4-mini": Price(1.10, 4.40, 0.275),
    "anthropic/claude-opus-4-1": Price(15.00, 75.00, 1.50),
    "anthropic/claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
    "anthropic/claude-sonnet-4-0": Price(3.00, 15.00, 0.30),
    "anthropic/claude-haiku-4-5": Price(1.00, 5.00, 0.10),
}


class PriceTable:
    """Built-in prices overlaid with the user's; lookups by `provider/model`."""

    def __init__(self, overrides: Mapping[str, Mapping[str, float]] | None = None,
                 *, builtin: Mapping[str, Price] = BUILTIN_PRICES) -> None:
        self._prices = dict(builtin)
        for model_id, entry in (overrides or {}).items():
            self._prices[model_id] = _price_from_table(model_id, entry)

    def price(self, model_id: str) -> Price | None:
        return self._prices.get(model_id)

    def cost(self, model_id: str, usage: TokenUsage) -> float | None:
        price = self.price(model_id)
        return None if price is None else price.cost(usage)


def _price_from_table(model_id: str, entry: Mapping[str, float]) -> Price:
    where = f'[llm.prices."{model_id}"]'
    if not isinstance(entry, Mapping) or "input" not in entry or "output" not in entry:
        raise LLMConfigError(f"{where} needs input and output (USD per 1M tokens), "
                             f"e.g. input = 2.0, output = 8.0")
    unknown = set(entry) - {"input", "output", "cached_input"}
    if unknown:
        raise LLMConfigError(f"{where}: unknown keys {sorted(unknown)}; "
                             f"allowed: input, output, cached_input")
    try:
        cached = entry.get("cached_input")
        return Price(float(entry["input"]), float(entry["output"]),
                     None if cached is None else float(cached))
    except (TypeError, ValueError):
        raise LLMConfigError(f"{where}: prices must be numbers, got {dict(entry)}") from None


@dataclass(frozen=True)
class UsageRecord:
    """One `complete()` call, successful or not, served from the cache or not."""

    model: str  # provider/model
    usage: TokenUsage
    latency_s: float  # wall time of the whole call, retries and backoff included
    cost_usd: float | None  # None: price unknown; 0 for cache hits
    cache_hit: bool
    attempts: int  # HTTP requests sent (0 for a cache hit)
    tags: Mapping[str, str] = field(default_factory=dict)
    error: str | None = None  # why the call failed; None if it succeeded


@dataclass(frozen=True)
class UsageTotals:
    calls: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cached_input_tokens: int = 0
    cost_usd: float = 0.0  # over calls with a known price
    calls_with_unknown_cost: int = 0
    latency_s: float = 0.0

    def add(self, record: UsageRecord) -> "UsageTotals":
        u = record.usage
        unknown_cost = record.cost_usd is None and not record.cache_hit and record.error is None
        return replace(
            self,
            calls=self.calls + 1,
            cache_hits=self.cache_hits + record.cache_hit,
            failed_calls=self.failed_calls + (record.error is not None),
            attempts=self.attempts + record.attempts,
            input_tokens=self.input_tokens + u.input_tokens,
            output_tokens=self.output_tokens + u.output_tokens,
            reasoning_tokens=self.reasoning_tokens + (u.reasoning_tokens or 0),
            cached_input_tokens=self.cached_input_tokens + (u.cached_input_tokens or 0),
            cost_usd=self.cost_usd + (record.cost_usd or 0.0),
            calls_with_unknown_cost=self.calls_with_unknown_cost + unknown_cost,
            latency_s=self.latency_s + record.latency_s,
        )

    def describe(self) -> str:
        """One line for progress displays."""
        cost = f"${self.cost_usd:.4f}"
        if self.calls_with_unknown_cost:
            cost += f" (+{self.calls_with_unknown_cost} calls of unknown price)"
        return (f"{self.calls} calls ({self.cache_hits} cached, {self.failed_calls} failed), "
                f"{self.input_tokens:,} in / {self.output_tokens:,} out tokens, {cost}")


class UsageLedger:
    """Thread-safe record of every call, with totals overall and per tag value.

    Cache hits are recorded too (cost 0, no tokens billed): they are counted separately so a
    resumed run shows how much it reused. Listeners (e.g. a live progress display) are called
    after each record, on the calling thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[UsageRecord] = []
        self._listeners: list[Callable[[UsageRecord], None]] = []

    def record(self, record: UsageRecord) -> None:
        with self._lock:
            self._records.append(record)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(record)

    def add_listener(self, listener: Callable[[UsageRecord], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    @property
    def records(self) -> list[UsageRecord]:
        with self._lock:
            return list(self._records)

    def totals(self, **tags: str) -> UsageTotals:
        """Totals over the records whose tags include all of `tags` (all records if none)."""
        return _sum(r for r in self.records if all(r.tags.get(k) == v for k, v in tags.items()))

    def totals_by(self, tag: str) -> dict[str, UsageTotals]:
        """Totals per value of one tag, e.g. `totals_by("task")`; untagged records are left out."""
        groups: dict[str, list[UsageRecord]] = defaultdict(list)
        for r in self.records:
            if tag in r.tags:
                groups[r.tags[tag]].append(r)
        return {value: _sum(records) for value, records in sorted(groups.items())}


def _sum(records: Iterable[UsageRecord]) -> UsageTotals:
    totals = UsageTotals()
    for r in records:
        totals = totals.add(r)
    return totals
