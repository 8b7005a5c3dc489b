"""Model names (`provider/model`) and the providers kernelwright knows how to reach.

A provider is a way of reaching models: which wire protocol it speaks, where its API key comes
from, and its default endpoint. Several providers share the OpenAI protocol (vLLM, Ollama,
DeepSeek, OpenRouter, Gemini's compatibility endpoint); they differ only in defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import LLMConfigError

Protocol = Literal["openai", "anthropic"]


@dataclass(frozen=True)
class ProviderInfo:
    name: str
    protocol: Protocol
    description: str
    api_key_env: str  # the environment variable users already know for this provider
    base_url_env: str
    default_base_url: str | None = None  # None: the official SDK's own default
    requires_api_key: bool = True  # local servers usually accept any key


PROVIDERS: dict[str, ProviderInfo] = {
    p.name: p
    for p in [
        ProviderInfo("openai", "openai", "OpenAI API", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        ProviderInfo(
            "anthropic", "anthropic", "Anthropic API (Claude)",
            "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
        ),
        ProviderInfo(
            "openai-compatible", "openai",
            "any server speaking OpenAI chat completions (vLLM, SGLang, LM Studio, ...); "
            "needs --base-url",
            "KERNELWRIGHT_OPENAI_COMPATIBLE_API_KEY", "KERNELWRIGHT_OPENAI_COMPATIBLE_BASE_URL",
            requires_api_key=False,
        ),
        ProviderInfo(
            "vllm", "openai", "a local vLLM server", "VLLM_API_KEY", "KERNELWRIGHT_VLLM_BASE_URL",
            default_base_url="http://localhost:8000/v1", requires_api_key=False,
        ),
        ProviderInfo(
            "ollama", "openai", "a local Ollama server", "OLLAMA_API_KEY",
            "KERNELWRIGHT_OLLAMA_BASE_URL",
            default_base_url="http://localhost:11434/v1", requires_api_key=False,
        ),
        ProviderInfo(
            "deepseek", "openai", "DeepSeek API", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL",
            default_base_url="https://api.deepseek.com/v1",
        ),
        ProviderInfo(
            "openrouter", "openai", "OpenRouter", "OPENROUTER_API_KEY", "OPENROUTER_BASE_URL",
            default_base_url="https://openrouter.ai/api/v1",
        ),
        ProviderInfo(
            "gemini", "openai", "Google Gemini through its OpenAI-compatible endpoint",
            "GEMINI_API_KEY", "KERNELWRIGHT_GEMINI_BASE_URL",
            default_base_url="https://generativelanguage.googleapis.com/v1beta/openai/",
        ),
    ]
}


@dataclass(frozen=True)
class ModelSpec:
    """A model as the user named it: `provider/name`. The name may itself contain slashes
    (`openai-compatible/Qwen/Qwen2.5-Coder-32B-Instruct`), so only the first one splits."""

    provider: str
    name: str

    @property
    def id(self) -> str:
        return f"{self.provider}/{self.name}"

    @property
    def info(self) -> ProviderInfo:
        return PROVIDERS[self.provider]

    def __str__(self) -> str:
        return self.id


def known_providers() -> str:
    return ", ".join(PROVIDERS)


def parse_model(text: str | ModelSpec) -> ModelSpec:
    """Parse `provider/model`; raise `LLMConfigError` saying how to write it otherwise."""
    if isinstance(text, ModelSpec):
        return text
    provider, sep, name = text.strip().partition("/")
    if not sep or not provider or not name:
        raise LLMConfigError(
            f"model {text!r} must be written provider/model, e.g. openai/gpt-4.1, "
            f"anthropic/claude-sonnet-4-5 or openai-compatible/Qwen2.5-Coder-32B "
            f"(known providers: {known_providers()})"
        )
    if provider not in PROVIDERS:
        raise LLMConfigError(
            f"unknown provider {provider!r} in model {text!r}; known providers: "
            f"{known_providers()}. For any other OpenAI-compatible server use "
            f"openai-compatible/{name} --base-url URL"
        )
    return ModelSpec(provider, name)
