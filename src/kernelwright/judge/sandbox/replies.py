"""What a child's replies carry besides numbers: a call's outputs as a list of tensors with the
task's names for them, and a failure described for the worker: the exception's class names (the
worker classifies from those, never from the message), its device error code, and whether the
GPU context is broken."""

from __future__ import annotations

import traceback
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


def is_skip(exc: BaseException) -> bool:
    """pytest.skip() raised by a benchmark's own test (GEAK's ROCm files skip some inputs)."""
    return type(exc).__name__ == "Skipped" and any(
        c.__module__.startswith("_pytest") for c in type(exc).__mro__)  # (Skipped says it is from builtins)


def exception_types(exc: BaseException, depth: int = 4) -> list[str]:
    """The qualified class names of `exc` and its bases, then of its causes (`raise ... from`,
    an exception raised while handling another), at most `depth` exceptions deep: the worker
    classifies a failure from these (a Triton CompilationError, torch.OutOfMemoryError), in a
    field of their own, never from the message."""
    names: list[str] = []
    seen: set[int] = set()
    while exc is not None and depth > 0 and id(exc) not in seen:
        seen.add(id(exc))
        names += [f"{getattr(c, '__module__', '?')}.{getattr(c, '__qualname__', '?')}"
                  for c in type(exc).__mro__ if c not in (BaseException, Exception, object)]
        exc = exc.__cause__ or exc.__context__
        depth -= 1
    return names[:64]


def error_code(exc: BaseException) -> int | None:
    """torch.AcceleratorError's CUDA/HIP error code (torch 2.8+): 2 is out of memory on both."""
    code = getattr(exc, "error_code", None)
    return code if type(code) is int else None


def error_reply(op: str, exc: BaseException, device_fault: bool, **extra) -> dict:
    """The failed reply to request `op`: message, class names, device error code, traceback tail."""
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    if isinstance(exc, SystemExit):
        message = f"the candidate called sys.exit({exc.code!r})"
    else:
        message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return {"op": op, "ok": False, "error": message, "error_type": type(exc).__name__,
            "error_types": exception_types(exc), "error_code": error_code(exc),
            "device_fault": device_fault, "traceback": "".join(tb)[-8000:], **extra}
