"""Which memory the candidate's own Triton kernels were given during one call: a candidate passes
only if every tensor it returns lies in such memory (issue 20, item 3).

The launch counter (`launches.LaunchCounter`) hands every launch of a kernel defined in the
candidate's file to `KernelMemory.note_launch` while a check runs: each tensor argument's storage
(and a TMA descriptor's base tensor) is recorded, by weak reference, so a scratch buffer that is
freed and whose addresses torch reuses for a result computed otherwise does not count. After the
call, an output counts as the kernel's if its storage is one of those, or overlaps one of them on
the same device (views, reshapes, slices of a buffer the kernel was given share its storage).
Copies of such memory count too (`.cpu()`, `.to(dtype)`, `.clone()`, `.contiguous()`, `copy_`: a
benchmark's test moves a result to the host), traced by a torch function mode during the call;
nothing computed from it does (`torch.relu(x)` of an input x the kernel was given is not the
kernel's). Tensors made from Python numbers (`torch.tensor(0.5)`: a test that returns `.item()`
or a bool) are not checked: a number carries no memory to trace.

The record is kept only during checks; timed calls carry none of it.
"""

from __future__ import annotations

import weakref
from typing import Any

# Torch functions whose result copies their (first) argument's values: a copy of kernel memory
# is the kernel's work moved, not recomputed. (`copy_` copies its second argument into its first.)
COPIES = frozenset({"cpu", "cuda", "to", "clone", "contiguous", "float", "double", "half", "bfloat16",
                    "type", "type_as", "reshape", "flatten", "detach", "view", "view_as", "expand_as",
                    "squeeze", "unsqueeze", "permute", "transpose", "t"})


class KernelMemory:
    def __init__(self, torch) -> None:
        self.torch = torch
        self._storages: dict[int, tuple[Any, int, int, Any]] = {}  # id -> (weakref, start, end, device)
        self._numbers: dict[int, Any] = {}  # storages of tensors made from a Python number

    def _storage(self, t: Any):
        try:
            return t.untyped_storage()
        except Exception:  # noqa: BLE001 - a tensor without ordinary storage (meta, sparse, nested)
            return None

    def add(self, t: Any) -> None:
        storage = self._storage(t)
        if storage is None:
            return
        known = self._storages.get(id(storage))
        if known is not None and known[0]() is storage:
            return
        start = storage.data_ptr()
        self._storages[id(storage)] = (weakref.ref(storage), start, start + storage.nbytes(), t.device)

    def note_launch(self, args: tuple, kwargs: dict) -> None:
        """The tensors one launch of an own kernel was given (positional and keyword)."""
        torch = self.torch
        for value in (*args, *kwargs.values()):
            if isinstance(value, torch.Tensor):
                self.add(value)
            else:  # a TMA descriptor (triton.tools.tensor_descriptor.TensorDescriptor) holds its tensor
                base = getattr(value, "base", None)
                if isinstance(base, torch.Tensor):
                    self.add(base)

    def note_number(self, t: Any) -> None:
        storage = self._storage(t)
        if storage is not None:
            self._numbers[id(storage)] = weakref.ref(storage)

    def holds(self, t: Any) -> bool:
        """Whether tensor `t` lies in memory an own launch was given (or a copy of it), or was made
        from a Python number, or is empty (nothing to write)."""
        if t.numel() == 0:
            return True
        storage = self._storage(t)
        if storage is None:
            return False
        number = self._numbers.get(id(storage))
        if number is not None and number() is storage:
            return True
        start = storage.data_ptr()
        end = start + storage.nbytes()
        for ref, a, b, device in self._storages.values():
            live = ref()
            if live is None:
                continue  # freed since the launch: its addresses may hold something else now
            if live is storage or (device == t.device and a < end and start < b):
                return True
        return False

    def foreign(self, value: Any, prefix: str = "") -> list[str]:
        """Where in `value` (a tensor, or tuples/lists/dicts of them) a tensor lies outside this
        memory: '' for `value` itself, '[1]' for the second item, ..."""
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return [] if self.holds(value) else [prefix]
        if isinstance(value, dict):
            return [p for k, v in value.items() for p in self.foreign(v, f"{prefix}[{k!r}]")]
        if isinstance(value, (list, tuple)):
            return [p for i, v in enumerate(value) for p in self.foreign(v, f"{prefix}[{i}]")]
        return []


def tracking_copies(torch, memory: KernelMemory):
    """A torch function mode that adds to `memory` what is copied out of it during the call, and
    marks tensors made from Python numbers."""
    from torch.overrides import TorchFunctionMode

    class TrackCopies(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", "")
            if name == "copy_":
                if len(args) >= 2 and isinstance(args[1], torch.Tensor) and memory.holds(args[1]):
                    memory.add(args[0])
            elif name in COPIES:
                source = args[0] if args else None
                if isinstance(result, torch.Tensor) and isinstance(source, torch.Tensor) and memory.holds(source):
                    memory.add(result)
            elif name in ("tensor", "as_tensor", "scalar_tensor") and args \
                    and isinstance(args[0], (bool, int, float)) and isinstance(result, torch.Tensor):
                memory.note_number(result)
            return result

    return TrackCopies()


class EntryCalls:
    """During a check of a benchmark's test function (TritonBench-T: the test calls the
    candidate's operators several times and returns a dict of results), each call the test makes
    to one of the task's entry points, wrapped in the implementation's module: what each call
    returns must lie in own-kernel memory, whatever the test does with it afterwards (moves it to
    the host, takes `.item()`, compares it)."""

    def __init__(self, impl: Any, memory: KernelMemory) -> None:
        self.namespace = getattr(getattr(impl, "module", None), "__dict__", None)
        self.names = [n for n in getattr(impl, "entry_names", ()) or ()
                      if self.namespace is not None and callable(self.namespace.get(n))]
        self.memory = memory
        self.calls = 0
        self.foreign: list[str] = []
        self._originals: dict[str, Any] = {}

    def __enter__(self) -> "EntryCalls":
        for name in self.names:
            original = self.namespace[name]
            self._originals[name] = original
            self.namespace[name] = self._wrap(name, original)
        return self

    def __exit__(self, *exc) -> None:
        for name, original in self._originals.items():
            self.namespace[name] = original
        self._originals.clear()

    def _wrap(self, name: str, fn: Any) -> Any:
        def call(*args, **kwargs):
            self.calls += 1
            number = self.calls
            result = fn(*args, **kwargs)
            for where in self.memory.foreign(result):
                self.foreign.append(f"call {number} of {name}" + (f" (its result {where})" if where else ""))
            return result
        return call
