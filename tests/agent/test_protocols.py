"""The agent's seams (agent/protocols.py): the real judge pool, the real LLM client, the agent's
own judge wrapper and the test doubles fit the `Judge` and `LLM` protocols.

Checked twice. mypy type-checks the agent package and this file (`[tool.mypy]` in
pyproject.toml): the functions below assign each implementation to its protocol, so a changed
signature on either side (a renamed keyword, another return type) fails it. And at run time,
without mypy, each protocol method's call, as the agent makes it, must bind to every
implementation's signature, and what the agent reads of a completion must be there."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from kernelwright.agent.meter import JudgeMeter
from kernelwright.agent.protocols import LLM, Judge, LLMCompletion, TokenCounts
from kernelwright.judge import JudgePool
from kernelwright.llm import Completion, LLMClient
from kernelwright.llm.accounting import TokenUsage

from .test_tuning import FakeJudge

ROOT = Path(__file__).resolve().parents[2]


# -- what mypy checks: each implementation where its protocol is expected ------------------------
def as_judges(pool: JudgePool, meter: JudgeMeter, fake: FakeJudge) -> list[Judge]:
    return [pool, meter, fake]


def as_llm(client: LLMClient) -> LLM:
    return client


def as_completion(completion: Completion) -> LLMCompletion:
    return completion


def as_token_counts(usage: TokenUsage) -> TokenCounts:
    return usage


def test_mypy_passes_on_the_agent_and_its_seams(tmp_path):
    pytest.importorskip("mypy", reason="mypy is in the dev extra: pip install -e '.[dev]'")
    proc = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "mypy-cache"), "--python-executable", sys.executable],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# -- at run time --------------------------------------------------------------------------------------
def protocol_methods(protocol: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(protocol).items()
            if inspect.isfunction(member) and not name.startswith("_")}


def agent_call(signature: inspect.Signature) -> tuple[list[object], dict[str, object]]:
    """Placeholder arguments for a call as the agent makes it: every parameter of the protocol,
    positional ones by position, keyword-only ones by name (self left out)."""
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for p in list(signature.parameters.values())[1:]:
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = object()
        else:
            args.append(object())
    return args, kwargs


@pytest.mark.parametrize("protocol, implementation", [
    (Judge, JudgePool), (Judge, JudgeMeter), (Judge, FakeJudge), (LLM, LLMClient)])
def test_every_implementation_takes_the_agents_calls(protocol, implementation):
    methods = protocol_methods(protocol)
    assert methods
    for name, signature in methods.items():
        method = getattr(implementation, name, None)
        assert callable(method), f"{implementation.__name__} has no {name}"
        args, kwargs = agent_call(signature)
        inspect.signature(method).bind(object(), *args, **kwargs)   # raises TypeError when it does not fit


def test_a_completion_has_what_the_agent_reads():
    fields = {f.name for f in dataclasses.fields(Completion)}
    assert {n for n, m in vars(LLMCompletion).items() if isinstance(m, property)} <= fields
    assert {n for n, m in vars(TokenCounts).items() if isinstance(m, property)} <= \
        {f.name for f in dataclasses.fields(TokenUsage)}


def test_a_double_is_a_judge_at_run_time():
    assert isinstance(FakeJudge({}), Judge)
    assert not isinstance(object(), Judge) and not isinstance(FakeJudge({}), LLM)
