"""kernelwright's LLM layer: OpenAI, Anthropic and OpenAI-compatible servers behind one client,
with retries, a per-provider concurrency bound, cost accounting and a response cache.

Importing this package never imports torch; the layer works without the judge.
"""

from .accounting import (
    BUILTIN_PRICES, PRICES_AS_OF, Price, PriceTable, TokenUsage, UsageLedger, UsageRecord,
    UsageTotals,
)
from .cache import ResponseCache, cache_key
from .client import Completion, CompletionRequest, LLMClient
from .errors import (
    LLMAuthError, LLMCacheMissError, LLMConfigError, LLMError, LLMFatalError, LLMModelNotFoundError,
    LLMTransientError,
)
from .models import PROVIDERS, ModelSpec, parse_model
from .parsing import CodeExtraction, extract_code, find_json_object
from .preflight import CheckResult, PreflightError, preflight
from .settings import LLMSettings, ProviderSettings, flag_overrides

__all__ = [
    "BUILTIN_PRICES", "PRICES_AS_OF", "PROVIDERS", "CheckResult", "CodeExtraction", "Completion",
    "CompletionRequest", "LLMAuthError", "LLMCacheMissError", "LLMClient", "LLMConfigError",
    "LLMError", "LLMFatalError", "LLMModelNotFoundError", "LLMSettings", "LLMTransientError", "ModelSpec",
    "PreflightError", "Price", "PriceTable", "ProviderSettings", "ResponseCache", "TokenUsage",
    "UsageLedger", "UsageRecord", "UsageTotals", "cache_key", "extract_code", "find_json_object",
    "flag_overrides", "parse_model", "preflight",
]
