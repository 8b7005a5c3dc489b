"""Wrapping a method of Triton's once per process, for one purpose.

Several hooks of a judge child wrap the same few Triton methods (`JITFunction.run`,
`Autotuner.prune_configs`, `triton.compiler.compile`, ...), and a method can carry several
wrappers, one per purpose, stacked in the order they were installed. Each purpose marks its own
wrapper, so installing it again leaves the method as it is, while other purposes still stack.
"""

from __future__ import annotations

from typing import Any, Callable


def wrap_once(owner: Any, name: str, marker: str, make_wrapper: Callable[[Callable], Callable]) -> bool:
    """Replace `owner.name` with `make_wrapper(original)`, tagged with `marker`, unless the method
    there already carries that tag. False when `owner` has no such attribute."""
    original = getattr(owner, name, None)
    if original is None:
        return False
    if not getattr(original, marker, False):
        wrapper = make_wrapper(original)
        setattr(wrapper, marker, True)
        setattr(owner, name, wrapper)
    return True
