"""1-shot example retrieval by code similarity (BM25 over code tokens), as in GEAK; for a query in
PyTorch or prose, by its operators (`best_for`, with the weighted query of `agent/operators.py`).

The corpus holds Triton programs: the built-in suite's reference kernels, plus any user corpus (a
folder of .py files, searched recursively, or a JSON list such as TritonBench's `train_crawl.json`,
read from the user's own checkout). Only programs with a `@triton.jit` kernel are kept; files over
`MAX_EXAMPLE_CHARS` (after cutting a TritonBench test harness) are skipped, since a truncated kernel
is a broken example.

`Retriever.best(query, exclude=...)` returns the top example by BM25 score, but never the task's own
solution: any example whose similarity to an excluded text (the task's reference sources) reaches
`EXCLUDE_SIMILARITY`, or whose file name is the reference's, is dropped. See `similarity`.
"""

from __future__ import annotations

import builtins
import functools
import hashlib
import json
import keyword
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from .code_tokens import strip_comments, tokenize

__all__ = ["Example", "Corpus", "Retriever", "load_corpus", "tokenize", "similarity", "BUILTIN_REFS_DIR",
           "EXCLUDE_SIMILARITY", "SHINGLE", "MAX_EXAMPLE_CHARS"]

BUILTIN_REFS_DIR = Path(__file__).resolve().parent.parent / "suites" / "builtin" / "triton_refs"
MAX_EXAMPLE_CHARS = 12_000
SHINGLE = 5
# An example is the task's own solution, or a near-copy of it, when its 5-gram shingle Jaccard
# similarity to an excluded text reaches this on either of two views of the code (see `similarity`).
# Measured on the 31 built-in kernels: a reference with its variables renamed and comments added
# scores 1.0 (0.43 on the exact view alone). Pairs of different built-in kernels reaching 0.5 are
# siblings that share most of their code, in effect the answer with a line or two changed
# (flash_attention/causal 0.99, gelu/silu 0.74, the matmul variants 0.60-0.73, row_max/row_sum 0.71,
# layernorm/rmsnorm backward 0.69, forward 0.54, row_argmax/row_max 0.51; bias_gelu/dequantize 0.53);
# every other pair scores below 0.45. 0.5 errs on the side of excluding: a lost example costs
# little, a leaked answer voids the run.
EXCLUDE_SIMILARITY = 0.5
# Weight of the plain code-token BM25 in an operator-ranked retrieval (`Retriever.ranked_weighted`):
# at most half of one fully matched operator token, so it orders examples of the same operators
# (layernorm before rmsnorm for a LayerNorm) without overriding them.
TIE_BREAK = 0.5

_JIT = re.compile(r"@triton\.jit\b")
# TritonBench files: kernel + wrapper, a separator line of '#', then the test harness
_SEPARATOR = re.compile(r"^#{20,}\s*$", re.M)


_LEX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\S")
_API_ROOTS = {"tl", "triton", "torch", "math", "libdevice", "np"}
_BUILTINS = set(dir(builtins))


def _views(code: str) -> tuple[list[str], list[str]]:
    """Two token sequences for copy detection, comments and docstrings removed: the exact lexical
    tokens, and a renamed view where each local identifier becomes v0, v1, ... in order of first
    appearance and every number "0" (kept: keywords, builtins, the Triton/torch API roots and
    attribute names after a dot). Consistent renaming maps a copy with renamed variables onto the
    original exactly, yet keeps which value flows where, so that two different kernels of one shape
    do not collapse onto each other (a blind "every name is v" view scored gelu vs. swiglu 0.73)."""
    exact, renamed = [], []
    local: dict[str, str] = {}
    previous = ""
    for lex in _LEX.findall(strip_comments(code)):
        exact.append(lex)
        if lex[0].isdigit():
            renamed.append("0")
        elif lex[0].isalpha() or lex[0] == "_":
            keep = lex in _API_ROOTS or keyword.iskeyword(lex) or lex in _BUILTINS or previous == "."
            renamed.append(lex if keep else local.setdefault(lex, f"v{len(local)}"))
        else:
            renamed.append(lex)
        previous = lex
    return exact, renamed


def _shingles(tokens: Sequence[str], n: int = SHINGLE) -> frozenset:
    if len(tokens) < n:
        return frozenset([tuple(tokens)]) if tokens else frozenset()
    return frozenset(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def _jaccard(a: frozenset, b: frozenset) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


@functools.lru_cache(maxsize=4096)
def _fingerprint(code: str) -> tuple[frozenset, frozenset]:
    exact, renamed = _views(code)
    return _shingles(exact), _shingles(renamed)


def similarity(a: str, b: str) -> float:
    """Near-copy similarity in [0, 1]: the larger of the Jaccard similarities of the two texts'
    5-token shingle sets on the exact view and on the renamed view (`_views`). Comments and
    docstrings do not count, so added comments leave it unchanged; renamed variables leave the
    renamed view unchanged; reordered or rewritten code lowers both."""
    fa, fb = _fingerprint(a), _fingerprint(b)
    return max(_jaccard(fa[0], fb[0]), _jaccard(fa[1], fb[1]))


# -- examples and corpora --------------------------------------------------------------------
@dataclass(frozen=True)
class Example:
    name: str      # file stem, or the entry's name in a JSON corpus
    code: str
    source: str    # where it came from: a path, or "path#index" for a JSON entry

    @property
    def file_name(self) -> str:
        return self.name.rsplit("/", 1)[-1]


def _prepare(code: str) -> str | None:
    """The example text kept in a corpus, or None: no Triton kernel, or too large. A TritonBench test
    harness (after its separator line of '#', when what follows defines tests) is cut: it shows
    nothing about writing the kernel and would crowd the prompt."""
    if not isinstance(code, str) or not _JIT.search(code):
        return None
    for match in _SEPARATOR.finditer(code):
        rest = code[match.end():]
        if re.search(r"^def test_|^result_gold\b|^import pytest|^@pytest", rest, re.M):
            code = code[:match.start()].rstrip() + "\n"
            break
    if len(code) > MAX_EXAMPLE_CHARS or not _JIT.search(code):
        return None
    return code


class Corpus:
    """Examples with their BM25 tokens (tokenized once, on first use)."""

    def __init__(self, examples: Iterable[Example] = ()) -> None:
        self.examples: list[Example] = []
        seen: set[str] = set()
        for ex in examples:
            code = _prepare(ex.code)
            if code is None:
                continue
            # one copy of a program found twice (a TritonBench file and its JSON twin): whitespace and
            # comments aside, the first one found is kept
            key = hashlib.sha1(" ".join(strip_comments(code).split()).encode()).hexdigest()
            if key in seen:
                continue
            seen.add(key)
            self.examples.append(ex if code == ex.code else Example(ex.name, code, ex.source))
        self._tokens: list[list[str]] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.examples)

    def __iter__(self):
        return iter(self.examples)

    def __add__(self, other: "Corpus") -> "Corpus":
        return Corpus([*self.examples, *other.examples])

    @property
    def tokens(self) -> list[list[str]]:
        with self._lock:
            if self._tokens is None:
                self._tokens = [_cached_tokens(ex.code) for ex in self.examples]
            return self._tokens

    # constructors
    @classmethod
    def builtin(cls) -> "Corpus":
        return cls.from_folder(BUILTIN_REFS_DIR, recursive=False)

    @classmethod
    def from_folder(cls, folder: Path | str, recursive: bool = True) -> "Corpus":
        folder = Path(folder)
        return _load_folder(str(folder.resolve()), recursive, _tree_stamp(folder, recursive))

    @classmethod
    def from_json(cls, path: Path | str) -> "Corpus":
        path = Path(path)
        stat = path.stat()
        return _load_json(str(path.resolve()), (stat.st_mtime_ns, stat.st_size))

    @classmethod
    def from_path(cls, path: Path | str) -> "Corpus":
        """A folder of .py files (recursively), a .json list (train_crawl.json style) or one .py file."""
        path = Path(path).expanduser()
        if path.is_dir():
            return cls.from_folder(path)
        if not path.is_file():
            raise FileNotFoundError(f"corpus {path} does not exist")
        if path.suffix == ".json":
            return cls.from_json(path)
        return cls([Example(path.stem, path.read_text(errors="replace"), str(path))])


@functools.lru_cache(maxsize=8192)
def _cached_tokens(code: str) -> list[str]:
    return tokenize(code)


def _tree_stamp(folder: Path, recursive: bool) -> tuple:
    files = sorted(folder.rglob("*.py") if recursive else folder.glob("*.py"))
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files if p.is_file())


@functools.lru_cache(maxsize=32)
def _load_folder(folder: str, recursive: bool, stamp: tuple) -> Corpus:
    root = Path(folder)
    examples = []
    for name, _, _ in stamp:
        path = Path(name)
        try:
            code = path.read_text(errors="replace")
        except OSError:
            continue
        rel = path.relative_to(root).with_suffix("").as_posix()
        examples.append(Example(rel, code, str(path)))
    corpus = Corpus(examples)
    corpus.tokens  # noqa: B018 - tokenize once, while cached
    return corpus


# code and name fields of the JSON corpora we know: TritonBench train_crawl.json ("code"),
# train_synth.json and the TritonBench-G instruction files ("output"), other crawls ("content")
_CODE_FIELDS = ("code", "content", "output", "source", "text")
_NAME_FIELDS = ("file", "name", "file_name", "filename", "path", "repo_name", "repo")


@functools.lru_cache(maxsize=8)
def _load_json(path: str, stamp: tuple) -> Corpus:
    try:
        data = json.loads(Path(path).read_text(errors="replace"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"corpus {path} is not valid JSON: {exc}") from None
    if isinstance(data, dict):  # {"data": [...]} or {name: code}
        data = data.get("data", data.get("items", [{"name": k, "code": v} for k, v in data.items()
                                                    if isinstance(v, str)]))
    if not isinstance(data, list):
        raise ValueError(f"corpus {path}: expected a JSON list of objects with a code field")
    examples = []
    for i, item in enumerate(data):
        code: str | None
        if isinstance(item, str):
            code, name = item, f"{Path(path).stem}[{i}]"
        elif isinstance(item, dict):
            code = next((item[k] for k in _CODE_FIELDS if isinstance(item.get(k), str) and item[k].strip()), None)
            label = next((str(item[k]) for k in _NAME_FIELDS if item.get(k)), "")
            name = Path(label).stem if label else f"{Path(path).stem}[{i}]"
        else:
            continue
        if code:
            examples.append(Example(name, code, f"{path}#{i}"))
    corpus = Corpus(examples)
    corpus.tokens  # noqa: B018
    return corpus


def load_corpus(extra_paths: Sequence[Path | str] = ()) -> Corpus:
    """The built-in suite's Triton kernels plus each extra path (a folder or a train_crawl.json)."""
    corpus = Corpus.builtin()
    for path in extra_paths:
        corpus = corpus + Corpus.from_path(path)
    return corpus


# -- retrieval -------------------------------------------------------------------------------
def _bm25_class():
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        raise ImportError("example retrieval needs the rank-bm25 package: pip install rank-bm25") from None
    return BM25Okapi


@dataclass
class _Excluded:
    texts: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)


class Retriever:
    """Top-1 example by BM25 over code tokens, never the task's own solution or a near-copy."""

    def __init__(self, corpus: Corpus, threshold: float = EXCLUDE_SIMILARITY) -> None:
        self.corpus = corpus
        self.threshold = threshold
        self._bm25 = None
        self._sets: list[frozenset] | None = None
        if len(corpus):
            tokens = corpus.tokens
            # BM25Okapi divides by the average length: an all-empty corpus would fail
            self._bm25 = _bm25_class()(tokens) if any(tokens) else None

    def ranked(self, query: str, exclude: Sequence[str | os.PathLike] = (), k: int = 5,
               exclude_names: Sequence[str] = ()) -> list[tuple[Example, float]]:
        """Up to k (example, score) pairs, best first, with excluded examples removed; examples that
        share no token with the query (score <= 0) are not returned."""
        if self._bm25 is None or not query:
            return []
        # each query token once: rank_bm25 adds a term's score for every repetition in the query,
        # and a whole program as query would be ranked by its most repeated generic tokens
        # ("ptr", "mask", "offs") rather than by what it computes
        q = list(dict.fromkeys(tokenize(query)))
        if not q:
            return []
        excluded = self._excluded(exclude, exclude_names)
        scores = self._bm25.get_scores(q)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], self.corpus.examples[i].name))
        out: list[tuple[Example, float]] = []
        for i in order:
            if scores[i] <= 0 or len(out) >= k:
                break
            example = self.corpus.examples[i]
            if not self.is_excluded(example, excluded):
                out.append((example, float(scores[i])))
        return out

    def best(self, query: str, exclude: Sequence[str | os.PathLike] = (),
             exclude_names: Sequence[str] = ()) -> Example | None:
        """The most similar example to `query`, or None. `exclude` holds the task's reference
        source texts (a `Path` also excludes by its file name); `exclude_names` file names or stems."""
        ranked = self.ranked(query, exclude, k=1, exclude_names=exclude_names)
        return ranked[0][0] if ranked else None

    def best_for(self, query: str, instruction: str = "", exclude: Sequence[str | os.PathLike] = (),
                 exclude_names: Sequence[str] = ()) -> Example | None:
        """The example for a task's query: a Triton-code query (a start kernel, a candidate to fix
        or optimize) goes to `best`, GEAK's code similarity, unchanged; a PyTorch or prose query is
        ranked by its operators (`operators.operator_query`, with the task's instruction), and
        falls back to `best` when it names no known operator."""
        from .operators import is_triton_code, operator_query

        weights = {} if is_triton_code(query) else operator_query(query, instruction)
        if not weights:
            return self.best(query, exclude, exclude_names)
        ranked = self.ranked_weighted(weights, query, exclude, k=1, exclude_names=exclude_names)
        return ranked[0][0] if ranked else None

    def ranked_weighted(self, weights: dict[str, float], query: str = "",
                        exclude: Sequence[str | os.PathLike] = (), k: int = 5,
                        exclude_names: Sequence[str] = ()) -> list[tuple[Example, float]]:
        """Up to k (example, score) pairs, best first. The score: the weighted sum of the positive
        tokens' BM25 scores, less, for each negative token the example holds, |weight| times the
        best positive score of any example or TIE_BREAK if larger (so a kernel with machinery the
        task does not need ranks below every kernel without it, whatever else it shares), plus the plain code-token
        BM25 of `query` scaled into [0, TIE_BREAK] to order examples the operators rank alike."""
        if self._bm25 is None or not weights:
            return []
        scores = [0.0] * len(self.corpus)
        for token, w in weights.items():
            if w > 0:
                for i, s in enumerate(self._bm25.get_scores([token])):
                    scores[i] += w * float(s)
        unit = max(max(scores), TIE_BREAK)
        held = self._token_sets()
        for token, w in weights.items():
            if w < 0:
                scores = [s + w * unit if token in held[i] else s for i, s in enumerate(scores)]
        tie = self._bm25.get_scores(list(dict.fromkeys(tokenize(query)))) if query else []
        top = max((float(t) for t in tie), default=0.0)
        if top > 0:
            scores = [s + TIE_BREAK * float(t) / top for s, t in zip(scores, tie)]
        excluded = self._excluded(exclude, exclude_names)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], self.corpus.examples[i].name))
        out: list[tuple[Example, float]] = []
        for i in order:
            if len(out) >= k:
                break
            if not self.is_excluded(self.corpus.examples[i], excluded):
                out.append((self.corpus.examples[i], scores[i]))
        return out

    def _token_sets(self) -> list[frozenset]:
        if self._sets is None:
            self._sets = [frozenset(tokens) for tokens in self.corpus.tokens]
        return self._sets

    def is_excluded(self, example: Example, excluded: "_Excluded") -> bool:
        if example.file_name.lower() in excluded.names:
            return True
        return any(similarity(example.code, text) >= self.threshold for text in excluded.texts)

    @staticmethod
    def _excluded(exclude: Sequence[str | os.PathLike], names: Sequence[str]) -> _Excluded:
        out = _Excluded(names={Path(n).stem.lower() for n in names if n})
        for item in exclude:
            if isinstance(item, os.PathLike):
                path = Path(item)
                out.names.add(path.stem.lower())
                try:
                    out.texts.append(path.read_text(errors="replace"))
                except OSError:
                    pass
            elif isinstance(item, str) and item.strip():
                out.texts.append(item)
        return out


