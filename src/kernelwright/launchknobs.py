"""Launch knobs of a Triton kernel, found in its source and rewritten: pure source
transformations, no judging, no LLM, nothing of kernelwright imported (the standard library only).

It is a top-level module, not part of `agent/`, because two layers use it: the agent's tuning
pass (agent/tuning.py judges these variants and keeps the best) and the local editing model
(llm/testing/editing_model.py answers optimize prompts with them). Under `agent/` it would make
the LLM layer import the agent; here both import it and it imports neither.

    variants(code, n)          launch-parameter variants of `code`, most promising first, each
                               differing from `code` only in the literals it must change (precise
                               byte edits at AST node positions)
    variants_and_why(code, n)  the same, with why there are none (the tuning pass's note)

Rewrite rules (a variant changes launch parameters only; one the kernel cannot take is judged
wrong and dropped):

- at a launch site `kernel[grid](...)`, keyword (or positional, mapped to the kernel's
  `tl.constexpr` parameter) integer literals: `num_warps` in {1,2,4,8,16}, `num_stages` in 1..5,
  block-like names (upper case, containing BLOCK/TILE/SIZE/GROUP, a power of two) halved and
  doubled within 16..65536 (GROUP without BLOCK/TILE: within 1..64). An integer literal of the
  same value in the launch's grid (`triton.cdiv(n, 1024)`, inline or a grid variable assigned
  once) changes with the block size, unless another block size of the launch has that value;
- the same for a name at the launch that is an integer constant assigned exactly once, in the
  wrapper or at module level (`BLOCK = 1024`): the assignment's literal is rewritten;
- `@triton.autotune(configs=[...])` (a list literal, inline or a module-level name assigned
  once): each existing config pinned alone (`configs=[that config]`), and for a list of at
  most 4 configs, each pinned with num_warps doubled/halved and num_stages one up/down.

Order: pinned configs and single-parameter changes to the nearest values first, then changed
pinned configs, then two knobs moved together, then farther values; deduplicated; capped.
"""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass
from typing import Iterable, Iterator

WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4, 5)
BLOCK_RANGE = (16, 65536)
GROUP_RANGE = (1, 64)
CONFIG_DEFAULTS = {"num_warps": 4, "num_stages": 3}   # triton.Config's defaults
SHORT_CONFIG_LIST = 4      # autotune lists up to this long also get num_warps/num_stages changed


@dataclass(frozen=True)
class Variant:
    code: str
    description: str              # e.g. "BLOCK_SIZE=512, num_warps=8"


# -- the source and its edits ---------------------------------------------------------------------
class _Source:
    """Byte offsets of AST nodes (ast's columns are UTF-8 byte offsets) and byte-exact edits."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.data = code.encode("utf-8")
        self.starts = [0]
        for line in self.data.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def span(self, node: ast.AST) -> tuple[int, int]:
        # (ast.AST declares no positions; every node given here is an expression that has them)
        return (self.starts[node.lineno - 1] + node.col_offset,  # type: ignore[attr-defined]
                self.starts[node.end_lineno - 1] + node.end_col_offset)  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.data[a:b].decode("utf-8")

    def apply(self, edits: Iterable[tuple[int, int, str]]) -> str | None:
        """`code` with each byte span replaced; None when two edits overlap."""
        out, pos = [], len(self.data)
        for a, b, new in sorted(set(edits), reverse=True):
            if b > pos:
                return None
            out.append(new.encode("utf-8") + self.data[b:pos])
            pos = a
        out.append(self.data[:pos])
        return b"".join(reversed(out)).decode("utf-8")


@dataclass
class _Knob:
    label: str                                # the parameter (or constant) name
    site: str                                 # the kernel launched, when the file launches several
    kind: str                                 # "block" | "warps" | "stages"
    value: int
    spans: list[tuple[int, int]]              # literals holding `value`, all rewritten together
    choices: tuple[int, ...] = ()             # new values, most promising first


_KIND_ORDER = {"block": 0, "warps": 1, "stages": 2}


def _int_literal(node: ast.AST | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _power_of_two(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _knob_kind(name: str) -> str | None:
    if name == "num_warps":
        return "warps"
    if name == "num_stages":
        return "stages"
    if name.isidentifier() and name == name.upper() and any(w in name for w in ("BLOCK", "TILE", "SIZE", "GROUP")):
        return "block"
    return None


def _choices(kind: str, name: str, value: int) -> tuple[int, ...]:
    if kind == "warps":
        return tuple(sorted((v for v in WARPS if v != value),
                            key=lambda v: (abs(math.log2(v) - math.log2(max(value, 1))), v < value)))
    if kind == "stages":
        return tuple(sorted((v for v in STAGES if v != value), key=lambda v: (abs(v - value), v < value)))
    if not _power_of_two(value):
        return ()
    lo, hi = GROUP_RANGE if "GROUP" in name and "BLOCK" not in name and "TILE" not in name else BLOCK_RANGE
    return tuple(v for v in (value * 2, value // 2) if lo <= v <= hi)


# -- scopes: which names are integer constants assigned once ------------------------------------
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _scope_nodes(scope: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, not descending into nested functions, lambdas or classes."""
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))


class _Scopes:
    def __init__(self, tree: ast.Module) -> None:
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.tree = tree
        self.declared = {n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal))
                         for n in node.names}
        self._stores: dict[ast.AST, dict[str, list[ast.AST]]] = {}

    def stores(self, scope: ast.AST) -> dict[str, list[ast.AST]]:
        if scope not in self._stores:
            found: dict[str, list[ast.AST]] = {}

            def add(name: str, node: ast.AST) -> None:
                found.setdefault(name, []).append(node)

            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = scope.args
                for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                    if arg is not None:
                        add(arg.arg, arg)
            for node in _scope_nodes(scope):
                if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                    add(node.id, node)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    add(node.name, node)
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        add((alias.asname or alias.name).split(".")[0], node)
                elif isinstance(node, ast.ExceptHandler) and node.name:
                    add(node.name, node)
            self._stores[scope] = found
        return self._stores[scope]

    def enclosing(self, node: ast.AST) -> list[ast.AST]:
        """The function scopes around `node`, innermost first, then the module."""
        out, cur = [], self.parent.get(node)
        while cur is not None:
            if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                out.append(cur)
            cur = self.parent.get(cur)
        return out + [self.tree]

    def assigned_once(self, name: str, at: ast.AST) -> ast.AST | None:
        """The value expression of `name` where it is read at `at`, when the name is assigned
        exactly once (a plain `name = value` or `name: T = value`) in the scope it resolves to."""
        if name in self.declared:
            return None
        for scope in self.enclosing(at):
            stores = self.stores(scope).get(name)
            if not stores:
                continue
            if len(stores) != 1:
                return None
            assign = self.parent.get(stores[0])
            if isinstance(assign, ast.Assign) and len(assign.targets) == 1 and assign.targets[0] is stores[0]:
                return assign.value
            if isinstance(assign, ast.AnnAssign) and assign.target is stores[0] and assign.value is not None \
                    and assign.simple:
                return assign.value
            return None
        return None


# -- finding the knobs -----------------------------------------------------------------------------
def _jit_params(tree: ast.Module) -> dict[str, list[ast.arg]]:
    """Module-level Triton kernels (any decorator mentioning jit/autotune/heuristics) and
    their positional parameters."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(
                any(w in ast.unparse(d) for w in ("jit", "autotune", "heuristics")) for d in node.decorator_list):
            out[node.name] = [*node.args.posonlyargs, *node.args.args]
    return out


def _launch_knobs(tree: ast.Module, src: _Source, scopes: _Scopes) -> list[_Knob]:
    kernels = _jit_params(tree)
    knobs: dict[tuple[int, int], _Knob] = {}
    sites = [(n, n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)]
    sites.sort(key=lambda s: (s[0].lineno, s[0].col_offset))
    named_sites = {ast.unparse(launched.value) for _, launched in sites}
    for site, launched in sites:
        kernel = ast.unparse(launched.value)
        # (parameter name, value node) of the launch
        params: list[tuple[str, ast.AST]] = [(k.arg, k.value) for k in site.keywords if k.arg]
        formal = kernels.get(kernel, [])
        for i, arg in enumerate(site.args):
            if isinstance(arg, ast.Starred):
                break
            annotation = formal[i].annotation if i < len(formal) else None
            if annotation is not None and "constexpr" in ast.unparse(annotation):
                params.append((formal[i].arg, arg))
        site_knobs: list[_Knob] = []
        for name, value in params:
            kind = _knob_kind(name)
            literal: ast.AST | None = value
            label = name
            if isinstance(value, ast.Name):
                literal, label = scopes.assigned_once(value.id, site), value.id
                kind = kind or _knob_kind(value.id)
            v = _int_literal(literal)
            if kind is None or v is None or literal is None:   # (no literal: v is None)
                continue
            choices = _choices(kind, name if _knob_kind(name) else label, v)
            if not choices:
                continue
            span = src.span(literal)
            site_name = kernel if len(named_sites) > 1 and not isinstance(value, ast.Name) else ""
            knob = knobs.get(span)
            if knob is None:
                knob = knobs[span] = _Knob(label, site_name, kind, v, [span], choices)
            site_knobs.append(knob)
        # a grid literal equal to a block size changes with it (when no other block size has it)
        grid: ast.AST = launched.slice
        if isinstance(grid, ast.Name):
            grid = scopes.assigned_once(grid.id, site) or grid
        block_values = [k.value for k in site_knobs if k.kind == "block"]
        for knob in site_knobs:
            if knob.kind != "block" or block_values.count(knob.value) != 1:
                continue
            for node in ast.walk(grid):
                if _int_literal(node) == knob.value and src.span(node) not in knob.spans:
                    knob.spans.append(src.span(node))
    return sorted(knobs.values(), key=lambda k: _KIND_ORDER[k.kind])


def _autotunes(tree: ast.Module, scopes: _Scopes) -> list[tuple[str, ast.List]]:
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            if not (isinstance(deco, ast.Call) and ast.unparse(deco.func).split(".")[-1] == "autotune"):
                continue
            configs: ast.AST | None = next((k.value for k in deco.keywords if k.arg == "configs"),
                                           deco.args[0] if deco.args else None)
            if isinstance(configs, ast.Name):
                configs = scopes.assigned_once(configs.id, deco)
            if isinstance(configs, ast.List) and configs.elts and \
                    not any(isinstance(e, ast.Starred) for e in configs.elts):
                out.append((node.name, configs))
    return out


def _describe_config(src: _Source, config: ast.AST) -> str:
    if isinstance(config, ast.Call):
        parts = []
        if config.args and isinstance(config.args[0], ast.Dict):
            for k, v in zip(config.args[0].keys, config.args[0].values):
                key = str(k.value) if isinstance(k, ast.Constant) else (ast.unparse(k) if k else "**")
                parts.append(f"{key}={ast.unparse(v)}")
        for name, arg in zip(("num_warps", "num_stages"), config.args[1:3]):
            parts.append(f"{name}={ast.unparse(arg)}")
        parts += [f"{k.arg}={ast.unparse(k.value)}" for k in config.keywords if k.arg]
        if parts:
            return ", ".join(parts)
    return " ".join(src.text(config).split())[:160]


def _config_with(src: _Source, config: ast.AST, name: str, new: int) -> str | None:
    """The config's source with `name` (num_warps / num_stages) set to `new`; None when the
    config is not a simple call or the parameter is not an integer literal."""
    if not isinstance(config, ast.Call):
        return None
    base = src.span(config)[0]
    node = next((k.value for k in config.keywords if k.arg == name), None)
    pos = {"num_warps": 1, "num_stages": 2}[name]
    if node is None and len(config.args) > pos:
        node = config.args[pos]
    text = src.data[slice(*src.span(config))]
    if node is not None:
        if _int_literal(node) is None:
            return None
        a, b = (x - base for x in src.span(node))
        return (text[:a] + str(new).encode() + text[b:]).decode("utf-8")
    if any(isinstance(a, ast.Starred) for a in config.args) or any(k.arg is None for k in config.keywords):
        return None
    last = max([*config.args, *(k.value for k in config.keywords)], key=lambda n: src.span(n)[1], default=None)
    if last is None:
        return None
    end = src.span(last)[1] - base
    return (text[:end] + f", {name}={new}".encode() + text[end:]).decode("utf-8")


def _config_value(config: ast.AST, name: str) -> int | None:
    if not isinstance(config, ast.Call):
        return None
    node = next((k.value for k in config.keywords if k.arg == name), None)
    pos = {"num_warps": 1, "num_stages": 2}[name]
    if node is None and len(config.args) > pos:
        node = config.args[pos]
    return CONFIG_DEFAULTS[name] if node is None else _int_literal(node)


# -- the candidates, in order ------------------------------------------------------------------------
Edit = tuple[int, int, str]


def _candidates(code: str) -> tuple[_Source | None, Iterator[tuple[list[Edit], str]], str]:
    """(source, (edits, description) in order of promise, why there is nothing to tune)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return None, iter(()), f"the kernel does not parse ({type(exc).__name__}): nothing to tune"
    src = _Source(code)
    scopes = _Scopes(tree)
    knobs = _launch_knobs(tree, src, scopes)
    tunes = _autotunes(tree, scopes)
    if not knobs and not tunes:
        return src, iter(()), "no tunable launch parameter (integer literal block size, num_warps, " \
                              "num_stages, constant assigned once, or autotune config list)"
    prefix = (lambda name: f"autotune of {name}: ") if len(tunes) > 1 or knobs else (lambda name: "autotune: ")

    def single(knob: _Knob, value: int, site: bool = True) -> tuple[list[Edit], str]:
        where = f"{knob.site}: " if knob.site and site else ""
        return [(a, b, str(value)) for a, b in knob.spans], f"{where}{knob.label}={value}"

    def singles(ranks: range) -> Iterator[tuple[list[Edit], str]]:
        order = sorted(((r, _KIND_ORDER[k.kind], i, k) for i, k in enumerate(knobs) for r in ranks
                        if r < len(k.choices)), key=lambda t: t[:3])
        for r, _, _, k in order:
            yield single(k, k.choices[r])

    def pins() -> Iterator[tuple[list[Edit], str]]:
        for name, lst in tunes:
            if len(lst.elts) < 2:
                continue
            for i, config in enumerate(lst.elts):
                yield ([(*src.span(lst), f"[{src.text(config)}]")],
                       f"{prefix(name)}only config {i + 1} of {len(lst.elts)} ({_describe_config(src, config)})")

    def changed_pins() -> Iterator[tuple[list[Edit], str]]:
        per_config = []
        for name, lst in tunes:
            if len(lst.elts) > SHORT_CONFIG_LIST:
                continue
            for i, config in enumerate(lst.elts):
                mods = []
                for param, kind in (("num_warps", "warps"), ("num_stages", "stages")):
                    current = _config_value(config, param)
                    if current is None:
                        continue
                    for new in _choices(kind, param, current)[:2]:
                        text = _config_with(src, config, param, new)
                        if text is not None:
                            mods.append((param == "num_stages", new < current, [(*src.span(lst), f"[{text}]")],
                                         f"{prefix(name)}only config {i + 1} of {len(lst.elts)} "
                                         f"({_describe_config(src, config)}) with {param}={new}"))
                # warps up, stages up, warps down, stages down
                per_config.append([m[2:] for m in sorted(mods, key=lambda m: (m[1], m[0]))])
        for round_ in itertools.zip_longest(*per_config):
            for item in round_:
                if item is not None:
                    yield item[0], item[1]

    def pairs() -> Iterator[tuple[list[Edit], str]]:
        for r in (0, 1):
            for a, b in itertools.combinations(knobs, 2):
                if r < len(a.choices) and r < len(b.choices):
                    ea, da = single(a, a.choices[r])
                    eb, db = single(b, b.choices[r], site=a.site != b.site)
                    yield ea + eb, f"{da}, {db}"

    return src, itertools.chain(pins(), singles(range(2)), changed_pins(), pairs(), singles(range(2, 8))), ""


def variants(code: str, max_variants: int) -> list[Variant]:
    """Launch-parameter variants of `code`, most promising first, at most `max_variants`; each
    differs from `code` only in the literals it rewrites. None for a file that does not parse or
    has nothing to tune. Pure: nothing is judged."""
    return variants_and_why(code, max_variants)[0]


def variants_and_why(code: str, max_variants: int) -> tuple[list[Variant], str]:
    """`variants(code, max_variants)` and, when there are none, why (one line): the file does not
    parse, has nothing to tune, every value is at its limit, or the budget is of no variants."""
    if max_variants <= 0:
        return [], "a budget of no variants"
    try:
        return _rewrites(code, max_variants)
    except Exception as exc:  # noqa: BLE001 - the code is a model's: a bug of ours costs the tuning only
        return [], f"the kernel's launch parameters could not be analysed: {exc!r}"[:300]


def _rewrites(code: str, max_variants: int) -> tuple[list[Variant], str]:
    src, candidates, why = _candidates(code)
    out: list[Variant] = []
    seen = {code}
    for edits, description in candidates:
        if len(out) >= max_variants:
            break
        assert src is not None  # there are candidates: the code parsed
        new = src.apply(edits)
        if new is None or new in seen:
            continue
        seen.add(new)
        try:
            ast.parse(new)
        except SyntaxError:
            continue
        out.append(Variant(new, description))
    if not out and not why:
        why = "no launch parameter can change (every value is at its limit)"
    return out, why
