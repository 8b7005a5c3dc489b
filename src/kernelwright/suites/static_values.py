"""Values of a benchmark's source read without running it: an evaluator of a restricted subset
of Python over its AST (`StaticValues`), for the parametrizations of test files that the trusted
process must not execute (docs/suites.md: benchmark code runs only in child processes).

What it evaluates: literals and displays (with `*x` and `**d`), names bound earlier at module
level, arithmetic, comparisons, boolean and conditional expressions, subscripts, comprehensions
(several `for`s, `if`s, tuple targets), a fixed set of pure calls (`range`, `len`, `zip`,
`itertools.product`, `itertools.chain`, ... and `pytest.param`), `torch.<dtype>` attributes, and
calls to the module's own functions whose bodies are only assignments, `+=`, `for`, `if`,
`list.append`/`extend` and `return` of such expressions. Anything else raises `NotStatic`, and
so does work past a budget (`MAX_STEPS` values made, `MAX_ITEMS` elements in one sequence,
exponents past `MAX_EXPONENT`): a file cannot make the trusted process loop or fill its memory.
Nothing of the file is imported, called or looked up outside these tables.
"""

from __future__ import annotations

import ast
import itertools
import operator
import re
from dataclasses import dataclass
from typing import Any, Callable

MAX_STEPS = 1_000_000    # values made while evaluating one expression (a comprehension's items count)
MAX_ITEMS = 100_000      # elements of one sequence (range, repetition, product)
MAX_EXPONENT = 4096      # `a ** b` with integer b
MAX_INT_BITS = 1 << 16   # any integer made (`(10**4000)**4000` is refused before it is computed)
MAX_DEPTH = 50           # nested calls of the module's own functions


class NotStatic(ValueError):
    """The expression is outside what `StaticValues` evaluates."""


@dataclass(frozen=True)
class Param:
    """`pytest.param(*values, marks=..., id=...)`: its values (what pytest passes the test)."""

    values: tuple


def _bounded(n: int) -> int:
    if n > MAX_ITEMS:
        raise NotStatic(f"a sequence of {n} elements (the limit is {MAX_ITEMS})")
    return n


def _range(*args: int) -> range:
    if not all(isinstance(a, int) for a in args):
        raise NotStatic("range() of a non-integer")
    r = range(*args)
    _bounded(len(r))
    return r


def _checked(value: Any) -> Any:
    """`value` if it is within the budget's sizes (an operator's result)."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise NotStatic(f"an integer of {value.bit_length()} bits")
    if isinstance(value, (str, bytes, list, tuple)):
        _bounded(len(value))
    return value


def _product(*iterables: Any, repeat: int = 1) -> list:
    _bounded(len(iterables) * repeat)
    pools = [list(p) for p in iterables] * repeat
    size = 1
    for pool in pools:
        size *= len(pool)
        _bounded(size)
    return list(itertools.product(*pools))


def _chain(*iterables: Any) -> list:
    out: list = []
    for it in iterables:
        out.extend(it)
        _bounded(len(out))
    return out


# The callables a file may call, by the dotted name it calls them with: pure, with bounded results.
CALLS: dict[str, Callable[..., Any]] = {
    "range": _range, "len": len, "list": list, "tuple": tuple, "set": set, "dict": dict, "zip": zip,
    "enumerate": enumerate, "sorted": sorted, "reversed": reversed, "min": min, "max": max, "sum": sum,
    "abs": abs, "int": int, "float": float, "str": str, "bool": bool, "round": round,
    "itertools.product": _product, "itertools.chain": _chain, "itertools.chain.from_iterable": lambda it: _chain(*it),
}
# Methods of str values a file may call (they return new values; none mutates anything).
STR_METHODS = frozenset({"split", "rsplit", "strip", "lstrip", "rstrip", "lower", "upper", "replace", "join",
                         "startswith", "endswith", "removeprefix", "removesuffix"})
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.LShift: operator.lshift,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` as "a.b.c", or None for anything that is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def _torch_dtype(name: str) -> Any:
    """`torch.float16` and the other dtypes (torch is the judge's own dependency, imported anyway)."""
    import torch

    value = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(value, torch.dtype):
        raise NotStatic(f"{name} is not a torch dtype")
    return value


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class StaticValues:
    """Evaluates expressions of one module (`module_env` binds its top-level names first)."""

    def __init__(self, env: dict[str, Any] | None = None) -> None:
        self.env: dict[str, Any] = dict(env or {})
        self.steps = 0
        self.depth = 0

    def module_env(self, tree: ast.Module) -> dict[str, Any]:
        """The module's top-level names, statement by statement as running it would bind them
        (`X = expr`, `X += ...`, `for` loops that append to a list, `if`), and the functions it
        defines (evaluated when called). A statement that cannot be evaluated (an import, a call
        of anything else, a `try`) unbinds every name it binds or might change: a later use of
        one is NotStatic, never a stale or half-built value."""
        self.env.setdefault("__name__", "kernelwright_static")  # not "__main__": that block does not run
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                self.env[node.name] = node
                continue
            self.steps = 0
            try:
                self._run([node], self.env)
            except (NotStatic, _Return, ArithmeticError, TypeError, ValueError, KeyError, IndexError, AttributeError):
                for name in self._touched(node):
                    self.env.pop(name, None)
        return self.env

    def _touched(self, node: ast.stmt) -> set[str]:
        """The names `node` binds, and the mutable values (lists, dicts, sets) it mentions."""
        names = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and (isinstance(sub.ctx, (ast.Store, ast.Del))
                                              or isinstance(self.env.get(sub.id), (list, dict, set))):
                names.add(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(sub.name)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
        return names

    def value(self, node: ast.expr, scope: dict[str, Any] | None = None) -> Any:
        """The value of `node` (names from `scope`, then the module's), or NotStatic."""
        self.steps = 0
        return self._eval(node, scope or {})

    # -- expressions ---------------------------------------------------------------------------
    def _step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > MAX_STEPS:
            raise NotStatic(f"more than {MAX_STEPS} values made")

    def _eval(self, node: ast.expr, scope: dict[str, Any]) -> Any:
        self._step()
        method = getattr(self, f"_{type(node).__name__}", None)
        if method is None:
            raise NotStatic(f"{type(node).__name__} at line {getattr(node, 'lineno', '?')}")
        return method(node, scope)

    def _Constant(self, node: ast.Constant, scope: dict) -> Any:
        return node.value

    def _Name(self, node: ast.Name, scope: dict) -> Any:
        for names in (scope, self.env):
            if node.id in names and not isinstance(names[node.id], ast.FunctionDef):
                return names[node.id]
        raise NotStatic(f"the name {node.id!r}")

    def _Attribute(self, node: ast.Attribute, scope: dict) -> Any:
        name = dotted(node)
        if name is not None and name.startswith("torch."):
            return _torch_dtype(name)
        raise NotStatic(f"the attribute {name or node.attr!r}")

    def _items(self, elts: list[ast.expr], scope: dict) -> list:
        out: list = []
        for elt in elts:
            if isinstance(elt, ast.Starred):
                out.extend(self._eval(elt.value, scope))
            else:
                out.append(self._eval(elt, scope))
        self._step(len(out))
        return out

    def _Tuple(self, node: ast.Tuple, scope: dict) -> tuple:
        return tuple(self._items(node.elts, scope))

    def _List(self, node: ast.List, scope: dict) -> list:
        return self._items(node.elts, scope)

    def _Set(self, node: ast.Set, scope: dict) -> set:
        return set(self._items(node.elts, scope))

    def _Dict(self, node: ast.Dict, scope: dict) -> dict:
        out: dict = {}
        for key, value in zip(node.keys, node.values):
            if key is None:  # {**other}
                out.update(self._eval(value, scope))
            else:
                out[self._eval(key, scope)] = self._eval(value, scope)
        return out

    def _BinOp(self, node: ast.BinOp, scope: dict) -> Any:
        op = _BINARY.get(type(node.op))
        if op is None:
            raise NotStatic(f"the operator {type(node.op).__name__}")
        left, right = self._eval(node.left, scope), self._eval(node.right, scope)
        if isinstance(node.op, ast.Pow) and isinstance(right, int) and (
                abs(right) > MAX_EXPONENT or isinstance(left, int) and left.bit_length() * right > MAX_INT_BITS):
            raise NotStatic(f"an exponent of {right}")
        if isinstance(node.op, ast.LShift) and isinstance(right, int) and right > MAX_EXPONENT:
            raise NotStatic(f"a shift by {right}")
        if isinstance(node.op, ast.Mult):  # a repeated sequence stays within the budget
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                    _bounded(len(seq) * n)
        return _checked(op(left, right))

    def _UnaryOp(self, node: ast.UnaryOp, scope: dict) -> Any:
        return _UNARY[type(node.op)](self._eval(node.operand, scope))

    def _BoolOp(self, node: ast.BoolOp, scope: dict) -> Any:
        value: Any = None
        for operand in node.values:
            value = self._eval(operand, scope)
            if bool(value) == isinstance(node.op, ast.Or):
                return value
        return value

    def _Compare(self, node: ast.Compare, scope: dict) -> bool:
        left = self._eval(node.left, scope)
        for op, comparator in zip(node.ops, node.comparators):
            right = self._eval(comparator, scope)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True

    def _IfExp(self, node: ast.IfExp, scope: dict) -> Any:
        return self._eval(node.body if self._eval(node.test, scope) else node.orelse, scope)

    def _Subscript(self, node: ast.Subscript, scope: dict) -> Any:
        return self._eval(node.value, scope)[self._eval(node.slice, scope)]

    def _Slice(self, node: ast.Slice, scope: dict) -> slice:
        part = (lambda n: None if n is None else self._eval(n, scope))
        return slice(part(node.lower), part(node.upper), part(node.step))

    def _JoinedStr(self, node: ast.JoinedStr, scope: dict) -> str:
        return _checked("".join(str(self._eval(part, scope)) for part in node.values))

    def _FormattedValue(self, node: ast.FormattedValue, scope: dict) -> str:
        value = self._eval(node.value, scope)
        convert = {115: str, 114: repr, 97: ascii}.get(node.conversion)  # !s !r !a
        value = convert(value) if convert else value
        spec = self._eval(node.format_spec, scope) if node.format_spec is not None else ""
        if re.search(r"\d{5,}", spec):  # a width of 10**5 or more: a string past the budget
            raise NotStatic(f"the format spec {spec[:20]!r}")
        return _checked(format(value, spec))

    def _Call(self, node: ast.Call, scope: dict) -> Any:
        if isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS:
            receiver = self._eval(node.func.value, scope)
            if not isinstance(receiver, str):
                raise NotStatic(f"the method {node.func.attr} of a {type(receiver).__name__}")
            if node.keywords:
                raise NotStatic(f"{node.func.attr}() with keywords")
            return _checked(getattr(receiver, node.func.attr)(*self._items(node.args, scope)))
        name = dotted(node.func)
        args = self._items(node.args, scope)
        if name == "pytest.param":  # its marks and id are pytest's business, not values: not read
            return Param(tuple(args))
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self._eval(kw.value, scope))
            else:
                kwargs[kw.arg] = self._eval(kw.value, scope)
        own = self.env.get(name) if name else None
        if isinstance(own, ast.FunctionDef):
            return self._call_own(own, args, kwargs)
        if name not in CALLS:
            raise NotStatic(f"a call of {name or 'an expression'}")
        result = CALLS[name](*args, **kwargs)
        if isinstance(result, (zip, enumerate, reversed)):
            result = list(result)
        self._step(len(result) if hasattr(result, "__len__") else 1)
        return result

    # -- comprehensions ----------------------------------------------------------------------
    def _bind(self, target: ast.expr, value: Any, scope: dict) -> None:
        if isinstance(target, ast.Name):
            scope[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = list(value)
            if len(values) != len(target.elts):
                raise NotStatic(f"unpacking {len(values)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, values):
                self._bind(t, v, scope)
        else:
            raise NotStatic(f"assignment to {type(target).__name__}")

    def _generate(self, generators: list[ast.comprehension], scope: dict):
        """Every scope the comprehension's `for`s and `if`s let through."""
        if not generators:
            yield scope
            return
        first, rest = generators[0], generators[1:]
        if first.is_async:
            raise NotStatic("an async comprehension")
        for item in self._eval(first.iter, scope):
            self._step()
            inner = dict(scope)
            self._bind(first.target, item, inner)
            if all(self._eval(cond, inner) for cond in first.ifs):
                yield from self._generate(rest, inner)

    def _ListComp(self, node: ast.ListComp, scope: dict) -> list:
        return [self._eval(node.elt, s) for s in self._generate(node.generators, scope)]

    def _GeneratorExp(self, node: ast.GeneratorExp, scope: dict) -> list:
        return self._ListComp(node, scope)  # type: ignore[arg-type]

    def _SetComp(self, node: ast.SetComp, scope: dict) -> set:
        return {self._eval(node.elt, s) for s in self._generate(node.generators, scope)}

    def _DictComp(self, node: ast.DictComp, scope: dict) -> dict:
        return {self._eval(node.key, s): self._eval(node.value, s) for s in self._generate(node.generators, scope)}

    # -- the module's own functions ----------------------------------------------------------
    def _call_own(self, fn: ast.FunctionDef, args: list, kwargs: dict) -> Any:
        spec = fn.args
        if spec.vararg or spec.kwarg or spec.kwonlyargs or spec.posonlyargs or fn.decorator_list:
            raise NotStatic(f"a call of {fn.name}() (only plain parameters are evaluated)")
        names = [a.arg for a in spec.args]
        defaults = dict(zip(names[len(names) - len(spec.defaults):], spec.defaults))
        if len(args) > len(names) or set(kwargs) - set(names):
            raise NotStatic(f"a call of {fn.name}() with arguments it does not take")
        scope = dict(zip(names, args), **kwargs)
        for name in names:
            if name not in scope:
                if name not in defaults:
                    raise NotStatic(f"a call of {fn.name}() without its argument {name}")
                scope[name] = self._eval(defaults[name], {})
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise NotStatic(f"calls nested deeper than {MAX_DEPTH}")
            self._run(fn.body, scope)
        except _Return as returned:
            return returned.value
        finally:
            self.depth -= 1
        return None

    def _run(self, body: list[ast.stmt], scope: dict) -> None:
        for stmt in body:
            self._step()
            if isinstance(stmt, ast.Return):
                raise _Return(None if stmt.value is None else self._eval(stmt.value, scope))
            if isinstance(stmt, ast.Assign):
                value = self._eval(stmt.value, scope)
                for target in stmt.targets:
                    self._bind(target, value, scope)
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                op = _BINARY.get(type(stmt.op))
                if op is None:
                    raise NotStatic(f"the operator {type(stmt.op).__name__}=")
                fake = ast.BinOp(ast.Name(stmt.target.id, ast.Load()), stmt.op, stmt.value)
                scope[stmt.target.id] = self._BinOp(fake, scope)
            elif isinstance(stmt, ast.For) and not stmt.orelse:
                for item in self._eval(stmt.iter, scope):
                    self._bind(stmt.target, item, scope)
                    try:
                        self._run(stmt.body, scope)
                    except _Continue:
                        continue
                    except _Break:
                        break
            elif isinstance(stmt, ast.Continue):
                raise _Continue
            elif isinstance(stmt, ast.Break):
                raise _Break
            elif isinstance(stmt, ast.If):
                self._run(stmt.body if self._eval(stmt.test, scope) else stmt.orelse, scope)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # a docstring
            elif isinstance(stmt, ast.Expr) and self._mutating_method(stmt.value, scope):
                continue
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and dotted(stmt.value.func) == "print":
                continue  # what it prints changes no value (and is not evaluated)
            elif not isinstance(stmt, ast.Pass):
                raise NotStatic(f"the statement {type(stmt).__name__} at line {stmt.lineno}")

    def _mutating_method(self, call: ast.expr, scope: dict) -> bool:
        """`xs.append(v)` / `xs.extend(vs)` on a list, `s.add(v)` on a set, of the scope being
        run (a function's, or the module's while `module_env` reads it)."""
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and not call.keywords and len(call.args) == 1):
            return False
        target, method = scope.get(call.func.value.id), call.func.attr
        if not (isinstance(target, list) and method in ("append", "extend") or isinstance(target, set) and method == "add"):
            return False
        getattr(target, method)(self._eval(call.args[0], scope))
        _bounded(len(target))
        return True
