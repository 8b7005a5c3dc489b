"""A local Ray started by `--executor ray` does not inherit the API keys (issue 33): its daemons
and actors run beside candidates, as the same user."""

import os
import sys
from types import SimpleNamespace

from kernelwright.scale import raypool


def test_a_local_ray_starts_without_the_api_keys(monkeypatch):
    seen = {}
    fake = SimpleNamespace(is_initialized=lambda: False,
                           init=lambda **kw: seen.update(env=dict(os.environ), kw=kw))
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("KERNELWRIGHT_ANTHROPIC_API_KEY", "sk-ant")
    raypool.connect(None)
    assert "OPENAI_API_KEY" not in seen["env"] and "KERNELWRIGHT_ANTHROPIC_API_KEY" not in seen["env"]
    assert "PATH" in seen["env"]
    assert os.environ["OPENAI_API_KEY"] == "sk-test"  # the driver keeps them (its LLM calls)
