"""Code as BM25 tokens (`tokenize`) and code without comments (`strip_comments`): shared by the
example retrieval (`retrieval`), the operator query (`operators`) and the kind labeller (`kinds`),
which would otherwise import each other in a circle."""

from __future__ import annotations

import functools
import keyword
import re

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z]|\d|\b)|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = set(keyword.kwlist) | {"self", "cls", "none", "true", "false"}


# -- tokens ----------------------------------------------------------------------------------
def tokenize(code: str) -> list[str]:
    """BM25 tokens of code, lowercased: each identifier, its snake_case / camelCase parts, and for
    dotted names the full name and its parts (`tl.load` -> "tl.load", "tl", "load"), so Triton API
    use ("tl.dot", "tl.atomic_add") counts as much as naming. Comments and strings are kept: their
    words ("softmax", "row max") describe the kernel.

    Pure numbers are dropped: literal sizes (1024, 128, 0.5) vary freely between implementations of
    one operation and across tuning configs, so they would pull together unrelated kernels that share a
    block size and push apart two matmuls with different tiles. Digits inside identifiers stay
    ("float16", "exp2", "int64"). Python keywords and one-letter parts are dropped as noise."""
    tokens: list[str] = []
    for match in _WORD.finditer(code):
        tokens.extend(_expand(match.group(0)))
    return tokens


@functools.lru_cache(maxsize=65536)
def _expand(word: str) -> tuple[str, ...]:
    """The tokens of one (possibly dotted) identifier; cached, as identifiers repeat a lot."""
    names = re.sub(r"\s+", "", word).split(".")
    tokens: list[str] = []
    if len(names) > 1:
        # "tl.load", and for longer chains each adjacent pair ("triton.language", "language.extra")
        tokens.extend(f"{a}.{b}".lower() for a, b in zip(names, names[1:]))
    for name in names:
        low = name.lower()
        if low in _STOP:
            continue
        if len(low) > 1:
            tokens.append(low)
        parts = [p.lower() for chunk in name.split("_") if chunk for p in _CAMEL.findall(chunk)]
        if len(parts) > 1:
            tokens.extend(p for p in parts if len(p) > 1 and not p.isdigit() and p != low)
    return tuple(tokens)


def strip_comments(code: str) -> str:
    code = re.sub(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'', " ", code)  # docstrings
    return re.sub(r"#[^\n]*", " ", code)
