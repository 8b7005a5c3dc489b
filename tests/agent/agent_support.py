"""Shared pieces of the agent's end-to-end tests: candidate sources the scripted model answers
with, scripts, and a helper that runs the real agent (real LLM client over HTTP, real judge on
the CPU interpreter) in this process."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from kernelwright.agent.app import RunSpec, make_llm, open_run, run_session
from kernelwright.agent.budget import Limits
from kernelwright.agent.loop import AgentSettings
from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.llm.preflight import PING_MESSAGES

ROOT = Path(__file__).resolve().parents[2]
TINY_ADD = ROOT / "tests" / "tasks" / "tiny_add.py"
MODEL = "openai-compatible/scripted"

_KERNEL = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def vector_add(x, y):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    {body}
    return out
'''


def kernel(block: int = 1024, body: str | None = None) -> str:
    return _KERNEL.format(body=body or f"add_kernel[(triton.cdiv(n, {block}),)](x, y, out, n, BLOCK={block})")


GOOD = kernel(1024)
GOOD_SMALL_BLOCKS = kernel(256)
BROKEN = kernel(body="add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=UNDEFINED_BLOCK_SIZE)")


def answer(code: str, strategy: str = "One program per block of elements.") -> dict[str, Any]:
    return {"content": f"## Strategy\n{strategy}\n\n```python\n{code}```\n",
            "usage": {"input_tokens": 100, "output_tokens": 50}}


# The commands ping the model before a run starts (cli/agent_runs.py): a request of its own,
# answered like any other (a script's `sequence` needs an answer for it first).
PING = PING_MESSAGES[0]["content"]
PING_ANSWER = {"content": "ok"}


def model_requests(server) -> list:
    """The requests the agent sent, without the commands' pings."""
    return [r for r in server.requests if r.prompt != PING]


def pings(server) -> int:
    return sum(1 for r in server.requests if r.prompt == PING)


REFLECT_MARK = "Find the root cause"
FIX_MARK = "Your previous attempt"
FRESH_MARK = "Approaches already tried"
OPTIMIZE_MARK = "Correct kernels so far"


def role_of(prompt: str) -> str:
    for mark, role in ((REFLECT_MARK, "reflect"), (FIX_MARK, "fix"), (OPTIMIZE_MARK, "optimize"),
                       (FRESH_MARK, "fresh")):
        if mark in prompt:
            return role
    return "generate"


def spec(task_file: Path = TINY_ADD, command: str = "generate", start_code: str | None = None,
         run_limits: Limits = Limits(), **settings: Any) -> RunSpec:
    from kernelwright.tasks import load_task_file

    task = load_task_file(task_file)
    settings = {"iterations": 3, "seed": 7, **settings}
    return RunSpec(command, (task.ref,), MODEL, AgentSettings(**settings), run_limits, Limits(),
                   {task.name: start_code} if start_code else {}, (), None, "cpu", 1)


def run_agent(out: Path, server, run_spec: RunSpec | None = None, resume: bool = False,
              judge_options: JudgeOptions | None = None, workers: int = 1):
    if run_spec is not None and judge_options is not None and judge_options.perf is not None:
        # the spec says what the judge does: a timed run (perf=True) keeps optimizing on the CPU
        run_spec = replace(run_spec, perf=judge_options.perf)
    store, run_spec = open_run(out, run_spec, resume)
    llm = make_llm(run_spec, store, None, {"base_url": server.openai_base_url, "no_cache": True})
    with JudgePool("cpu", workers=workers, options=judge_options or JudgeOptions(seeds=1)) as pool:
        pool.start()
        results, errors = run_session(run_spec, store, llm, pool, device_info=pool.device_info,
                                      backend=pool.backend)
    assert not errors, errors
    return store, results
