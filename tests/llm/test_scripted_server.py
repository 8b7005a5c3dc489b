"""The scripted server itself: script semantics, request recording, the command-line entry."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from kernelwright.llm.testing import Script

SRC = Path(__file__).resolve().parents[2] / "src"


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def chat(server, content: str) -> tuple[int, dict]:
    return post(f"{server.openai_base_url}/chat/completions",
                {"model": "m", "messages": [{"role": "user", "content": content}]})


def test_sequence_then_rules_then_default(scripted):
    server = scripted({
        "sequence": [{"content": "first", "times": 2}],
        "rules": [{"match": "soft(max|plus)", "content": "by rule"}],
        "default": {"content": "fallback"},
    })

    answers = [chat(server, prompt)[1]["choices"][0]["message"]["content"]
               for prompt in ("softmax", "x", "softmax", "softplus", "matmul")]

    assert answers == ["first", "first", "by rule", "by rule", "fallback"]
    assert [r.prompt for r in server.requests] == ["softmax", "x", "softmax", "softplus", "matmul"]


def test_exhausted_script_answers_400_saying_so(scripted):
    server = scripted({"sequence": [{"content": "only one"}]})

    chat(server, "a")
    status, body = chat(server, "b")

    assert status == 400 and "no answer left" in body["error"]["message"]


def test_anthropic_error_bodies_and_retry_after(scripted):
    server = scripted({"default": {"status": 429, "retry_after": 7, "message": "slow down"}})
    request = urllib.request.Request(
        f"{server.anthropic_base_url}/v1/messages",
        json.dumps({"model": "m", "max_tokens": 5, "messages": []}).encode())

    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)

    assert info.value.headers["Retry-After"] == "7"
    assert json.loads(info.value.read()) == {
        "type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


@pytest.mark.parametrize("script, message", [
    ({"sequence": [{"contents": "typo"}]}, "unknown keys"),
    ({"sequence": [{}]}, "needs content"),
    ({"rules": [{"content": "x"}]}, "needs a 'match'"),
    ({"answers": []}, "unknown script keys"),
    ({"default": {"malformed": "weird"}}, "malformed must be one of"),
])
def test_script_mistakes_are_reported(script, message):
    with pytest.raises(ValueError, match=message):
        Script.from_dict(script)


def test_command_line_entry_serves_a_script_file(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"default": {"content": "from file"}}))
    process = subprocess.Popen(
        [sys.executable, "-m", "kernelwright.llm.testing.scripted_server", "--script", str(script),
         "--port", "0"],
        stdout=subprocess.PIPE, text=True, env={"PYTHONPATH": str(SRC), "PATH": ""},
    )
    try:
        base_url = process.stdout.readline().split()[-1]
        status, body = post(f"{base_url}/chat/completions",
                            {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    finally:
        process.terminate()
        process.wait(timeout=5)

    assert status == 200 and body["choices"][0]["message"]["content"] == "from file"
