"""The inputs of a GEAK-eval perf script (`performance_metrics.get_input_tensors`), made cheaply.

A perf script builds every input of every shape at once, on the CPU (`torch.rand(...)`), and its
`to_cuda` copies one shape to the GPU per call. Across TritonBench-revised that is 465 GiB of CPU
random numbers (0.2-0.5 GiB/s per core) held in host memory per process, plus a pageable
host-to-device copy of each shape on every call: most of a suite's wall time, for tensors whose
values are arbitrary by design. Here the script runs under a torch function mode that

- counts the inputs without building them (`count_inputs`: every tensor on the "meta" device), and
- builds only the inputs of one case (`one_case`): tensors made before that case's window (the
  script appends one entry to `self.input_tensors` per case) are created on "meta", large tensors
  of the case itself directly on the GPU, small ones where the script asked (a CPU tensor of
  lengths stays a CPU tensor), memory the script leaves uninitialised (`torch.empty`) is zeroed as
  the CPU build's fresh pages were, and the script is stopped as soon as the next case begins.

Values differ from the script's own CPU draws but are the same in every process (the generators
are seeded at the start of the case's window), so the reference and the candidate always see the
same inputs. A script this cannot follow (data-dependent work on a meta tensor, inputs built all
at once and assigned in one go, an input tied to an earlier case's tensors) raises `Unfollowable`,
and the caller builds everything the script's own way instead; that outcome depends only on the
script and the case, so both sides take the same path.
"""

from __future__ import annotations

from typing import Any

from ..tasks.values import tensors_in

# Building case k replays the script's work for cases 0..k-1 on the meta device: cheap for scripts
# that draw tensors, not for ones that loop in Python over columns (int4 packing: ~10^6 torch calls,
# 25 s). Past this many calls for the whole script, it is built once, its own way. (A count, not a
# time: both sides of a judgement must make the same choice.)
MAX_REPLAY_CALLS = 20_000
LARGE_BYTES = 1 << 20  # smaller tensors are made where the script asks (cheap either way)
CASE_SEED = 0x6B77  # the generators' seed at the start of a case's window


class Unfollowable(RuntimeError):
    """The script's inputs cannot be built one case at a time."""


class _CaseDone(BaseException):
    """Raised inside the script once the wanted case is built (BaseException: a script's own
    `except Exception` must not swallow it)."""


# Constructors whose memory is left uninitialised. A script's `torch.empty` on the CPU got fresh,
# zeroed pages from the OS in practice (context_attn_bloom's index table relies on it), while GPU
# memory holds whatever was there before: inside a case's window their results are zero-filled.
UNINITIALISED = frozenset({"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                           "new_empty_strided"})


def _zeroed_if_empty(name: str, result: Any) -> Any:
    if name in UNINITIALISED and getattr(result, "device", None) is not None and result.device.type != "meta":
        result.zero_()
    return result


def _make_mode(perf: Any, target: int | None, device: str, max_calls: int | None = None):
    """A TorchFunctionMode building only case `target` of `perf` (None: nothing, all on meta)."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors

    constructors = _device_constructors()

    def window() -> int:
        try:
            return len(perf.__dict__.get("input_tensors") or ())
        except TypeError:
            return 0

    def on_meta(args: tuple) -> bool:
        return any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args)

    class CaseMode(TorchFunctionMode):
        seeded = False
        last_window = 0  # the highest window a torch call ran in
        calls = 0  # torch calls the script made

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            current = window()
            self.last_window = max(self.last_window, current)
            self.calls += 1
            if max_calls is not None and self.calls > max_calls:
                raise _CaseDone  # counted enough to know the answer
            if target is not None and current > target:
                raise _CaseDone
            building = target is not None and current == target
            if building and not self.seeded:
                torch.manual_seed(CASE_SEED)  # torch only: Python/numpy draws (sizes) stay the script's
                self.seeded = True
            name = getattr(func, "__name__", "")
            if func in constructors:
                if not building:
                    kwargs["device"] = "meta"
                    return func(*args, **kwargs)
                asked = kwargs.get("device")
                if asked is None or torch.device(asked).type == "cpu":
                    shape = func(*args, **{**kwargs, "device": "meta"})
                    if isinstance(shape, torch.Tensor) and shape.numel() * shape.element_size() >= LARGE_BYTES:
                        kwargs["device"] = device
                return _zeroed_if_empty(name, func(*args, **kwargs))
            if building and name in UNINITIALISED:
                return _zeroed_if_empty(name, func(*args, **kwargs))
            if name in ("cuda", "cpu", "to", "pin_memory") and on_meta(args):
                # moving a meta tensor between devices: it stays a meta tensor (dtype changes apply)
                rest = tuple(a for a in args[1:] if not isinstance(a, (str, torch.device)))
                kwargs.pop("device", None)
                kwargs.pop("non_blocking", None)
                if name != "to" or (not rest and not kwargs):
                    return args[0]
                return func(args[0], *rest, **kwargs)
            return func(*args, **kwargs)

    return CaseMode()


def count_inputs(perf: Any) -> tuple[list, bool]:
    """Run `perf.get_input_tensors()` with every tensor on the meta device (no memory, no GPU).
    Returns `perf.input_tensors` (meta tensors: shapes and dtypes only) and whether `one_case`
    suits the script: it must build them one case at a time (appending as it goes; a script that
    assigns the whole list at the end would be built entirely as its first case), cheaply enough
    to be replayed (MAX_REPLAY_CALLS)."""
    return _count(perf, None)


def suits_one_case(perf: Any) -> bool:
    """`count_inputs(perf)[1]`, but stopping as soon as the script has made more torch calls than
    a replay may cost (counting int4_matmul's inputs alone takes half a minute); keeps nothing."""
    try:
        return _count(perf, MAX_REPLAY_CALLS)[1]
    finally:
        perf.input_tensors = []


def _count(perf: Any, max_calls: int | None) -> tuple[list, bool]:
    import torch

    mode = _make_mode(perf, None, "meta", max_calls=max_calls)
    try:
        with torch.device("meta"), mode:
            perf.get_input_tensors()
    except _CaseDone:  # past max_calls: too costly to replay, whatever else holds
        return list(perf.__dict__.get("input_tensors") or ()), False
    inputs = list(perf.input_tensors)
    appends = len(inputs) <= 1 or mode.last_window >= 1
    return inputs, appends and mode.calls <= MAX_REPLAY_CALLS


def one_case(perf: Any, index: int, device: str) -> Any:
    """The inputs of case `index` of `perf`, built alone (see the module docstring); the caller
    seeds the global generators as for an eager build first, so the script's Python-level draws
    (sizes, say) come out the same. Raises Unfollowable when the script cannot be followed;
    out-of-memory errors propagate as they are (they depend on other processes, so they must not
    change which way the inputs are made)."""
    import torch

    perf.input_tensors = []
    stopped = False
    try:
        with _make_mode(perf, index, device):
            perf.get_input_tensors()
    except _CaseDone:
        stopped = True
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means: build it the script's own way
        raise Unfollowable(f"{type(exc).__name__}: {exc}") from None
    finally:
        built, perf.input_tensors = perf.__dict__.get("input_tensors"), []
    try:
        entry = built[index]
    except (TypeError, IndexError, KeyError):
        raise Unfollowable(f"the script built fewer than {index + 1} inputs this way") from None
    if not stopped and len(built) != index + 1:
        raise Unfollowable("the script did not build its inputs one case at a time")
    if any(t.device.type == "meta" for t in tensors_in(entry, torch)):
        raise Unfollowable("an input of this case is derived from tensors made before its window")
    return entry
