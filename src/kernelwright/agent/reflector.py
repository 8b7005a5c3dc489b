"""The reflector (Reflexion): reads a failing kernel and the judge's real feedback (the failing
case, the mismatch, the candidate's own traceback frames) and says what is wrong and how to fix
it. Its analysis goes into the generator's fix prompt. A kernel that failed at the performance
stage comes with the judge's profile of it, or of the kernel it descends from."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .answers import parse_reflection
from .calls import CallParams, Reply, ask
from .memory import Attempt
from .profile_text import failure_context
from .prompts import PromptLibrary
from .protocols import LLM


def messages(prompts: PromptLibrary, base: dict[str, Any], attempt: Attempt,
             attempts: Sequence[Attempt] = ()) -> list[dict]:
    """`attempts` (the memory's): where the profile of a kernel that failed at performance is found."""
    return prompts.messages("reflect", **base, attempt=attempt, **failure_context(attempt, attempts))


def reflect(llm: LLM, prompts: PromptLibrary, base: dict[str, Any], attempt: Attempt, params: CallParams,
            tags: dict[str, str], on_call: Callable[[Reply], None] | None = None,
            attempts: Sequence[Attempt] = ()) -> tuple[Reply, str]:
    """The analysis ("" when the call failed or the model said nothing: the fix prompt then
    goes without one, and the attempt records why)."""
    reply = ask(llm, "reflect", messages(prompts, base, attempt, attempts), params, tags, on_call)
    return reply, parse_reflection(reply.text) if reply.ok else ""
