"""The errors the LLM layer raises. Each message says what happened *and* what to do about it.

Two families matter to callers:
- `LLMFatalError` (and its `LLMAuthError`, `LLMConfigError`, `LLMCacheMissError` kin): retrying
  cannot help (bad key, unknown model, context too long, missing setting); stop and tell the user.
- `LLMTransientError`: the provider was overloaded, slow or unreachable and every retry was spent;
  the same call may well succeed later.
"""

from __future__ import annotations

from ..config import ConfigError


class LLMError(Exception):
    """Base class of every error raised by `kernelwright.llm`."""

    attempts: int = 0  # HTTP requests sent before giving up (set by the retry loop)


class LLMFatalError(LLMError):
    """A request the provider will never accept as sent (retrying cannot heal it)."""


class LLMAuthError(LLMFatalError):
    """The API key is missing, wrong, or not allowed to use the model."""


class LLMConfigError(LLMFatalError, ConfigError):
    """The LLM settings are incomplete or inconsistent (detected before any request)."""


class LLMCacheMissError(LLMFatalError):
    """Offline (replay) mode found no cached response for a request."""


class LLMTransientError(LLMError):
    """A failure that may heal by itself (rate limit, server error, timeout, dropped connection,
    malformed body). Raised to the caller only once every retry has been spent.

    `kind` is a short machine-readable label: "rate_limit", "server_error", "timeout",
    "connection", "malformed_response".
    """

    def __init__(self, message: str, *, kind: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after_s = retry_after_s
