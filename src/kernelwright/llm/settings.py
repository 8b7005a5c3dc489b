"""The `[llm]` settings: their declaration (so `kernelwright config` can show them) and the typed
`LLMSettings` that the client is built from.

In `kernelwright.toml`:

    [llm]
    model = "anthropic/claude-sonnet-4-5"
    timeout_s = 120
    max_concurrency = 4

    [llm.openai-compatible]
    base_url = "http://localhost:8000/v1"

    [llm.prices."openai-compatible/Qwen2.5-Coder-32B"]
    input = 0.0
    output = 0.0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..config import Config, SettingSpec, register, register_table
from .errors import LLMConfigError
from .models import PROVIDERS, ModelSpec, parse_model

DEFAULT_CACHE_DIR = Path("~/.cache/kernelwright").expanduser()
CACHE_FILE_NAME = "llm-cache.sqlite"

register(
    SettingSpec("llm.model", str, None, "model to use, as provider/model", "KERNELWRIGHT_MODEL", "--model"),
    SettingSpec(
        "llm.base_url", str, None, "endpoint for the chosen model (overrides the provider's)",
        "KERNELWRIGHT_BASE_URL", "--base-url",
    ),
    SettingSpec(
        "llm.timeout_s", float, 300.0,
        "seconds to wait for one response before retrying (long answers from reasoning models "
        "take minutes)", "KERNELWRIGHT_LLM_TIMEOUT_S", "--timeout",
    ),
    SettingSpec(
        "llm.preflight_timeout_s", float, 10.0,
        "seconds to wait for the one-word ping before a run starts (per attempt; a server that "
        "accepts the connection and never answers fails the start in seconds)",
        "KERNELWRIGHT_LLM_PREFLIGHT_TIMEOUT_S",
    ),
    SettingSpec("llm.max_retries", int, 6, "retries after the first attempt on transient errors",
                "KERNELWRIGHT_LLM_MAX_RETRIES"),
    SettingSpec("llm.backoff_base_s", float, 2.0, "first retry delay; doubles on each retry",
                "KERNELWRIGHT_LLM_BACKOFF_BASE_S"),
    SettingSpec("llm.backoff_max_s", float, 60.0, "longest delay between two attempts",
                "KERNELWRIGHT_LLM_BACKOFF_MAX_S"),
    SettingSpec("llm.max_concurrency", int, 4, "requests in flight at once, per provider",
                "KERNELWRIGHT_LLM_MAX_CONCURRENCY", "--llm-concurrency"),
    SettingSpec("llm.max_tokens", int, 8192, "default output token budget per call",
                "KERNELWRIGHT_LLM_MAX_TOKENS"),
    SettingSpec("llm.cache", bool, True, "reuse cached responses (content-addressed, SQLite)",
                "KERNELWRIGHT_CACHE", "--no-cache"),
    SettingSpec("llm.cache_dir", Path, DEFAULT_CACHE_DIR, f"directory of {CACHE_FILE_NAME}",
                "KERNELWRIGHT_CACHE_DIR"),
    SettingSpec("llm.offline", bool, False,
                "answer only from the cache; a miss is an error (exact offline replay)",
                "KERNELWRIGHT_OFFLINE", "--offline"),
)
for _provider in PROVIDERS.values():
    register(
        SettingSpec(f"llm.{_provider.name}.api_key", str, None, f"API key for {_provider.description}",
                    _provider.api_key_env, secret=True),
        SettingSpec(f"llm.{_provider.name}.base_url", str, _provider.default_base_url,
                    f"endpoint of {_provider.name}", _provider.base_url_env),
        SettingSpec(f"llm.{_provider.name}.max_concurrency", int, None,
                    f"requests in flight at once to {_provider.name} (default: llm.max_concurrency)"),
    )
register_table("llm.prices")


@dataclass(frozen=True)
class ProviderSettings:
    api_key: str | None = None
    base_url: str | None = None
    max_concurrency: int | None = None


@dataclass(frozen=True)
class LLMSettings:
    """Everything the client needs; build it with `from_config`, or directly in code and tests."""

    model: str | None = None
    base_url: str | None = None
    timeout_s: float = 300.0
    preflight_timeout_s: float = 10.0
    max_retries: int = 6
    backoff_base_s: float = 2.0
    backoff_max_s: float = 60.0
    max_concurrency: int = 4
    max_tokens: int = 8192
    cache: bool = True
    cache_dir: Path = DEFAULT_CACHE_DIR
    offline: bool = False
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    # "provider/model" -> {"input": USD per 1M tokens, "output": ..., "cached_input": ...}
    prices: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Config) -> "LLMSettings":
        providers = {
            name: ProviderSettings(
                api_key=config.get(f"llm.{name}.api_key"),
                base_url=config.get(f"llm.{name}.base_url"),
                max_concurrency=config.get(f"llm.{name}.max_concurrency"),
            )
            for name in PROVIDERS
        }
        return cls(
            model=config.get("llm.model"),
            base_url=config.get("llm.base_url"),
            timeout_s=config.get("llm.timeout_s"),
            preflight_timeout_s=config.get("llm.preflight_timeout_s"),
            max_retries=config.get("llm.max_retries"),
            backoff_base_s=config.get("llm.backoff_base_s"),
            backoff_max_s=config.get("llm.backoff_max_s"),
            max_concurrency=config.get("llm.max_concurrency"),
            max_tokens=config.get("llm.max_tokens"),
            cache=config.get("llm.cache"),
            cache_dir=config.get("llm.cache_dir"),
            offline=config.get("llm.offline"),
            providers=providers,
            prices=config.table("llm.prices"),
        )

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir).expanduser() / CACHE_FILE_NAME

    def endpoint(self, model: ModelSpec | str) -> "Endpoint":
        """Where and how to reach `model`; raises `LLMConfigError` if a key or URL is missing."""
        spec = parse_model(model)
        info = spec.info
        provider = self.providers.get(spec.provider, ProviderSettings())
        base_url = self.base_url or provider.base_url or info.default_base_url
        if spec.provider == "openai-compatible" and not base_url:
            raise LLMConfigError(
                f"{spec.id} needs the server's URL: pass --base-url http://HOST:PORT/v1, set "
                f"{info.base_url_env}, or put base_url in [llm.openai-compatible] of kernelwright.toml"
            )
        api_key = provider.api_key
        if not api_key:
            if info.requires_api_key:
                raise LLMConfigError(
                    f"{info.api_key_env} is not set: export it, or put api_key in "
                    f"[llm.{spec.provider}] of kernelwright.toml"
                )
            api_key = "not-needed"  # the SDKs insist on some key; local servers ignore it
        limit = provider.max_concurrency or self.max_concurrency
        if limit < 1:
            raise LLMConfigError(f"max_concurrency for {spec.provider} must be at least 1, got {limit}")
        return Endpoint(spec, base_url, api_key, limit)


@dataclass(frozen=True)
class Endpoint:
    model: ModelSpec
    base_url: str | None  # None: the SDK's default (api.openai.com, api.anthropic.com)
    api_key: str
    max_concurrency: int

    @property
    def limiter_key(self) -> str:
        """Requests to the same provider at the same URL share one concurrency bound."""
        return f"{self.model.provider}@{self.base_url or 'default'}"


def flag_overrides(
    *, model: str | None = None, base_url: str | None = None, no_cache: bool = False,
    offline: bool = False, timeout_s: float | None = None, concurrency: int | None = None,
) -> dict[str, Any]:
    """Map the common LLM command-line flags to setting keys for `load_config(flags=...)`.
    A flag left at its default maps to None, i.e. 'not given', so lower layers show through."""
    return {
        "llm.model": model,
        "llm.base_url": base_url,
        "llm.cache": False if no_cache else None,
        "llm.offline": True if offline else None,
        "llm.timeout_s": timeout_s,
        "llm.max_concurrency": concurrency,
    }


def load_llm_settings(config_path: Path | str | None = None, **flags: Any) -> tuple[Config, LLMSettings]:
    """Load the config with the common LLM flags (see `flag_overrides`) on top."""
    from ..config import load_config

    config = load_config(config_path, flags=flag_overrides(**flags))
    return config, LLMSettings.from_config(config)
