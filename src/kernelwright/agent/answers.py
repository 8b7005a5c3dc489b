"""Reading the model's answers. Any answer may be empty, malformed, huge or hostile: each
becomes data with a reason, never an exception.

A generator or optimizer answer is a short strategy in prose followed by one fenced Python
block (or a JSON object with "strategy"/"thought" and "code", GEAK's format). A reflector
answer is prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..llm.parsing import extract_code, find_json_object

MAX_ANSWER_CHARS = 200_000    # kept in the store; beyond this an answer is cut (a runaway model)
MAX_CODE_CHARS = 120_000      # a candidate longer than this is not judged (the judge caps at 2 MiB)
MAX_STRATEGY_CHARS = 1_500
MAX_REFLECTION_CHARS = 4_000

_FENCE = re.compile(r"```")
_HEADING = re.compile(r"^\s*#+\s*(strategy|plan|approach|analysis)\s*:?\s*$", re.I | re.M)


@dataclass(frozen=True)
class CodeAnswer:
    code: str | None
    strategy: str
    failure: str = ""        # why there is no code


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, keeping the start and the end (where models put the
    conclusion), with a marker saying how much was left out."""
    if len(text) <= limit:
        return text
    half = max(0, (limit - 60) // 2)
    return f"{text[:half]}\n… [{len(text) - 2 * half} characters left out] …\n{text[-half:]}"


def parse_code_answer(text: str | None, entry_point: str) -> CodeAnswer:
    text = text or ""
    if not text.strip():
        return CodeAnswer(None, "", "the answer is empty")
    data = find_json_object(text, required_key="code") if text.lstrip().startswith("{") else None
    strategy = ""
    if data is not None:
        strategy = str(data.get("strategy") or data.get("thought") or data.get("plan") or "")
    else:
        head = _FENCE.split(text, maxsplit=1)[0]
        strategy = _HEADING.sub("", head).strip()
    strategy = bounded(strategy.strip(), MAX_STRATEGY_CHARS)
    extraction = extract_code(text, entry_point=entry_point)
    if not extraction.ok:
        return CodeAnswer(None, strategy, extraction.failure or "no code found")
    code = extraction.code or ""
    if len(code) > MAX_CODE_CHARS:
        return CodeAnswer(None, strategy, f"the code is {len(code)} characters; the limit is {MAX_CODE_CHARS}")
    if "\x00" in code:
        return CodeAnswer(None, strategy, "the code contains NUL bytes")
    return CodeAnswer(code.rstrip() + "\n", strategy)


def parse_reflection(text: str | None) -> str:
    """The reflector's analysis, bounded; empty when the model said nothing."""
    return bounded((text or "").strip(), MAX_REFLECTION_CHARS)
