"""One LLM call of the agent: send, account, record, and turn every failure into data.

The agent talks to any `protocols.LLM` (the `LLMClient.complete` signature). Every call, answered or
not, is handed to `on_call` (the run store records it) before the caller sees the result, so a
run killed right after a call keeps it; the response cache makes the resumed run's identical
call free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from .answers import MAX_ANSWER_CHARS, bounded
from .protocols import LLM


@dataclass(frozen=True)
class CallParams:
    temperature: float = 1.0
    max_tokens: int | None = None
    seed: int | None = None        # the run's seed: distinct runs sample differently
    sample_index: int = 0          # tells apart identical prompts of different runs in the cache


@dataclass(frozen=True)
class Reply:
    role: str                      # "generate", "fix", "reflect", "optimize", ... (a plain string)
    messages: list[dict]
    text: str
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cache_hit: bool = False
    finish_reason: str | None = None
    latency_s: float = 0.0
    error: str = ""                # the call failed (after retries): why
    created: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def ask(llm: LLM, role: str, messages: list[dict], params: CallParams, tags: dict[str, str],
        on_call: Callable[[Reply], None] | None = None) -> Reply:
    """Send one prompt. Never raises for what the model or the provider does."""
    from ..llm.errors import LLMError

    started = time.perf_counter()
    try:
        completion = llm.complete(messages, temperature=params.temperature, max_tokens=params.max_tokens,
                                  seed=params.seed, sample_index=params.sample_index, tags=tags)
    except LLMError as exc:
        reply = Reply(role, messages, "", error=f"{type(exc).__name__}: {exc}"[:2000],
                      latency_s=time.perf_counter() - started)
    else:
        usage = completion.usage
        hit = bool(completion.cache_hit)
        reply = Reply(role, messages, bounded(completion.text or "", MAX_ANSWER_CHARS), completion.model,
                      0 if hit else int(usage.input_tokens or 0), 0 if hit else int(usage.output_tokens or 0),
                      0.0 if hit else float(completion.cost_usd or 0.0), hit, completion.finish_reason,
                      completion.latency_s)
    if on_call is not None:
        on_call(reply)
    return reply
