"""Retries with exponential backoff, for the errors that can heal.

kernelwright retries itself and builds the SDK clients with `max_retries=0`: the SDKs' own
retries are invisible to the caller, so attempts could not be counted or reported, the backoff
could not be tuned (tests need millisecond delays, long runs need minutes), and the
concurrency bound would be held across the SDK's sleeps.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from .errors import LLMError, LLMTransientError

T = TypeVar("T")

_ADVICE = {
    "rate_limit": "the provider kept rate-limiting; lower llm.max_concurrency or raise "
                  "llm.max_retries",
    "server_error": "the provider kept failing; try again later",
    "timeout": "raise llm.timeout_s (--timeout), or check that the server is not overloaded",
    "connection": "check that the server is running and the base_url is right",
    "malformed_response": "check that base_url points at the API root (usually ending in /v1)",
}


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 6
    base_delay_s: float = 2.0
    max_delay_s: float = 60.0

    def delay_s(self, retry_number: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Delay before retry number `retry_number` (1-based). Jitter keeps parallel workers
        that hit the same rate limit from retrying in lockstep; a server's Retry-After is
        honoured, up to `max_delay_s`."""
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (retry_number - 1))
        delay = backoff * (0.5 + 0.5 * rng.random())
        if retry_after_s is not None:
            delay = max(delay, min(retry_after_s, self.max_delay_s))
        return delay


@dataclass(frozen=True)
class RetryNotice:
    """A failed attempt about to be retried: what a progress line shows while a call waits."""

    retry: int                  # the retry about to be made, from 1
    max_retries: int
    error: LLMTransientError    # why the last attempt failed
    delay_s: float              # the wait before the retry

    def describe(self) -> str:
        return f"retry {self.retry} of {self.max_retries}, {self.error.short}"


def call_with_retries(
    send: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    on_retry: Callable[[RetryNotice], None] | None = None,
) -> tuple[T, int]:
    """Call `send` until it succeeds, raises a non-transient error, or retries run out.
    Returns (result, attempts). Every raised `LLMError` carries `.attempts`. `on_retry` hears of
    each retry before its wait (a silent wait of minutes looks like a hang); an `LLMError` it raises
ends the retries."""
    rng = rng or random.Random()
    attempt = 0
    while True:
        attempt += 1
        try:
            return send(), attempt
        except LLMTransientError as exc:
            if attempt > policy.max_retries:
                final = LLMTransientError(
                    f"gave up after {attempt} attempts: {exc}; {_ADVICE.get(exc.kind, '')}".rstrip("; "),
                    kind=exc.kind, status=exc.status,
                )
                final.attempts = attempt
                raise final from exc
            delay = policy.delay_s(attempt, exc.retry_after_s, rng)
            if on_retry is not None:
                try:
                    on_retry(RetryNotice(attempt, policy.max_retries, exc, delay))
                except LLMError as stop:  # the caller knows retrying is pointless (the service is down)
                    stop.attempts = attempt
                    raise
            sleep(delay)
        except LLMError as exc:
            exc.attempts = attempt
            raise
