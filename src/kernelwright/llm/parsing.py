"""Getting code out of a model's answer, tolerant of the prose models wrap around it.

Where the code is looked for, in order:
1. the whole answer is a JSON object with a string "code" field;
2. fenced blocks (```python, ```py, ```triton or bare ```; a ```json block with a "code" field
   also counts). When there are several, the chosen block is
   - the last block that defines the entry point (`def <entry_point>(`), if one is given and
     some block defines it; otherwise
   - the last block that defines any function or class; otherwise
   - the last block.
   "Last" because models revise: the final version comes after the drafts, while usage
   examples, which define nothing, are passed over. An unterminated last fence (an answer cut
   off at max_tokens) still counts; the judge will say whether the code holds up;
3. a JSON object with a "code" field embedded in prose;
4. an answer with no fences that is, as a whole, Python source defining something.

Anything else is a failed extraction with a reason, never an exception: the caller records it
as a failed attempt.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.M | re.S)
_CODE_LANGUAGES = {"", "python", "py", "python3", "triton"}
_DEFINES_SOMETHING = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+\w+", re.M)

NO_CODE_REASON = ('no code found: expected a ```python fenced block or a JSON object with a '
                  '"code" field')


@dataclass(frozen=True)
class CodeExtraction:
    code: str | None
    failure: str | None = None  # why no code could be extracted
    source: str | None = None  # "json", "fenced", "embedded-json" or "bare"

    @property
    def ok(self) -> bool:
        return self.code is not None


def extract_code(answer: str | None, *, entry_point: str | None = None) -> CodeExtraction:
    if answer is None or not answer.strip():
        return CodeExtraction(None, "the answer is empty")

    whole = _json_object(answer.strip())
    if whole is not None:
        return _from_json(whole, "json")

    blocks: list[str] = []
    for language, body in _FENCE.findall(answer):
        language = language.lower()
        if language == "json":
            data = _json_object(body.strip())
            if data is not None and isinstance(data.get("code"), str):
                blocks.append(data["code"])
        elif language in _CODE_LANGUAGES and body.strip():
            blocks.append(body.strip("\n"))
    if blocks:
        return CodeExtraction(_choose_block(blocks, entry_point), source="fenced")

    embedded = find_json_object(answer, required_key="code")
    if embedded is not None:
        return _from_json(embedded, "embedded-json")

    if "```" not in answer and _is_python_definitions(answer):
        return CodeExtraction(answer.strip("\n"), source="bare")
    return CodeExtraction(None, NO_CODE_REASON)


def _choose_block(blocks: list[str], entry_point: str | None) -> str:
    if entry_point:
        defines_entry = re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", re.M)
        defining = [b for b in blocks if defines_entry.search(b)]
        if defining:
            return defining[-1]
    defining_any = [b for b in blocks if _DEFINES_SOMETHING.search(b)]
    return (defining_any or blocks)[-1]


def _from_json(data: dict[str, Any], source: str) -> CodeExtraction:
    code = data.get("code")
    if not isinstance(code, str):
        return CodeExtraction(None, 'the JSON answer has no string "code" field '
                                    f"(keys: {sorted(data)})")
    if not code.strip():
        return CodeExtraction(None, 'the JSON answer\'s "code" field is empty')
    return CodeExtraction(code, source=source)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_json_object(text: str, *, required_key: str | None = None) -> dict[str, Any] | None:
    """The first JSON object embedded in `text` (with `required_key`, if given), or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            data, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and (required_key is None or required_key in data):
            return data
    return None


def _is_python_definitions(text: str) -> bool:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               for node in tree.body)
