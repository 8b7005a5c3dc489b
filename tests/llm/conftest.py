"""Fixtures for the LLM layer tests: a scripted loopback server and clients pointed at it.

No test needs an API key or the network: every request goes to 127.0.0.1 on an ephemeral port.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# Import this checkout's package, ahead of any other installed copy of kernelwright.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from typing import Any, Callable, Iterator  # noqa: E402

import pytest  # noqa: E402

from kernelwright.config import registered_settings  # noqa: E402
from kernelwright.llm import LLMClient, UsageLedger  # noqa: E402
from kernelwright.llm.concurrency import ConcurrencyLimiter  # noqa: E402
from kernelwright.llm.testing import ScriptedServer  # noqa: E402

from llm_support import MODEL_FOR_PROTOCOL, fast_settings  # noqa: E402


@pytest.fixture(autouse=True)
def isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Real keys or a kernelwright.toml on the test machine must not leak into tests."""
    for spec in registered_settings():
        if spec.env:
            monkeypatch.delenv(spec.env, raising=False)
    monkeypatch.delenv("KERNELWRIGHT_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def scripted() -> Iterator[Callable[[dict[str, Any]], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(script: dict[str, Any]) -> ScriptedServer:
        server = ScriptedServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def make_client(tmp_path: Path) -> Callable[..., LLMClient]:
    """make_client(server, protocol, **settings) -> a client with its own limiter and ledger."""

    def make(server: ScriptedServer | None, protocol: str = "openai", *,
             model: str | None = None, ledger: UsageLedger | None = None,
             limiter: ConcurrencyLimiter | None = None,
             sleep: Callable[[float], None] = time.sleep, **overrides: Any) -> LLMClient:
        settings = fast_settings(server, protocol, tmp_path, **overrides)
        return LLMClient(model or MODEL_FOR_PROTOCOL[protocol], settings,
                         ledger=ledger or UsageLedger(),
                         limiter=limiter or ConcurrencyLimiter(), sleep=sleep)

    return make
