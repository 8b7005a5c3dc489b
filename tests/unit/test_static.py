"""The static stage: what `check_source` accepts and rejects, without running the candidate."""

import os
import textwrap

import pytest

from kernelwright.judge.coordinator import static
from kernelwright.judge.coordinator.static import MAX_SOURCE_BYTES, check_source

KERNEL = """
@triton.jit
def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass
"""


def write(tmp_path, source: str, name: str = "cand.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.mark.parametrize("decorators,kernel_name", [
    ("@triton.jit", "k"),
    ("@jit", "k"),
    ("@triton.jit(debug=False)", "k"),
    ("@jit()", "k"),
    ("@triton.autotune(configs=[triton.Config({'BLOCK': 128})], key=['n'])\n@triton.jit", "k"),
    ("@triton.heuristics({'EVEN': lambda a: a['n'] % 2 == 0})\n@triton.jit", "k"),
    ("@some.module.path.jit", "k"),
])
def test_accepts_jit_decorator_forms(tmp_path, decorators, kernel_name):
    path = write(tmp_path, f"import triton\nfrom triton import jit\n{decorators}\ndef {kernel_name}(x):\n    pass\n\n"
                           "def entry(x):\n    return x\n")
    result = check_source(path, "entry")
    assert result.ok, result.reason
    assert result.reason == "ok"
    assert result.kernels == [kernel_name]


def test_lists_every_kernel_including_nested_ones(tmp_path):
    path = write(tmp_path, KERNEL + """
def entry(x):
    @triton.jit
    def inner(y):
        pass
    return x

@triton.jit
def second(z):
    pass
""")
    result = check_source(path, "entry")
    assert result.ok
    assert sorted(result.kernels) == ["add_kernel", "inner", "second"]


@pytest.mark.parametrize("entry_source", [
    "def entry(x):\n    return x\n",
    "entry = lambda x: x\n",
    "def _impl(x):\n    return x\nentry = _impl\n",
    "a = entry = None\n",
    "from somewhere import impl as entry\n",
    "from somewhere import entry\n",
    "import entry\n",
    "class entry:\n    pass\n",
])
def test_entry_point_defined_in_any_module_level_form(tmp_path, entry_source):
    path = write(tmp_path, KERNEL + "\n" + entry_source)
    result = check_source(path, "entry")
    assert result.ok, result.reason


def test_syntax_error_reason_names_the_line(tmp_path):
    path = write(tmp_path, KERNEL + "\ndef entry(x)\n    return x\n")
    result = check_source(path, "entry")
    assert not result.ok
    assert "does not parse" in result.reason
    line = KERNEL.count("\n") + 2
    assert f"line {line}" in result.reason
    assert "def entry(x)" in result.reason
    assert result.kernels == []


def test_missing_entry_is_rejected_but_kernels_are_reported(tmp_path):
    path = write(tmp_path, KERNEL + "\ndef other(x):\n    return x\n")
    result = check_source(path, "entry")
    assert not result.ok
    assert result.reason == "does not define the entry point `entry` at module level"
    assert result.kernels == ["add_kernel"]


@pytest.mark.parametrize("nested", [
    "def outer():\n    def entry(x):\n        return x\n",
    "class Holder:\n    def entry(self, x):\n        return x\n",
    "def outer():\n    entry = 1\n",
    "entry_point = 1\nmy_entry = 2\n",
])
def test_entry_only_defined_in_a_nested_scope_is_rejected(tmp_path, nested):
    path = write(tmp_path, KERNEL + "\n" + nested)
    result = check_source(path, "entry")
    assert not result.ok
    assert "does not define the entry point `entry`" in result.reason


def test_entry_mentioned_only_in_comment_or_string_is_rejected(tmp_path):
    path = write(tmp_path, KERNEL + "\n# def entry(x): pass\nDOC = 'def entry(x)'\n")
    assert not check_source(path, "entry").ok


@pytest.mark.parametrize("source", [
    "def entry(x):\n    return x\n",
    "@torch.compile\ndef kernel(x):\n    return x\ndef entry(x):\n    return x\n",
    "@triton.autotune(configs=[], key=[])\ndef kernel(x):\n    pass\ndef entry(x):\n    return x\n",
    "@triton.jitted\ndef kernel(x):\n    pass\ndef entry(x):\n    return x\n",
    "import triton\njit = triton.jit\ndef entry(x):\n    return x\n",
])
def test_no_jit_kernel_is_rejected(tmp_path, source):
    result = check_source(write(tmp_path, source), "entry")
    assert not result.ok
    assert result.reason == "defines no @triton.jit kernel"
    assert result.kernels == []


def test_non_utf8_file_is_rejected(tmp_path):
    path = tmp_path / "cand.py"
    path.write_bytes(KERNEL.encode() + b"\ndef entry(x):\n    return '\xff\xfe'\n")
    result = check_source(path, "entry")
    assert not result.ok
    assert result.reason.startswith("candidate file is not UTF-8 text (byte ")


def test_file_over_the_size_limit_is_rejected_before_parsing(tmp_path):
    path = tmp_path / "cand.py"
    body = (KERNEL + "\ndef entry(x):\n    return x\n").encode()
    path.write_bytes(body + b"#" * (MAX_SOURCE_BYTES + 1 - len(body)))
    result = check_source(path, "entry")
    assert not result.ok
    assert f"{MAX_SOURCE_BYTES + 1} bytes" in result.reason and f"limit is {MAX_SOURCE_BYTES}" in result.reason


def test_file_exactly_at_the_size_limit_is_accepted(tmp_path):
    path = tmp_path / "cand.py"
    body = (KERNEL + "\ndef entry(x):\n    return x\n").encode()
    path.write_bytes(body + b"#" * (MAX_SOURCE_BYTES - len(body)))
    assert check_source(path, "entry").ok


def test_size_limit_is_read_from_the_module(tmp_path, monkeypatch):
    monkeypatch.setattr(static, "MAX_SOURCE_BYTES", 10)
    path = write(tmp_path, KERNEL + "\ndef entry(x):\n    return x\n")
    result = static.check_source(path, "entry")
    assert not result.ok and "the limit is 10" in result.reason


def test_missing_path_is_rejected(tmp_path):
    result = check_source(tmp_path / "nope.py", "entry")
    assert not result.ok
    assert result.reason.startswith("cannot read candidate file")
    assert "No such file" in result.reason


def test_directory_is_rejected(tmp_path):
    result = check_source(tmp_path, "entry")
    assert not result.ok
    assert result.reason == "candidate is a directory; expected a .py file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read files without permission")
def test_unreadable_file_is_rejected(tmp_path):
    path = write(tmp_path, KERNEL + "\ndef entry(x):\n    return x\n")
    path.chmod(0)
    try:
        result = check_source(path, "entry")
    finally:
        path.chmod(0o644)
    assert not result.ok
    assert "Permission denied" in result.reason


def test_source_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    path = write(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n" + KERNEL + "\ndef entry(x):\n    return x\n")
    assert check_source(path, "entry").ok
    assert not marker.exists()


def test_annotated_assignment_defines_the_entry(tmp_path):
    path = write(tmp_path, KERNEL + "\ndef _impl(x):\n    return x\nentry: object = _impl\n")
    assert check_source(path, "entry").ok


@pytest.mark.parametrize("source,expected", [
    ("configs = [triton.Config({'B': 64}), triton.Config({'B': 128})]", 2),
    # a comprehension multiplies by each literal loop; a loop over anything else counts once
    ("c = [triton.Config({'B': b}, num_warps=w) for b in [32, 64, 128] for w in (4, 8)]", 6),
    ("c = [Config({'B': b}) for b in sizes() for s in range(2, 6)]", 4),
    # GEAK's io-bound generator: nested literal loops, an inner split-k loop, a commented-out one
    ("""
     def configs():
         out = []
         for s in [2, 3, 4, 5, 6]:
             for m in [16, 32]:
                 out.append(triton.Config({'M': m}, num_stages=s))
                 for k in [2, 4, 8, 16]:
                     out.append(triton.Config({'M': m, 'K': k}, num_stages=s))
                 # for k in [32, 64]:
                 #     out.append(triton.Config({'M': m}))
         return out
     """, 5 * 2 * (1 + 4)),
    ("@triton.jit\ndef k(x):\n    pass\n", 0),
    ("def broken(:\n", 0),
])
def test_autotune_configs_counts_what_will_be_compiled(source, expected):
    assert static.autotune_configs(textwrap.dedent(source)) == expected
