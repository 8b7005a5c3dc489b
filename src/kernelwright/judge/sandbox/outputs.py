"""A call's outputs as the harness ships them: a list of tensors with the task's names for them."""

from __future__ import annotations

from typing import Any

from ..common import wire


class Outputs(list):
    """A call's outputs as a list of tensors, plus `names` (what the task's own test calls each
    one: a suite adapter's flattened results carry them, `test_case_1`; else None) and `numbers`
    (positions of outputs that were Python numbers, made tensors here)."""

    names: list[str] | None = None
    numbers: frozenset = frozenset()


def flatten_outputs(value: Any, torch) -> Outputs:
    """The entry point may return a tensor, a tuple/list of tensors, or Python numbers."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    given = getattr(value, "names", None)
    given = given if isinstance(given, list) and len(given) == len(items) else None
    out, names, numbers = Outputs(), [], set()
    for i, item in enumerate(items):
        if item is None:  # in-place operations return nothing
            continue
        if isinstance(item, torch.Tensor):
            out.append(item)
        elif isinstance(item, (bool, int, float)):
            numbers.add(len(out))
            out.append(torch.tensor(item, dtype=torch.float64))
        else:
            raise TypeError(f"output {i} is a {type(item).__name__}; expected a torch.Tensor")
        names.append(str(given[i]) if given is not None else "")
    if given is not None:
        out.names = names
    out.numbers = frozenset(numbers)
    return out



def tensor_meta(t: Any) -> dict:
    """What the worker needs to know of an output without its values: dtype, shape, bytes."""
    return {"dtype": wire.dtype_name(t.dtype), "shape": list(t.shape), "nbytes": t.numel() * t.element_size()}
