"""The judge's folders are its trust boundary (docs/architecture.md, "The judge, process by
process"): what each part may import is checked here, from the source, so a shortcut across the
boundary fails CI instead of waiting for a review.

- `judge/sandbox/` runs in forked children beside candidate code: it imports only `judge.common`
  (and the task model, which the reference child loads), never the worker's or coordinator's
  code, and imports every module at the top, so nothing of the judge is loaded after a candidate ran.
- `judge/common/` imports nothing else of the judge.
- `judge/worker/` never imports the coordinator; `judge/coordinator/` never imports the worker's or
  the sandbox's code (it starts workers as processes).
- No import circle anywhere in kernelwright, counting imports inside functions too.
- `llm/` (its test models included) never imports the agent; `launchknobs.py`, which both use,
  imports nothing of kernelwright.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "kernelwright"
THIRD_PARTY_ALLOWED = {"torch", "triton", "numpy"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, bool, int]]:
    """(imported module, at the top level?, line) for every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(), str(path))
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    top = set(id(n) for n in tree.body)
    for node in tree.body:  # `if TYPE_CHECKING:` blocks and try/except at module level count as top
        if isinstance(node, (ast.If, ast.Try)):
            top |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if node.module is None or node.level == 0 and module.startswith("kernelwright"):
                # `from . import x` / `from kernelwright.judge import x`: x may be a module
                for a in node.names:
                    candidate = f"{module}.{a.name}"
                    as_path = SRC / Path(*candidate.split("."))
                    found.append((candidate if as_path.with_suffix(".py").exists() or as_path.is_dir() else module,
                                  id(node) in top, node.lineno))
            else:
                found.append((module, id(node) in top, node.lineno))
    return found


def _files(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _violations(folder: str, allowed_inside: tuple[str, ...], forbid_lazy: bool = False,
                third_party: bool = False) -> list[str]:
    bad = []
    for path in _files(folder):
        for module, at_top, line in _imports(path):
            where = f"{path.relative_to(SRC)}:{line} imports {module}"
            if module.startswith("kernelwright"):
                if not any(module == a or module.startswith(a + ".") for a in allowed_inside):
                    bad.append(where)
                elif forbid_lazy and not at_top:
                    bad.append(where + " inside a function (import it at the top)")
            elif third_party:
                root = module.split(".")[0]
                if root not in sys.stdlib_module_names and root not in THIRD_PARTY_ALLOWED and root != "__future__":
                    bad.append(where + " (not the standard library, torch, triton or numpy)")
    return bad


def test_sandbox_imports_only_common():
    assert _violations("judge/sandbox", ("kernelwright.judge.sandbox", "kernelwright.judge.common", "kernelwright.tasks"),
                       forbid_lazy=True, third_party=True) == []


def test_common_imports_nothing_else_of_the_judge():
    assert _violations("judge/common", ("kernelwright.judge.common",), forbid_lazy=True, third_party=True) == []


def test_worker_never_imports_the_coordinator():
    assert _violations("judge/worker", ("kernelwright.judge.worker", "kernelwright.judge.common",
                                        "kernelwright.judge.sandbox", "kernelwright.tasks"),
                       forbid_lazy=True, third_party=True) == []


def test_coordinator_never_imports_worker_or_sandbox_code():
    assert _violations("judge/coordinator", ("kernelwright.judge.coordinator", "kernelwright.judge.common",
                                             "kernelwright.tasks"), third_party=True) == []


def test_judge_files_live_in_their_folders():
    loose = [p.name for p in (PACKAGE / "judge").glob("*.py") if p.name != "__init__.py"]
    assert loose == [], "a judge module belongs in common/, coordinator/, worker/ or sandbox/"


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "testing" in path.parts or "builtin" in path.parts:
            continue
        name = _module_name(path)
        graph[name] = {m for m, _, _ in _imports(path) if m.startswith("kernelwright") and m != name}
    # a package's __init__ is imported on the way to any of its modules; that edge is not a circle
    return {n: {m for m in deps if m in graph and not n.startswith(m + ".")} for n, deps in graph.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _circles(_graph()) == []


def test_the_llm_layer_never_imports_the_agent():
    """Its test models included (the editing model's rewrites come from launchknobs.py)."""
    bad = [f"{path.relative_to(SRC)}:{line} imports {module}" for path in _files("llm")
           for module, _, line in _imports(path)
           if module == "kernelwright.agent" or module.startswith("kernelwright.agent.")]
    assert bad == []


def test_launchknobs_imports_nothing_of_kernelwright():
    path = PACKAGE / "launchknobs.py"
    assert [m for m, _, _ in _imports(path) if m.startswith("kernelwright")] == []


@pytest.mark.parametrize("folder", ["judge/sandbox", "judge/common"])
def test_the_checker_sees_imports(folder):
    """The checks above are not vacuous: every file's imports are found."""
    assert sum(len(_imports(p)) for p in _files(folder)) > 20
