"""One LLM call of the agent: send, account, record, and turn every failure into data.

The agent talks to any `protocols.LLM` (the `LLMClient.complete` signature). Every call, answered or
not, is handed to `on_call` (the run store records it) before the caller sees the result, so a
run killed right after a call keeps it; the response cache makes the resumed run's identical
call free.

A call that failed because of the service (unreachable, failing, the key refused: the error's
`service_failure`), after the client's retries, is not the model's answer: its `Reply` is
`unavailable`, and the task-run stops without storing an attempt (`ModelUnavailable`), so a
resumed run sends that call again. A failure of the request itself (too long, rejected) is an
attempt like an answer without code.
"""

from __future__ import annotations

import threading
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
    unavailable: bool = False      # ... because of the service, not of this request
    failure: str = ""              # ... in a few words: "HTTP 500", "unreadable" (a malformed body), ...
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
                      unavailable=bool(exc.service_failure), failure=_failure(exc),
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


def _failure(exc: Exception) -> str:
    """A failed call's error in a few words, for the progress line."""
    from ..llm.errors import LLMTransientError

    if isinstance(exc, LLMTransientError):
        return "unreadable" if exc.kind == "malformed_response" else exc.short
    return {"LLMAuthError": "the key was refused", "LLMModelNotFoundError": "no such model",
            "LLMCacheMissError": "not in the cache (--offline)"}.get(type(exc).__name__, type(exc).__name__)


class ModelUnavailable(Exception):
    """A task-run's call failed because of the service: the task-run stops, nothing stored."""


class Outage:
    """The first service failure of a session, shared by its task-runs: once one task-run's call
    has failed after every retry, the others start no new call (each would wait out the same
    retries, and burn its iterations on a dead endpoint), and the command says how to resume."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason: str | None = None

    def report(self, reason: str) -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason

    @property
    def reason(self) -> str | None:
        with self._lock:
            return self._reason
