"""A case's values: its inputs and outputs, tensors nested in tuples, lists and dicts."""

from __future__ import annotations

from typing import Any


def tensors_in(value: Any, torch) -> list:
    """The tensors in `value` (nested tuples, lists, dict values), depth first, in order; each as
    often as it stands there. `torch` is passed in: importing this module does not load it."""
    found = []

    def walk(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(value)
    return found
