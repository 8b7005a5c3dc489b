"""Test helpers: a scripted loopback server speaking the OpenAI and Anthropic protocols, and a
local editing model served the same way (editing_model.py).

The names are loaded on first use, so that `python -m kernelwright.llm.testing.scripted_server`
does not import the module twice (runpy warns when a package already imported it)."""

from __future__ import annotations

from typing import Any

__all__ = ["Answer", "Script", "ScriptedServer", "EditingModel", "EditingServer"]


def __getattr__(name: str) -> Any:
    if name in ("EditingModel", "EditingServer"):
        from . import editing_model

        return getattr(editing_model, name)
    if name in __all__:
        from . import scripted_server

        return getattr(scripted_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
