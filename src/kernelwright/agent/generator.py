"""The generator: writes a kernel from the task (first attempt, or a fresh approach after the
debugging trap) and fixes a failing one with the judge's feedback and the reflector's analysis."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from .answers import CodeAnswer, parse_code_answer
from .calls import CallParams, Reply, ask
from .memory import Attempt
from .profile_text import failure_context
from .prompts import PromptLibrary
from .protocols import LLM


def first_messages(prompts: PromptLibrary, base: dict[str, Any], code_to_optimize: str | None = None,
                   abandoned: Sequence[str] = ()) -> list[dict]:
    return prompts.messages("generate", **base, code_to_optimize=code_to_optimize or "",
                            abandoned=list(abandoned))


def fix_messages(prompts: PromptLibrary, base: dict[str, Any], attempt: Attempt, reflection: str,
                 earlier_failures: Sequence[str] = (), attempts: Sequence[Attempt] = ()) -> list[dict]:
    """`attempts` (the memory's): where the profile of a kernel that failed at performance is found."""
    return prompts.messages("fix", **base, attempt=attempt, reflection=reflection,
                            earlier_failures=list(earlier_failures), **failure_context(attempt, attempts))


def write(llm: LLM, role: str, messages: list[dict], entry_point: str, params: CallParams,
          tags: dict[str, str], on_call: Callable[[Reply], None] | None = None) -> tuple[Reply, CodeAnswer]:
    """Ask for code; the answer is parsed whatever it holds (no code is a reason, not an error)."""
    reply = ask(llm, role, messages, params, tags, on_call)
    if not reply.ok:
        return reply, CodeAnswer(None, "", reply.error)
    answer = parse_code_answer(reply.text, entry_point)
    if answer.code is None and reply.finish_reason == "length":
        answer = CodeAnswer(None, answer.strategy, f"{answer.failure} (the answer was cut off at max_tokens)")
    return reply, answer
