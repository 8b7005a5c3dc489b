"""Both wire protocols, through the official SDKs, against the scripted server."""

from __future__ import annotations

import pytest

from kernelwright.llm import TokenUsage

from llm_support import USER_PROMPT


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_answer_and_usage_come_back_through_the_real_sdk(scripted, make_client, protocol):
    server = scripted({"sequence": [{
        "content": "```python\ndef f():\n    return 1\n```",
        "usage": {"input_tokens": 120, "output_tokens": 30, "cached_tokens": 20},
    }]})
    client = make_client(server, protocol)

    completion = client.complete(USER_PROMPT, temperature=0.2, max_tokens=256)

    assert completion.text == "```python\ndef f():\n    return 1\n```"
    assert completion.finish_reason == "stop"
    assert completion.usage.input_tokens == 120
    assert completion.usage.output_tokens == 30
    assert completion.usage.cached_input_tokens == 20
    assert completion.attempts == 1 and not completion.cache_hit
    (request,) = server.requests
    assert request.protocol == protocol
    assert request.body["model"] == client.model.name
    assert request.body["temperature"] == 0.2
    assert request.headers.get("authorization", request.headers.get("x-api-key", "")).endswith("test-key")


def test_openai_protocol_reports_reasoning_tokens(scripted, make_client):
    server = scripted({"sequence": [{"content": "ok", "usage": {
        "input_tokens": 10, "output_tokens": 50, "reasoning_tokens": 40}}]})

    usage = make_client(server, "openai").complete(USER_PROMPT).usage

    assert usage == TokenUsage(10, 50, reasoning_tokens=40, cached_input_tokens=None)


def test_anthropic_system_prompt_travels_as_parameter(scripted, make_client):
    server = scripted({"default": {"content": "ok"}})
    messages = [{"role": "system", "content": "You write Triton."}, *USER_PROMPT]

    make_client(server, "anthropic").complete(messages, max_tokens=64, stop=["###"])

    body = server.requests[0].body
    assert body["system"] == "You write Triton."
    assert body["messages"] == USER_PROMPT
    assert body["max_tokens"] == 64
    assert body["stop_sequences"] == ["###"]


def test_token_budget_parameter_matches_the_server_kind(scripted, make_client):
    server = scripted({"default": {"content": "ok"}})

    make_client(server, "openai").complete(USER_PROMPT, max_tokens=100)
    make_client(server, "openai", model="openai-compatible/Qwen2.5-Coder-32B",
                base_url=server.openai_base_url).complete(USER_PROMPT, max_tokens=100)

    official, compatible = (r.body for r in server.requests)
    assert official["max_completion_tokens"] == 100 and "max_tokens" not in official
    assert compatible["max_tokens"] == 100 and compatible["model"] == "Qwen2.5-Coder-32B"


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_cut_off_answer_reports_length(scripted, make_client, protocol):
    server = scripted({"default": {"content": "def f(", "finish_reason": "length"}})

    assert make_client(server, protocol).complete(USER_PROMPT).finish_reason == "length"
