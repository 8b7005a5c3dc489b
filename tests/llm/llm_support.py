"""Constants and helpers shared by the LLM layer tests (imported by name: pytest puts this
directory on sys.path)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelwright.llm import LLMSettings, ProviderSettings
from kernelwright.llm.testing import ScriptedServer

OPENAI_MODEL = "openai/gpt-4.1"
ANTHROPIC_MODEL = "anthropic/claude-haiku-4-5"
MODEL_FOR_PROTOCOL = {"openai": OPENAI_MODEL, "anthropic": ANTHROPIC_MODEL}
USER_PROMPT = [{"role": "user", "content": "Write a softmax kernel."}]


def fast_settings(server: ScriptedServer | None, protocol: str, tmp_path: Path,
                  **overrides: Any) -> LLMSettings:
    """Settings aimed at `server`, with millisecond backoff so retry tests stay fast."""
    providers = {}
    if server is not None:
        base_url = server.openai_base_url if protocol == "openai" else server.anthropic_base_url
        providers[protocol] = ProviderSettings(api_key="test-key", base_url=base_url)
    values: dict[str, Any] = dict(
        timeout_s=5.0, max_retries=3, backoff_base_s=0.001, backoff_max_s=0.005,
        cache_dir=tmp_path / "cache", providers=providers,
    )
    values.update(overrides)
    return LLMSettings(**values)
