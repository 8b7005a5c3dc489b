"""The Python modules some suites' tasks import beyond kernelwright's own dependencies, and what
installs them (pyproject.toml's optional extras). Imports nothing heavy: `kernelwright doctor`
reads it before torch is needed."""

from __future__ import annotations

# module -> how to install it
EXTRA_MODULES = {"scipy": "pip install -e '.[rocm]' (or pip install scipy)"}
# suite -> {module: which of its tasks need it}
SUITE_MODULES = {"rocm": {"scipy": "the ROCm suite's tasks need it (test_randn.py imports scipy.stats)"}}


def suite_extras(suite: str | None = None) -> list[tuple[str, str, str, bool]]:
    """(suite, module, who needs it, installed?) for each module a suite's tasks need beyond
    kernelwright's dependencies (`suite` None: every suite's)."""
    import importlib.util

    suites = SUITE_MODULES if suite is None else {suite: SUITE_MODULES.get(suite, {})}
    return [(name, module, why, importlib.util.find_spec(module) is not None)
            for name, modules in suites.items() for module, why in modules.items()]
