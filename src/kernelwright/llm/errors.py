"""The errors the LLM layer raises. Each message says what happened *and* what to do about it.

Two families matter to callers:
- `LLMFatalError` (and its `LLMAuthError`, `LLMConfigError`, `LLMCacheMissError` kin): retrying
  cannot help (bad key, unknown model, context too long, missing setting); stop and tell the user.
- `LLMTransientError`: the provider was overloaded, slow or unreachable and every retry was spent;
  the same call may well succeed later.

Across both, `service_failure` tells an agent whether the failure is the service's (unreachable,
failing, the key refused, the model gone, offline with no cached answer) or the request's (too
long, rejected as sent): the first says nothing about the model's answer, so an agent must not
count it as one, and the same call may succeed once the service is back.
"""

from __future__ import annotations

from ..config import ConfigError


class LLMError(Exception):
    """Base class of every error raised by `kernelwright.llm`."""

    attempts: int = 0  # HTTP requests sent before giving up (set by the retry loop)
    service_failure: bool = False  # the service failed, not this request (see the module's note)


class LLMFatalError(LLMError):
    """A request the provider will never accept as sent (retrying cannot heal it)."""


class LLMAuthError(LLMFatalError):
    """The API key is missing, wrong, or not allowed to use the model."""

    service_failure = True


class LLMModelNotFoundError(LLMFatalError):
    """The endpoint does not serve the model (404): a wrong name or URL, or a server restarted
    with another model."""

    service_failure = True


class LLMConfigError(LLMFatalError, ConfigError):
    """The LLM settings are incomplete or inconsistent (detected before any request)."""

    service_failure = True


class LLMCacheMissError(LLMFatalError):
    """Offline (replay) mode found no cached response for a request."""

    service_failure = True  # the call was never made: without --offline it may be answered


class LLMTransientError(LLMError):
    """A failure that may heal by itself (rate limit, server error, timeout, dropped connection,
    malformed body). Raised to the caller only once every retry has been spent.

    `kind` is a short machine-readable label: "rate_limit", "server_error", "timeout",
    "connection", "malformed_response"; `status` the HTTP status, where the server sent one.
    """

    service_failure = True

    def __init__(self, message: str, *, kind: str, retry_after_s: float | None = None,
                 status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s
        self.status = status

    @property
    def short(self) -> str:
        """What went wrong in a few words, for a progress line: "HTTP 500", "timeout", ..."""
        if self.status is not None:
            return f"HTTP {self.status}"
        return {"connection": "cannot connect", "malformed_response": "malformed response"}.get(
            self.kind, self.kind.replace("_", " "))
