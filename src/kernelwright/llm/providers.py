"""Adapters from kernelwright's one request shape to each official SDK, and from each SDK's
errors to kernelwright's (transient or fatal, with a message that says what to do).

Both SDK clients are built with `max_retries=0`: retries happen in `retry.py`, where attempts
are counted and the backoff is configurable (see the note there).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Protocol, Sequence

from .accounting import TokenUsage
from .errors import (
    LLMAuthError, LLMConfigError, LLMError, LLMFatalError, LLMModelNotFoundError, LLMTransientError,
)
from .settings import Endpoint

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "..."}

_CONTEXT_TOO_LONG = re.compile(
    r"context.{0,20}(length|window)|too many tokens|prompt is too long|maximum context|"
    r"reduce the length", re.I,
)
_TRANSIENT_STATUSES = {408, 409, 425, 429}  # plus every 5xx (529: Anthropic "overloaded")


@dataclass(frozen=True)
class Sampling:
    """Sampling parameters. None means the provider's default (and is left out of cache keys)."""

    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None  # OpenAI-protocol servers only; Anthropic has no seed

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.stop is not None:
            data["stop"] = list(self.stop)
        return data


@dataclass(frozen=True)
class ProviderResponse:
    text: str
    finish_reason: str | None  # normalized: "stop", "length", or the provider's own word
    usage: TokenUsage
    served_model: str | None  # the model name the server reports (may carry a version suffix)

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "finish_reason": self.finish_reason,
                "usage": asdict(self.usage), "served_model": self.served_model}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ProviderResponse":
        return cls(data["text"], data.get("finish_reason"), TokenUsage(**data["usage"]),
                   data.get("served_model"))


class ProviderAdapter(Protocol):
    def send(self, messages: Sequence[Message], sampling: Sampling) -> ProviderResponse:
        """One HTTP request, no retries. Raises `LLMTransientError` or `LLMFatalError`."""


def make_adapter(endpoint: Endpoint, timeout_s: float) -> ProviderAdapter:
    if endpoint.model.info.protocol == "anthropic":
        return AnthropicMessagesAdapter(endpoint, timeout_s)
    return OpenAIChatAdapter(endpoint, timeout_s)


def _import_sdk(name: str) -> Any:
    try:
        return __import__(name)
    except ImportError:
        raise LLMConfigError(
            f"the {name!r} package is not installed: pip install 'kernelwright[llm]'"
        ) from None


class OpenAIChatAdapter:
    """OpenAI chat completions: OpenAI itself and every OpenAI-compatible server."""

    def __init__(self, endpoint: Endpoint, timeout_s: float) -> None:
        self._sdk = _import_sdk("openai")
        self._endpoint = endpoint
        self._client = self._sdk.OpenAI(api_key=endpoint.api_key, base_url=endpoint.base_url,
                                        timeout=timeout_s, max_retries=0)
        self._timeout_s = timeout_s

    def send(self, messages: Sequence[Message], sampling: Sampling) -> ProviderResponse:
        kwargs: dict[str, Any] = {"model": self._endpoint.model.name,
                                  "messages": [dict(m) for m in messages]}
        # OpenAI's reasoning models accept only max_completion_tokens; many compatible servers
        # (older vLLM, Ollama) know only max_tokens.
        budget_key = "max_completion_tokens" if self._endpoint.model.provider == "openai" else "max_tokens"
        kwargs[budget_key] = sampling.max_tokens
        for name in ("temperature", "top_p", "seed"):
            if getattr(sampling, name) is not None:
                kwargs[name] = getattr(sampling, name)
        if sampling.stop:
            kwargs["stop"] = list(sampling.stop)
        try:
            response = self._client.chat.completions.create(**kwargs)
        except (self._sdk.APIError, json.JSONDecodeError) as exc:
            raise _translate(exc, self._sdk, self._endpoint, self._timeout_s) from exc
        return self._parse(response)

    def _parse(self, response: Any) -> ProviderResponse:
        choices = getattr(response, "choices", None)
        message = getattr(choices[0], "message", None) if choices else None
        if message is None:
            raise _malformed(self._endpoint, "no choices[0].message in the response")
        usage = getattr(response, "usage", None)
        details = getattr(usage, "completion_tokens_details", None)
        prompt_details = getattr(usage, "prompt_tokens_details", None)
        return ProviderResponse(
            text=message.content or "",
            finish_reason=choices[0].finish_reason,
            usage=TokenUsage(
                input_tokens=getattr(usage, "prompt_tokens", None) or 0,
                output_tokens=getattr(usage, "completion_tokens", None) or 0,
                reasoning_tokens=getattr(details, "reasoning_tokens", None),
                cached_input_tokens=getattr(prompt_details, "cached_tokens", None),
            ),
            served_model=getattr(response, "model", None),
        )


class AnthropicMessagesAdapter:
    """Anthropic messages API (Claude)."""

    _FINISH_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}

    def __init__(self, endpoint: Endpoint, timeout_s: float) -> None:
        self._sdk = _import_sdk("anthropic")
        self._endpoint = endpoint
        self._client = self._sdk.Anthropic(api_key=endpoint.api_key, base_url=endpoint.base_url,
                                           timeout=timeout_s, max_retries=0)
        self._timeout_s = timeout_s

    def send(self, messages: Sequence[Message], sampling: Sampling) -> ProviderResponse:
        # The messages API takes the system prompt as a parameter, not as a message.
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        kwargs: dict[str, Any] = {
            "model": self._endpoint.model.name,
            "max_tokens": sampling.max_tokens,
            "messages": [dict(m) for m in messages if m["role"] != "system"],
        }
        if system:
            kwargs["system"] = system
        # Recent SDK releases dropped the temperature/top_p keywords while the API still takes
        # them; sending them in the body works with every SDK version.
        sampling_body = {name: getattr(sampling, name) for name in ("temperature", "top_p")
                         if getattr(sampling, name) is not None}
        if sampling_body:
            kwargs["extra_body"] = sampling_body
        if sampling.stop:
            kwargs["stop_sequences"] = list(sampling.stop)
        try:
            response = self._client.messages.create(**kwargs)
        except (self._sdk.APIError, json.JSONDecodeError) as exc:
            raise _translate(exc, self._sdk, self._endpoint, self._timeout_s) from exc
        return self._parse(response)

    def _parse(self, response: Any) -> ProviderResponse:
        blocks = getattr(response, "content", None)
        usage = getattr(response, "usage", None)
        if not isinstance(blocks, list) or usage is None:
            raise _malformed(self._endpoint, "no content blocks or usage in the response")
        # Thinking blocks are the model's scratchpad, not its answer.
        text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
        cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
        cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
        return ProviderResponse(
            text=text,
            finish_reason=self._FINISH_REASONS.get(response.stop_reason, response.stop_reason),
            usage=TokenUsage(
                # Anthropic counts cache reads and writes apart from input_tokens; fold them in
                # so input_tokens means "all input" for every provider.
                input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
                output_tokens=usage.output_tokens or 0,
                reasoning_tokens=None,  # billed inside output_tokens, not reported apart
                cached_input_tokens=cache_read,
            ),
            served_model=getattr(response, "model", None),
        )


def _malformed(endpoint: Endpoint, detail: str) -> LLMTransientError:
    where = endpoint.base_url or "the provider's default endpoint"
    return LLMTransientError(f"malformed response from {where} for {endpoint.model}: {detail}",
                             kind="malformed_response")


def _translate(exc: Exception, sdk: Any, endpoint: Endpoint, timeout_s: float) -> LLMError:
    """Map an SDK exception (both SDKs share the same class names) to a kernelwright error.
    Only the SDK's API errors and undecodable bodies come here: anything else is a bug in
    kernelwright and propagates as is."""
    model = endpoint.model
    where = endpoint.base_url or f"the {model.provider} API"
    if isinstance(exc, sdk.APITimeoutError):
        return LLMTransientError(f"no response from {where} within {timeout_s:g} s",
                                 kind="timeout")
    if isinstance(exc, sdk.APIConnectionError):
        return LLMTransientError(f"cannot connect to {where}: {exc}", kind="connection")
    if isinstance(exc, json.JSONDecodeError):
        return _malformed(endpoint, f"body is not valid JSON ({exc})")
    if not isinstance(exc, sdk.APIStatusError):  # e.g. APIResponseValidationError
        return _malformed(endpoint, f"{type(exc).__name__}: {exc}")

    status = exc.status_code
    detail = _error_message(exc)
    if status == 401:
        return LLMAuthError(
            f"{where} rejected the API key (401: {detail}); check {model.info.api_key_env} "
            f"or api_key in [llm.{model.provider}] of kernelwright.toml"
        )
    if status == 403:
        return LLMAuthError(f"the API key may not use {model} (403: {detail}); check the "
                            f"key's project, organization and model access")
    if status == 404:
        return LLMModelNotFoundError(f"{model} was not found at {where} (404: {detail}); check the "
                             f"model name and base_url, then run kernelwright doctor --model {model}")
    if status in _TRANSIENT_STATUSES or status >= 500:
        kind = "rate_limit" if status == 429 else "server_error"
        return LLMTransientError(f"{where} answered {status}: {detail}", kind=kind,
                                 retry_after_s=_retry_after_s(exc), status=status)
    if _CONTEXT_TOO_LONG.search(detail) or status == 413:
        return LLMFatalError(f"the request is too long for {model} ({status}: {detail}); "
                             f"shorten the prompt or lower max_tokens")
    return LLMFatalError(f"{where} rejected the request for {model} ({status}: {detail})")


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
    return str(getattr(exc, "message", exc))


def _retry_after_s(exc: Any) -> float | None:
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return float(value) * scale
            except ValueError:
                continue  # an HTTP date: rare enough that the exponential backoff will do
    return None
