"""`LLMClient`: the one object agents use to talk to a model.

    client = LLMClient.from_config(load_config(), model="anthropic/claude-sonnet-4-5")
    completion = client.complete(messages, temperature=0.8, sample_index=3, tags={"task": "softmax"})
    answer = completion.extract_code(entry_point="softmax")

Each call is looked up in the response cache first; on a miss it is sent to the provider
under the per-provider concurrency bound, retried with backoff on transient errors, stored in
the cache, and recorded in the usage ledger (so are cache hits and failures). `complete_many`
runs many calls on a thread pool; the bound still holds, since it lives in the limiter.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..config import Config
from .accounting import PriceTable, TokenUsage, UsageLedger, UsageRecord
from .cache import ResponseCache, cache_key
from .concurrency import DEFAULT_LIMITER, SAME_REQUEST_LOCKS, ConcurrencyLimiter
from .errors import LLMCacheMissError, LLMConfigError, LLMError
from .models import ModelSpec, parse_model
from .parsing import CodeExtraction, extract_code
from .providers import Message, ProviderAdapter, ProviderResponse, Sampling, make_adapter
from .retry import RetryNotice, RetryPolicy, call_with_retries
from .settings import Endpoint, LLMSettings

_ROLES = {"system", "user", "assistant"}


@dataclass(frozen=True)
class Completion:
    text: str
    model: str  # provider/model
    finish_reason: str | None  # "stop", "length" (cut off at max_tokens), ...
    usage: TokenUsage
    latency_s: float
    cost_usd: float | None  # None: no price known for the model; 0 for cache hits
    cache_hit: bool
    attempts: int  # HTTP requests sent for this call (0 for a cache hit)
    sample_index: int
    cache_key: str
    response: ProviderResponse = field(repr=False, compare=False)

    def extract_code(self, entry_point: str | None = None) -> CodeExtraction:
        return extract_code(self.text, entry_point=entry_point)


@dataclass(frozen=True)
class CompletionRequest:
    """One call for `complete_many`; fields as in `LLMClient.complete`."""

    messages: Sequence[Message]
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: Sequence[str] | None = None
    seed: int | None = None
    sample_index: int = 0
    tags: Mapping[str, str] = field(default_factory=dict)


class LLMClient:
    def __init__(
        self,
        model: str | ModelSpec,
        settings: LLMSettings | None = None,
        *,
        ledger: UsageLedger | None = None,
        cache: ResponseCache | None = None,
        limiter: ConcurrencyLimiter = DEFAULT_LIMITER,
        tags: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[Mapping[str, str], RetryNotice], None] | None = None,
    ) -> None:
        """`cache=None` opens the cache at `settings.cache_path` when `settings.cache` is on.
        `tags` are added to every usage record (e.g. {"run": run_id}). `on_retry(tags, notice)`
        hears of every retry of a call (the call's tags: which task is waiting), from the
        calling thread; it may be set later, as an attribute. `on_send(tags)`, an attribute
        too, hears of a call about to be sent (not one the cache answers)."""
        self.model = parse_model(model)
        self.settings = settings or LLMSettings()
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.prices = PriceTable(self.settings.prices)
        self.tags = dict(tags or {})
        self._limiter = limiter
        self._sleep = sleep
        self.on_retry = on_retry
        self.on_send: Callable[[Mapping[str, str]], None] | None = None
        self._retry = RetryPolicy(self.settings.max_retries, self.settings.backoff_base_s,
                                  self.settings.backoff_max_s)
        if self.settings.offline and not self.settings.cache:
            raise LLMConfigError("offline replay answers from the cache, which is turned off: "
                                 "drop --no-cache (or set llm.cache = true)")
        if cache is None and self.settings.cache:
            cache = ResponseCache(self.settings.cache_path)
        self.cache = cache
        # Offline replay needs neither a key nor a server, so the endpoint (which checks the
        # key and URL, failing before any request) is resolved only when calls can be made.
        self.endpoint: Endpoint | None = None
        self._adapter: ProviderAdapter | None = None
        if not self.settings.offline:
            self.endpoint = self.settings.endpoint(self.model)
            self._adapter = make_adapter(self.endpoint, self.settings.timeout_s)

    @classmethod
    def from_config(cls, config: Config, *, model: str | ModelSpec | None = None,
                    **kwargs: object) -> "LLMClient":
        settings = LLMSettings.from_config(config)
        chosen = model or settings.model
        if not chosen:
            raise LLMConfigError("no model chosen: pass --model provider/model, set "
                                 "KERNELWRIGHT_MODEL, or put model in [llm] of kernelwright.toml")
        return cls(chosen, settings, **kwargs)  # type: ignore[arg-type]

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
        top_p: float | None = None,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
        sample_index: int = 0,
        tags: Mapping[str, str] | None = None,
        use_cache: bool = True,
    ) -> Completion:
        """One chat completion. `sample_index` tells apart repeated samples of one prompt (the
        cache keeps each). `use_cache=False` neither reads nor writes the cache.
        Raises `LLMFatalError` subclasses or, once retries are spent, `LLMTransientError`."""
        _check_messages(messages)
        sampling = Sampling(max_tokens or self.settings.max_tokens, temperature, top_p,
                            tuple(stop) if stop else None, seed)
        key = cache_key(self.model.id, messages, sampling.as_dict(), sample_index)
        all_tags = {**self.tags, **(tags or {})}
        started = time.perf_counter()
        cache = self.cache if use_cache else None

        if cache is None:
            return self._call_provider(messages, sampling, key, sample_index, started, all_tags)
        # Identical requests racing (the same prompt and sample index twice in one batch) wait
        # for the first one and replay its answer, so nothing is paid for twice.
        with SAME_REQUEST_LOCKS.hold(key):
            cached = cache.get(key)
            if cached is not None:
                response = ProviderResponse.from_json(cached.response)
                return self._finish(response, key, sample_index, started, all_tags,
                                    cache_hit=True, attempts=0)
            completion = self._call_provider(messages, sampling, key, sample_index, started,
                                             all_tags)
            request = {"model": self.model.id, "messages": [dict(m) for m in messages],
                       "sampling": sampling.as_dict(), "sample_index": sample_index}
            cache.put(key, self.model.id, request, completion.response.to_json())
            return completion

    def complete_many(self, requests: Sequence[CompletionRequest]) -> list[Completion | LLMError]:
        """Run calls concurrently (at most the provider's bound in flight); results come back
        in request order, each a `Completion` or the `LLMError` that call ended with."""
        bound = self.endpoint.max_concurrency if self.endpoint else self.settings.max_concurrency
        if not requests:
            return []

        def run(request: CompletionRequest) -> Completion | LLMError:
            try:
                return self.complete(
                    request.messages, temperature=request.temperature,
                    max_tokens=request.max_tokens, top_p=request.top_p, stop=request.stop,
                    seed=request.seed, sample_index=request.sample_index, tags=request.tags)
            except LLMError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=min(bound, len(requests)),
                                thread_name_prefix="llm") as pool:
            return list(pool.map(run, requests))

    def _call_provider(self, messages: Sequence[Message], sampling: Sampling, key: str,
                       sample_index: int, started: float, tags: Mapping[str, str]) -> Completion:
        try:
            if self._adapter is None:
                raise LLMCacheMissError(
                    f"offline replay: no cached response for this {self.model} request "
                    f"(sample {sample_index}) in {self.settings.cache_path}; run without "
                    f"--offline to call the model")
            if self.on_send is not None:
                self.on_send(tags)
            on_retry = self.on_retry
            response, attempts = call_with_retries(
                lambda: self._send_once(messages, sampling), self._retry, sleep=self._sleep,
                on_retry=(lambda notice: on_retry(tags, notice)) if on_retry else None)
        except LLMError as exc:
            self.ledger.record(UsageRecord(self.model.id, TokenUsage(),
                                           time.perf_counter() - started, None, False,
                                           exc.attempts, tags, error=str(exc)))
            raise
        return self._finish(response, key, sample_index, started, tags, cache_hit=False,
                            attempts=attempts)

    def _send_once(self, messages: Sequence[Message], sampling: Sampling) -> ProviderResponse:
        assert self._adapter is not None and self.endpoint is not None
        with self._limiter.slot(self.endpoint.limiter_key, self.endpoint.max_concurrency):
            return self._adapter.send(messages, sampling)

    def _finish(self, response: ProviderResponse, key: str, sample_index: int, started: float,
                tags: Mapping[str, str], *, cache_hit: bool, attempts: int) -> Completion:
        latency = time.perf_counter() - started
        # A cache hit costs nothing now; its tokens were paid for (and counted) when first sent.
        cost = 0.0 if cache_hit else self.prices.cost(self.model.id, response.usage)
        usage = TokenUsage() if cache_hit else response.usage
        self.ledger.record(UsageRecord(self.model.id, usage, latency, cost, cache_hit, attempts,
                                       tags))
        return Completion(response.text, self.model.id, response.finish_reason, response.usage,
                          latency, cost, cache_hit, attempts, sample_index, key, response)


def _check_messages(messages: Sequence[Message]) -> None:
    if not messages:
        raise ValueError("messages must not be empty")
    for i, message in enumerate(messages):
        if message.get("role") not in _ROLES or not isinstance(message.get("content"), str):
            raise ValueError(f"messages[{i}] must be {{'role': one of {sorted(_ROLES)}, "
                             f"'content': str}}, got {message!r}")
