"""`suites.static_values`: the benchmark-file values the trusted process reads without running
the file (issue 29 item 10). What it evaluates, and that everything else, and anything past its
budget, is refused (NotStatic) instead of run."""

import ast
import time

import pytest
import torch

from kernelwright.suites.static_values import NotStatic, Param, StaticValues


def env_of(source: str) -> dict:
    return StaticValues().module_env(ast.parse(source))


def value_of(expr: str, source: str = ""):
    values = StaticValues()
    values.module_env(ast.parse(source))
    return values.value(ast.parse(expr, mode="eval").body)


def test_comprehensions_itertools_and_the_modules_own_helpers():
    source = """
SIZES = [2**i for i in range(10, 13)]
def shapes(extra=()):
    out = [(1024 * v, 1024 * v) for v in range(1, 3)]
    out += [(7, 9)]
    for e in extra:
        if e % 2:
            continue
        out.append((e, e))
    return out
CONFIGS = []
for m, n in shapes((3, 4)):
    CONFIGS.append({'M': m, 'N': n, 'tag': f"m{m}_n{n:>4}"})
print(f"{len(CONFIGS)} configs")
"""
    env = env_of(source)
    assert env["SIZES"] == [1024, 2048, 4096]
    assert [c["tag"] for c in env["CONFIGS"]] == ["m1024_n1024", "m2048_n2048", "m7_n   9", "m4_n   4"]
    assert value_of("[(*s, d) for s in shapes() for d in ['fp16', 'bf16'] if s[0] > 1024]", source) == \
        [(2048, 2048, "fp16"), (2048, 2048, "bf16")]
    assert value_of("itertools.chain(*[[[1, t], [2, t]] for t in [True, False]])") == \
        [[1, True], [2, True], [1, False], [2, False]]
    assert value_of("list(itertools.product([1, 2], 'ab'))") == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]
    assert value_of("[pytest.param(1, 2, marks=x), (3, 4)]") == [Param((1, 2)), (3, 4)]
    assert value_of("[torch.float16, torch.bfloat16]") == [torch.float16, torch.bfloat16]
    assert value_of("[int(s) for s in '4,53'.split(',')]") == [4, 53]


@pytest.mark.parametrize("expr", [
    "open('/etc/passwd')", "__import__('os').system('true')", "os.system('true')", "eval('1')",
    "(1).__class__", "torch.randn(3)", "torch.cuda.get_device_capability()", "getattr(torch, 'x')",
    "[x for x in range(10**9)]", "10 ** 10 ** 6", "(10 ** 4000) ** 4000", "'a' * 10**9", "1 << 10**6",
    "f'{1:>1000000}'", "lambda: 1", "(x := 3)", "'abc'.format()", "[].append(1)", "unknown_name",
])
def test_anything_else_is_refused_not_run(expr):
    started = time.monotonic()
    with pytest.raises(NotStatic):
        value_of(expr)
    assert time.monotonic() - started < 2  # refused before the work, not after it


def test_loops_and_recursion_are_bounded():
    source = """
def grow():
    s = 'ab'
    for i in range(64):
        s += s
    return s
def forever(n):
    return forever(n + 1)
def spin():
    while True:
        pass
"""
    for call in ("grow()", "forever(0)", "spin()"):
        with pytest.raises(NotStatic):
            value_of(call, source)
    with pytest.raises(NotStatic):  # more values than the budget, each of them small
        value_of("[(a, b) for a in range(100000) for b in range(100000)]")


def test_a_statement_that_cannot_be_read_unbinds_what_it_touches():
    """A value is right or refused, never stale: a loop that fails half-way, a call of anything
    else with a list, an `if` on something unknown, leave their names unbound."""
    env = env_of("""
A = [1]
B = [1]
C = [1]
D = 4
for x in range(3):
    A.append(x if x < 2 else unknown)
some_helper(B)
if torch.cuda.is_available():
    C.append(2)
D += 1
try:
    E = 1
except Exception:
    E = 2
import numpy as np
""")
    assert "A" not in env and "B" not in env and "C" not in env and "E" not in env and "np" not in env
    assert env["D"] == 5


def test_functions_are_evaluated_only_when_called_and_only_if_plain():
    env = env_of("""
@pytest.fixture
def decorated():
    return 1
def takes_varargs(*a):
    return a
def plain(a, b=2):
    return a + b
""")
    values = StaticValues(env)
    assert values.value(ast.parse("plain(1)", mode="eval").body) == 3
    for call in ("decorated()", "takes_varargs(1)", "plain()", "plain(1, 2, 3)"):
        with pytest.raises(NotStatic):
            values.value(ast.parse(call, mode="eval").body)


def test_the_rocm_extra_installs_what_rocm_tasks_are_told_to_install():
    """`pip install -e ".[rocm]"`, which an unsupported ROCm task names, declares each module the
    adapter knows the ROCm files need beyond kernelwright's own dependencies."""
    import re
    import sys
    from pathlib import Path

    from kernelwright.suites.geak_rocm import EXTRA_MODULES, needs_reason

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["rocm"]
    assert {re.match(r"[\w-]+", dep).group(0) for dep in extra} == set(EXTRA_MODULES) == {"scipy"}
    assert needs_reason(["scipy"]) == ("needs the Python module(s) scipy, not installed: "
                                       "pip install -e '.[rocm]' (or pip install scipy)")
