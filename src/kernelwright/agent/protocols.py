"""The agent's two seams, as structural types: what it needs of a judge and of an LLM client.

The agent names no concrete class of either side, so each side is testable alone: the real
`JudgePool` and `LLMClient` fit these protocols, and so do the test doubles (a fake judge that
answers from a table, a client that replays a script). Nothing has to inherit from them;
`tests/agent/test_protocols.py` checks the real classes and the doubles against them (with mypy,
and by signature at run time).
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    from ..judge import Verdict
    from ..tasks import Task


@runtime_checkable
class Judge(Protocol):
    """Judges source text in the background: `submit` returns at once, and the future's result
    is the candidate's verdict (its problems are verdicts, never exceptions; the future raises
    only when the judge could not decide, e.g. it was closed first). The verdict carries
    `candidate_id` when one is given. `JudgePool.submit` has this shape (plus its own options)."""

    def submit(self, task: Task, code: str, candidate_id: str | None = None) -> Future[Verdict]: ...


class TokenCounts(Protocol):
    """The token counts of one answer (`llm.accounting.TokenUsage`)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...


class LLMCompletion(Protocol):
    """What the agent reads of an answer (`llm.client.Completion`): the text, and what it cost.
    A cache hit is free (its tokens and cost are not counted again); `cost_usd` is None when no
    price is known for the model; `finish_reason` "length" means cut off at `max_tokens`."""

    @property
    def text(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def usage(self) -> TokenCounts: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def cache_hit(self) -> bool: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def latency_s(self) -> float: ...


@runtime_checkable
class LLM(Protocol):
    """One chat completion per call (`LLMClient.complete` has this shape, plus keywords the
    agent does not use). `seed` and `sample_index` tell apart samples of one prompt, so a
    resumed run's identical request is answered by the cache. Failures raise `llm.errors.LLMError`
    (after the client's retries), never crashing the agent: one of the service's
    (`service_failure`) stops the task-run for a resume, one of the request's is an attempt."""

    def complete(self, messages: Sequence[Mapping[str, str]], *, temperature: float | None = None,
                 max_tokens: int | None = None, seed: int | None = None, sample_index: int = 0,
                 tags: Mapping[str, str] | None = None) -> LLMCompletion: ...
