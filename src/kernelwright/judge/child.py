"""The untrusted side: the harness that runs in a freshly forked child of a judge worker.

A child plays one of two roles:
- "candidate": imports one candidate file and runs its entry point. Everything in this process
  is considered readable and writable by the candidate, so the harness takes what it needs
  (timers, events, allocator functions) *before* the candidate is imported, counts Triton
  launches, poisons memory the candidate may leave unwritten, and sends raw outputs back to the
  worker, which does every comparison itself.
- "reference": runs the task's trusted reference (PyTorch, and optionally a Triton reference
  file for timing). It never sees candidate code, so a candidate cannot slow it down or patch it.

Both generate inputs from the same seeds on the same device, so no input data needs to travel.
The child talks to its worker only through its private pipe (JSON + raw bytes, see `wire`); its
stdout and stderr go to a log file that the worker reads as text, never as results.
"""

from __future__ import annotations

import faulthandler
import os
import random
import signal
import sys
import time
import traceback
import weakref
from multiprocessing.connection import Connection
from typing import Any, Callable, NoReturn

from . import procs, wire
from .footprint import (ProblemTooLarge, gib, host_memory_available, max_reply_bytes, memory_need,
                        proc_status_bytes)
from .envknobs import env_numbers
from .provenance import EntryCalls, KernelMemory, tracking_copies
from .compilewatch import CompileWatch, both
from .gpulock import SharedHold, release_during_compile, yield_at_launches
from .patching import wrap_once
from .precompile import compile_configs_in_parallel, compile_threads_from_env

# On this signal faulthandler writes every thread's stack to the log (the worker sends it before
# killing a child that ran out of time). Not SIGUSR1: a reference stuck in Triton's LLVM stage on
# the H200 left an empty log after SIGUSR1, which LLVM's signal support uses as its "info" signal
# (the likely cause; not yet confirmed on the device).
STACK_DUMP_SIGNAL = signal.SIGUSR2
POISON_BYTE = 0xFF  # NaN in every float format, -1 in signed ints: an unwritten output never passes
FREE_MEMORY_POISON_BYTES = 64 << 20
# Poisoned guard zones around each input during a probe: reads past either end of an input (a
# 0-dim scale tensor indexed per block, say) land on poison instead of a neighbouring live tensor.
GUARD_BYTES = 1 << 20
# Rotating perf input sets only while they fit in this much memory per side: beyond a few MiB they
# gain nothing from rotation (the L2 is flushed before every call anyway), and three sets of a
# 16 GiB shape, cloned once per block, ran out of memory. One set still serves every timed call
# twice per block, so a result cached by address is caught by the launch count.
PERF_SET_BUDGET_BYTES = 2 << 30
# A call that takes this long (synchronised) is timed with fewer calls: its own length dwarfs the
# noise, and a 250 ms shape otherwise held the GPU exclusively for 15 s.
SLOW_CALL_MS = 5.0
HOST_SYNC_SPIN_MS = 2.0  # GPU work queued ahead of a call to see whether the call waits for it


# Inputs from this size on are collected (gc) before the next item makes its own: see
# Harness._collect_large_garbage.
LARGE_INPUT_BYTES = 64 << 20

# Elements per slice when a probe's runs disagree somewhere and the positions must be found.
MASK_CHUNK_GPU = 1 << 24
MASK_CHUNK_CPU = 1 << 18

# Tensors a probed call creates itself (a GEAK test function builds its inputs inside the call)
# get smaller zones than its arguments: there can be many of them.
ALLOC_GUARD_BYTES = 256 << 10


def in_guard_zone(torch, t: Any, byte: int, zone_bytes: int) -> Any:
    """A copy of `t` (same shape, strides, values) placed between two `zone_bytes` zones filled
    with `byte`; `t` itself when it cannot be copied this way (not strided, empty, overlapping
    strides, no memory left)."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.numel() == 0:
        return t
    try:
        span = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
        nbytes = span * t.element_size()
        zone = torch.full((2 * zone_bytes + nbytes,), byte, dtype=torch.uint8, device=t.device)
        copy = zone[zone_bytes:zone_bytes + nbytes].view(t.dtype).as_strided(t.shape, t.stride())
        copy.copy_(t.detach())
        return copy.requires_grad_(t.requires_grad)
    except (RuntimeError, MemoryError):  # internal overlap (expanded views) or out of memory
        return t


def guarded_allocations(torch, device_type: str, byte: int, zone_bytes: int = ALLOC_GUARD_BYTES):
    """A torch function mode under which every tensor created on `device_type` by a factory
    (torch.randn, torch.empty, ..._like, new_...) or moved there (`.to`, `.cuda`) lies between
    zones filled with `byte`. Probes run a foreign reference under it, so a read past the end
    of a tensor the call made itself depends on the poison and shows up as undefined."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors

    constructors = _device_constructors()
    made_like = {"empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
                 "randint_like", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor",
                 "new_empty_strided"}
    moved = {"to", "cuda"}

    class GuardedAllocations(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = getattr(func, "__name__", "")
            if not isinstance(result, torch.Tensor) or result.device.type != device_type:
                return result
            if name in moved:
                source = args[0] if args else None
                if not isinstance(source, torch.Tensor) or source.device.type == device_type:
                    return result  # already there: no new memory
            elif func not in constructors and name not in made_like:
                return result
            return in_guard_zone(torch, result, byte, zone_bytes)

    return GuardedAllocations()


# Inputs are checked for mutation by digest, not by shipping copies of them to the worker (an
# 8 GiB KernelBench input made a reply over the 4 GiB frame limit). Words per slice of the digest:
# its temporaries are a few slices, whatever the input's size.
DIGEST_CHUNK_WORDS = 1 << 22
_DIGEST_MUL = 0x9E3779B97F4A7C15 - (1 << 64)  # as a signed int64
_digest_weights: dict[str, Any] = {}


def _weights(torch, device: Any) -> Any:
    """Odd pseudo-random int64 weights, one per word of a slice (made once per device: 32 MiB)."""
    key = str(device)
    if key not in _digest_weights:
        w = torch.arange(DIGEST_CHUNK_WORDS, dtype=torch.int64, device=device)
        w.mul_(_DIGEST_MUL).bitwise_xor_(w >> 29).mul_(_DIGEST_MUL).bitwise_or_(1)
        _digest_weights[key] = w
    return _digest_weights[key]


def tensor_digest(torch, t: Any) -> str:
    """A digest of a tensor's dtype, shape and value bytes (in logical order), computed where the
    tensor lives: per slice of its 64-bit words, the sum of word * weight mod 2**64 (odd weights:
    a bijection, so any single changed word changes the sum; changes that cancel are a 2**-64
    accident), the slices' sums chained. Integer sums wrap and are exact, so the same bytes give
    the same digest whatever the reduction order. Two passes over the data, and temporaries of one
    slice whatever the tensor's size. Not a defence against a forger: the candidate shares its
    process with the harness and could forge copies of its inputs as easily."""
    t = t.detach()
    head = f"{wire.dtype_name(t.dtype)}{list(t.shape)}"
    if t.numel() == 0:
        return head + ":empty"
    flat = t.reshape(-1)  # a view when contiguous; a copy of this one tensor otherwise
    data = flat if flat.dtype == torch.uint8 else flat.view(torch.uint8)
    n = data.numel()
    words = n // 8
    total = 0
    if words:
        try:
            w64 = data[:words * 8].view(torch.int64)
        except RuntimeError:  # an odd storage offset: an aligned copy
            w64 = data[:words * 8].clone().view(torch.int64)
        weights = _weights(torch, w64.device)
        for start in range(0, words, DIGEST_CHUNK_WORDS):
            part = w64[start:start + DIGEST_CHUNK_WORDS]
            total = (total * 1000003 + int((part * weights[:part.numel()]).sum())) % (1 << 64)
    tail = data[words * 8:]
    if tail.numel():
        total = (total * 1000003 + int.from_bytes(bytes(tail.cpu().tolist()), "little") + 1) % (1 << 64)
    return f"{head}:{n}:{total:016x}"


def tensor_digests(torch, tensors: list) -> list[str]:
    return [tensor_digest(torch, t) for t in tensors]


def _is_skip(exc: BaseException) -> bool:
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


def _error_code(exc: BaseException) -> int | None:
    """torch.AcceleratorError's CUDA/HIP error code (torch 2.8+): 2 is out of memory on both."""
    code = getattr(exc, "error_code", None)
    return code if type(code) is int else None


def child_main(conn_fd: int, role: str, task, device: str, log_path: str, options: dict) -> NoReturn:
    """Entry point right after fork(). Never returns into the worker's code."""
    code = 0
    try:
        os.setsid()  # own process group: the worker kills the whole group at the end
        procs.die_with_parent()
        if role == "candidate":
            procs.limit_file_size(int(options.get("max_file_bytes") or 256 << 20))
        else:
            procs.make_undumpable()
        _close_fds_except(conn_fd)
        _use_triton_cache(options.get("triton_cache"))
        _redirect_stdio(log_path)
        # On a timeout the worker asks for every thread's stack (written from C, so it works
        # while Python is stuck in a kernel launch, a lock or a compile) before killing us.
        faulthandler.register(STACK_DUMP_SIGNAL, file=sys.stderr, all_threads=True)
        conn = Connection(conn_fd)
        Harness(conn, role, task, device, options).serve()
    except BaseException:  # noqa: BLE001 - the child must never unwind into the worker's code
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        code = 70
    os._exit(code)


def _use_triton_cache(path: str | None) -> None:
    """Compile into (and load from) this side's own Triton cache (and torch.compile's): set
    before anything here compiles. Triton 3.4+ reads TRITON_CACHE_DIR through `triton.knobs` at each use unless a value
    was set on the knob, so the knob is set too; older versions read the variable at each use."""
    if not path:
        return
    os.environ["TRITON_CACHE_DIR"] = path
    # torch.compile's cache too (by default one per user in /tmp, shared by both sides)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(path, "inductor")
    try:
        from triton import knobs

        knobs.cache.dir = path
    except Exception:  # noqa: BLE001 - no knobs (Triton < 3.4): the variable is what it reads
        pass


def _close_fds_except(keep: int) -> None:
    """Drop every inherited descriptor (the worker's channel to the coordinator, the other child's
    pipe): a candidate must not be able to talk to anything but its own worker pipe."""
    try:
        max_fd = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        max_fd = 4096
    os.closerange(3, keep)
    os.closerange(keep + 1, max_fd)


def _redirect_stdio(log_path: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


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


def _tuning_ms_from_env() -> tuple[float, float]:
    """KERNELWRIGHT_TUNING_MS="WARMUP,REP" (milliseconds per config at timing turns; default 3,12):
    for measuring what another budget costs in agreement between two runs of the same code."""
    warmup, rep = env_numbers("KERNELWRIGHT_TUNING_MS", (3.0, 12.0), 0.0, 1000.0, low_open=True,
                              meaning=" (WARMUP,REP in milliseconds)")
    return warmup, rep


# Autotuners that use Triton's default benchmarker (25 ms warm-up + 100 ms per config) get 3 + 12
# ms instead, on both sides alike: configs are tuned again inside every timing turn, where that
# budget, times configs, times perf shapes, was most of the GPU's exclusive time on the H200
# (at 5 + 25 ms, 99 s of TritonBench's 274 s of timing turns went to first calls that tuned).
# 12 ms is still a hundred runs or more of any kernel under 0.1 ms, the median of which ranks
# configs that differ by a few percent.
# Autotuners declared with use_cuda_graph=True and no rep of their own (GEAK's ROCm layernorm,
# softmax, rmsnorm) get CUDA-graph tuning at the same rep instead of 100 ms: a 100 ms graph is
# replayed ten times per config at every new shape, and those four were the slowest tasks of the
# suite (18 s in one correctness case of a 359x1 input). A file that states its own warmup/rep
# keeps it.
TUNING_WARMUP_MS, TUNING_REP_MS = _tuning_ms_from_env()
# One tuning (every config, at one new key) gets at most this much benchmarking at a timing turn:
# an autotuner of 48 configs (TritonBench's matrix_vector_multip) spent 1.4 s per shape and side
# at 30 ms each. Past TUNING_TOTAL_MS / TUNING_REP_MS configs, each gets a shorter rep, never
# under TUNING_MIN_REP_MS.
TUNING_TOTAL_MS, TUNING_MIN_REP_MS = 400.0, 4.0
# Checks (requests that share the GPU with other workers) tune on 1 + 3 ms: what they pick only
# runs once, next to other work, and is dropped at the timing turn, where both sides tune again
# alone on the budget above (a timed config that differs from the checked one is checked again).
# Tuning at every new shape of every check was seconds per task of GPU time held shared.
CHECK_TUNING_WARMUP_MS, CHECK_TUNING_REP_MS = 1, 3
_checking = [False]  # set by the harness for each request: does it share the GPU?


def _tuning_budget(n_configs: int = 1) -> tuple[float, float]:
    """(warm-up, rep) in milliseconds for each config of an autotuner of `n_configs` configs."""
    if _checking[0]:
        return CHECK_TUNING_WARMUP_MS, CHECK_TUNING_REP_MS
    rep = min(TUNING_REP_MS, max(TUNING_TOTAL_MS / max(n_configs, 1), TUNING_MIN_REP_MS))
    return TUNING_WARMUP_MS * rep / TUNING_REP_MS, rep


class TuningBench:
    """The benchmarker installed into an autotuner that did not state its own: Triton's
    `do_bench` (or `do_bench_cudagraph`), on the budget above for its number of configs."""

    def __init__(self, n_configs: int, cuda_graph: bool = False) -> None:
        self.n_configs, self.cuda_graph = n_configs, cuda_graph

    def __call__(self, kernel_call, quantiles):
        from triton.testing import do_bench, do_bench_cudagraph

        warmup, rep = _tuning_budget(self.n_configs)
        if self.cuda_graph:
            return do_bench_cudagraph(kernel_call, rep=rep, quantiles=quantiles)
        return do_bench(kernel_call, warmup=warmup, rep=rep, quantiles=quantiles)


# At a timing turn an autotuner tunes again, alone, but only among the configs that came out
# fastest when it tuned during the checks (next to other workers, on the short budget): at a key
# the checks tuned (the perf-size checks tune at every timed shape), the SHORTLIST_CONFIGS fastest
# there; at any other key, those of every key together. Sharing the GPU slows every config alike,
# more or less, so the fastest alone is among them; trying all again cost most of the timing turns'
# first calls (matrix_vector_multip: 48 configs, 1.4 s per shape and side), and an autotuner of 401
# configs (int8_dequant_matmul) would spend seconds per shape inside its turn. Each key's own list
# rather than the union of all keys: on the H200 the union still cost matrix_vector_multip 6 s of
# its turn (TritonBench's turns spent 60 s in first calls). Both sides are treated alike; an
# autotuner of fewer configs tries them all.
SHORTLIST_CONFIGS = 8
# autotuner -> {key: ids of the fastest configs when the checks tuned at that key}
_check_shortlists: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _autotune_key(tuner: Any, kwargs: dict) -> tuple | None:
    """The cache key `Autotuner.run` computes for this call (Triton 3.x: the `key` arguments'
    values, then every tensor argument's dtype), or None where it cannot be computed; then the
    shortlist of every key together is used, which is only slower."""
    try:
        all_args = {**tuner.nargs, **kwargs}
        args = {k: v for k, v in all_args.items() if k in tuner.arg_names}
        key = [args[k] for k in tuner.keys if k in args]
        key += [str(arg.dtype) for arg in args.values() if hasattr(arg, "dtype")]
        return tuple(key)
    except Exception:  # noqa: BLE001 - another Triton's autotuner: no per-key shortlist
        return None


def _note_check_tuning(tuner: Any, keys: list) -> None:
    """After a check tuned `tuner` at new `keys`: remember that benchmark's fastest configs."""
    timings = getattr(tuner, "configs_timings", None)
    if not isinstance(timings, dict) or len(timings) <= SHORTLIST_CONFIGS:
        return  # (a disk-cached tuning stores a list here: nothing to rank, all stay)

    def median(value: Any) -> float:
        value = value[0] if isinstance(value, (list, tuple)) and value else value
        return value if isinstance(value, (int, float)) else float("inf")

    fastest = {id(config) for config in sorted(timings, key=lambda config: median(timings[config]))[:SHORTLIST_CONFIGS]}
    by_key = _check_shortlists.setdefault(tuner, {})
    for key in keys:
        by_key[key] = fastest


def shortlist_at_timing_turns() -> bool:
    """Wrap `Autotuner.run` (to rank what checks tune) and `Autotuner.prune_configs` (to try only
    the shortlist once `forget_tuning` set it, outside checks). False without Triton's autotuner."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    # One gate for both wrappers: by a second call, precompile's wrapper may sit on top of our
    # prune_configs and hide its mark.
    if getattr(Autotuner.run, "_kernelwright_ranks", False):
        return True

    def make_run(original):
        def run(self, *args, **kwargs):
            if not _checking[0]:  # timed calls go through here: nothing added to them
                return original(self, *args, **kwargs)
            cache = getattr(self, "cache", None)
            before = set(cache) if isinstance(cache, dict) else set()
            try:
                return original(self, *args, **kwargs)
            finally:
                cache = getattr(self, "cache", None)
                if isinstance(cache, dict) and len(cache) > len(before):
                    _note_check_tuning(self, [key for key in cache if key not in before])
        return run

    def make_prune(original):
        def prune_configs(self, kwargs, *rest):
            configs = original(self, kwargs, *rest)
            by_key = getattr(self, "_kernelwright_shortlist", None)
            if by_key and not _checking[0]:
                keep = by_key.get(_autotune_key(self, kwargs))
                if keep is None:  # a key the checks did not tune: the fastest of every key they did
                    keep = set().union(*by_key.values())
                shortlisted = [config for config in configs if id(config) in keep]
                if shortlisted:  # (configs made anew by an early prune are not ours to filter)
                    bench = getattr(self, "_do_bench", None)
                    if isinstance(bench, TuningBench):
                        bench.n_configs = len(shortlisted)  # the per-tuning budget spread over what is tried
                    return shortlisted
            return configs
        return prune_configs

    wrap_once(Autotuner, "prune_configs", "_kernelwright_shortlists", make_prune)
    return wrap_once(Autotuner, "run", "_kernelwright_ranks", make_run)


class LaunchCounter:
    """Counts Triton kernel launches by wrapping the class-level `run` that every launch goes
    through (`kernel[grid](...)`, autotuners, heuristics; compiled and interpreted alike).
    Launches of kernels defined in the candidate's own file are counted separately, so that a
    file that computes with torch (or with torch.compile's generated kernels) is caught."""

    def __init__(self, own_file: str | None) -> None:
        self.own_file = own_file
        self.own = 0
        self.other = 0
        self.kernels: dict[str, int] = {}
        # code object -> defined in the candidate's file? Resolved once: a path lookup on every
        # launch costs tens of microseconds of syscalls, which would be billed to the candidate.
        self._is_own: dict[Any, bool] = {}
        self.autotuners: weakref.WeakSet = weakref.WeakSet()
        # while a check runs: the memory its own launches are given (provenance.KernelMemory)
        self.memory = None

    def forget_tuning(self) -> int:
        """Drop every autotuner's chosen configs: the next call at each shape benchmarks its
        configs again (its shortlist from the checks, where it has one). Perf shapes are first run
        (compiled, autotuned) while other workers share the GPU; the timed choice must come from a
        run with the GPU to itself."""
        for tuner in list(self.autotuners):
            getattr(tuner, "cache", {}).clear()
            by_key = _check_shortlists.get(tuner)
            if by_key:
                tuner._kernelwright_shortlist = by_key
        return len(self.autotuners)

    def tuned_configs(self) -> dict[str, str]:
        """Each autotuned kernel's current choice, by kernel name: a reference timed against
        itself can come out 20% apart when the two sides settle on different configs."""
        chosen = {}
        for tuner in list(self.autotuners):
            best = getattr(tuner, "best_config", None)
            if best is not None:
                name = getattr(getattr(tuner, "base_fn", None), "__name__", "kernel")
                chosen[name] = str(best)
        return chosen

    def install(self) -> None:
        try:
            from triton.runtime.autotuner import Autotuner

            tuners, init = self.autotuners, Autotuner.__init__

            def register(self, *args, _init=init, **kwargs):
                _init(self, *args, **kwargs)
                tuners.add(self)
                if os.environ.get("TRITON_INTERPRET") == "1":
                    return
                n_configs = len(getattr(self, "configs", None) or ()) or 1
                if getattr(self, "_do_bench", False) is None:
                    self._do_bench = TuningBench(n_configs)  # the default benchmarker, on a shorter budget
                elif getattr(self, "use_cuda_graph", False) and getattr(self, "num_reps", 0) is None:
                    self._do_bench = TuningBench(n_configs, cuda_graph=True)  # CUDA-graph tuning, shorter

            Autotuner.__init__ = register
        except ImportError:
            pass
        classes = []
        from triton.runtime.jit import JITFunction

        classes.append(JITFunction)
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:
            pass
        counter = self
        for cls in classes:
            original = cls.run

            def run(self, *args, _original=original, **kwargs):
                if not kwargs.get("warmup", False):
                    counter._record(self, args, kwargs)
                return _original(self, *args, **kwargs)

            cls.run = run

    def _record(self, jit_fn, args: tuple = (), kwargs: dict | None = None) -> None:
        fn = getattr(jit_fn, "fn", None)
        code = getattr(fn, "__code__", None)
        own = self._is_own.get(code)
        if own is None:
            own = bool(code is not None and self.own_file and os.path.realpath(code.co_filename) == self.own_file)
            self._is_own[code] = own
        if own:
            self.own += 1
            name = fn.__name__
            self.kernels[name] = self.kernels.get(name, 0) + 1
            if self.memory is not None:
                self.memory.note_launch(args, kwargs or {})
        else:
            self.other += 1


_CLOCKS = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time")
# The harness's own timing code, as this module defined it (filled in below the class).
_TIMING_METHODS: dict[str, Any] = {}


def timing_functions(torch) -> dict[str, Any]:
    """The clocks and timers a candidate could replace in its process to look fast, by name, as
    they are now: `time`'s clocks, torch's CUDA events and synchronize, Triton's `do_bench`, and
    the harness's own timing methods."""
    found: dict[str, Any] = {f"time.{name}": getattr(time, name, None) for name in _CLOCKS}
    try:
        import triton.testing

        found["triton.testing.do_bench"] = getattr(triton.testing, "do_bench", None)
    except Exception:  # noqa: BLE001
        pass
    found["torch.cuda.synchronize"] = torch.cuda.synchronize
    for name in ("record", "elapsed_time", "synchronize", "query"):
        found[f"torch.cuda.Event.{name}"] = getattr(torch.cuda.Event, name, None)
    for name in _TIMING_METHODS:
        found[f"Harness.{name}"] = getattr(Harness, name, None)
    return found


class Harness:
    def __init__(self, conn: Connection, role: str, task, device: str, options: dict) -> None:
        import torch

        self.conn = conn
        self._rss_start = proc_status_bytes().get("VmRSS", 0)  # what the fork shares with its worker
        self.role = role
        self.task = task
        self.options = options
        self.torch = torch
        self.device = device  # "cuda" (also for ROCm) or "cpu"
        self.is_gpu = device == "cuda"
        # Private references taken before any foreign code runs in this process.
        self._perf_counter = time.perf_counter
        self._empty = torch.empty
        self._generator = torch.Generator
        if self.is_gpu:
            self._event_cls = torch.cuda.Event
            self._record = torch.cuda.Event.record
            self._elapsed = torch.cuda.Event.elapsed_time
            self._sync = torch.cuda.synchronize
            self._sleep = getattr(torch.cuda, "_sleep", None)  # a GPU spin of N clock cycles
        else:
            self._sleep = None
            self._sync = lambda: None
        self.entry: Callable | None = None
        self.baseline: Callable | None = None
        self._seq = 0  # the request being answered (0: the first message, unasked)
        self.counter = LaunchCounter(None)
        self.poison_outputs = False
        self.poison_byte = POISON_BYTE
        self.probe_disabled = False
        self.perf_sets: list[tuple] = []
        self.flush_buffer = None
        self._pad = None
        self._cycles_per_ms: float | None = None
        # Checks hold the GPU lock shared around their own GPU work only, never while compiling
        # (installed before any foreign code can define or bind a kernel).
        self.share = SharedHold(device, self._sync, self._tell_waited, self._may_synchronise)
        # The worker is told when this process compiles, so compiling gets its own (generous)
        # limit and running a short one (compilewatch); before release_during_compile: inside it.
        self.watch = CompileWatch(self._tell_notice)
        self.watch.install()
        shortlist_at_timing_turns()  # before compile_configs_in_parallel: what is compiled ahead is what is tried
        if self.is_gpu:
            release_during_compile(self.share)
            compile_configs_in_parallel(both(self.share.compiling, self.watch.span), compile_threads_from_env())
            yield_at_launches(self.share)
            self.share.start_nudging()  # and between launches, when a timer waits on a long stretch
        # What `patched_timers` compares with: taken after our own hooks, before foreign code runs here
        self._timers = timing_functions(torch)

    def _may_synchronise(self) -> bool:
        """Not while a CUDA graph is being captured (an autotuner declared with use_cuda_graph
        launches inside one): a device synchronise would invalidate the capture."""
        capturing = getattr(self.torch.cuda, "is_current_stream_capturing", None)
        return not (capturing is not None and capturing())

    # -- plumbing ---------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """Reply to the worker. The GPU lock is let go first (after encoding: that copies outputs
        off the device): blocking on the pipe while holding it could deadlock against a timing
        turn the worker is waiting for."""
        data = self._encode(obj)
        self.share.release()
        self.conn.send_bytes(data)

    def _encode(self, obj: Any) -> bytes:
        """A reply as bytes, its tensors copied off the device (GPU work: done under the lock),
        numbered as the request it answers."""
        if isinstance(obj, dict):
            obj["seq"] = self._seq
            if self.share.enabled:
                obj["gpu_lock_s"] = self.share.take_stats()
        return wire.encode(obj)

    def _tell_waited(self, state: str) -> None:
        """The worker's timeouts measure work: it is told when this process queues for the GPU
        ("waiting") and when it has it ("got"), and stops the clock in between."""
        self.conn.send_bytes(wire.encode({"op": "gpu_lock", "state": state, "seq": self._seq}))

    def _compiled_s(self) -> float:
        """Seconds this process has spent compiling Triton kernels so far (compilewatch)."""
        watch = getattr(self, "watch", None)
        return watch.seconds if watch is not None else 0.0

    def _tell_notice(self, msg: dict) -> None:
        """A compile or tune notice (compilewatch), numbered as the request being worked on."""
        self.conn.send_bytes(wire.encode({**msg, "seq": self._seq}))

    def serve(self) -> None:
        self.send({"op": "ready", **self._init_device()})
        while True:
            try:
                msg = self.conn.recv()  # from the trusted worker: pickle is safe in this direction
            except EOFError:
                return
            op = msg.get("op")
            if op == "exit":
                return
            self._seq = msg.get("seq", 0)
            handler = getattr(self, f"op_{op}", None)
            if handler is None:
                self.send({"op": op, "ok": False, "error": f"unknown op {op!r}"})
                continue
            self.share.doing = f"{self.role} {op}" + (f" of case {msg['case']}" if "case" in msg else "")
            _checking[0] = bool(msg.get("gpu_lock"))
            if op == "run":  # streams replies: takes the lock per item
                handler(msg)
                continue
            with self.share.hold(bool(msg.get("gpu_lock"))):
                handler(msg)

    def _init_device(self) -> dict:
        torch = self.torch
        info: dict[str, Any] = {"device": self.device, "torch": torch.__version__}
        try:
            import triton

            info["triton"] = triton.__version__
        except Exception as exc:  # noqa: BLE001
            info["triton"] = f"unavailable: {exc}"
        if self.is_gpu:
            torch.cuda.init()
            props = torch.cuda.get_device_properties(0)
            info.update(
                name=props.name,
                backend="hip" if torch.version.hip else "cuda",
                l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
                memory_bytes=int(props.total_memory),
                sm_count=int(props.multi_processor_count),
            )
            try:
                # Triton's driver object builds (or loads from its cache) a C helper module on first
                # use: here, before any request holds the GPU lock, rather than at a check's first launch
                from triton.runtime import driver

                driver.active.get_current_target()
            except Exception:  # noqa: BLE001 - the first kernel launch reports a broken Triton
                pass
            fraction = self.options.get("memory_fraction")
            if fraction and self.role == "candidate":
                # A runaway candidate hits its own OOM instead of starving the reference process.
                torch.cuda.set_per_process_memory_fraction(float(fraction), 0)
        else:
            info.update(name="cpu (Triton interpreter)", backend="cpu", l2_bytes=0)
        torch.set_num_threads(int(self.options.get("cpu_threads", 1)))
        return info

    def _error(self, op: str, exc: BaseException, **extra) -> dict:
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        if isinstance(exc, SystemExit):
            message = f"the candidate called sys.exit({exc.code!r})"
        else:
            message = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return {"op": op, "ok": False, "error": message, "error_type": type(exc).__name__,
                "error_types": exception_types(exc), "error_code": _error_code(exc),
                "device_fault": self._device_fault(), "traceback": "".join(tb)[-8000:], **extra}

    def _device_fault(self) -> bool:
        """Whether the GPU context is broken (a sticky error: illegal address, misaligned access,
        device-side assert): every CUDA call then fails, so a stream query (it never blocks, even
        behind a kernel that is still running) raises. The worker names the failure a GPU fault
        from this, not from the error's text. Always False on the CPU."""
        if not self.is_gpu:
            return False
        try:
            self.torch.cuda.current_stream().query()
            return False
        except BaseException:  # noqa: BLE001
            return True

    # -- loading -----------------------------------------------------------------------------
    def op_load(self, msg: dict) -> None:
        try:
            if msg.get("task_ref"):  # a spare is forked before its task is known
                from ..tasks import load_task_ref

                self.task = load_task_ref(msg["task_ref"])
            if self.role == "candidate":
                self._load_candidate(msg["path"])
            else:
                task = self.task
                # Same allocator wrappers and launch counter as the candidate: equal host overhead
                # on both sides (without the counter a reference timed against itself came out up
                # to 12% faster on multi-launch calls), and a foreign reference can be probed for
                # outputs it leaves unwritten.
                self._install_poisoning_allocators()
                self.counter = LaunchCounter(os.path.realpath(task.reference_impl) if task.reference_impl else None)
                self.counter.install()
                if task.reference_impl is not None:  # a golden implementation (suite adapters)
                    self.entry = task.load_implementation(str(task.reference_impl), "kernelwright_reference")
                else:
                    self.entry = task.reference
                baseline_path = msg.get("baseline_path")
                self.baseline = (task.load_implementation(baseline_path, "kernelwright_baseline")
                                 if baseline_path else self.entry)
            self.send({"op": "load", "ok": True})
        except BaseException as exc:  # noqa: BLE001 - SystemExit from the candidate included
            self.send(self._error("load", exc))

    def _load_candidate(self, path: str) -> None:
        path = os.path.realpath(path)
        # The task module (hidden cases, reference) stays reachable only through our own references.
        for name in [n for n in sys.modules if n.startswith("kernelwright_task_")]:
            del sys.modules[name]
        self.counter = LaunchCounter(path)
        self.counter.install()
        self._install_poisoning_allocators()
        self.entry = self.task.load_implementation(path, "candidate")

    def _install_poisoning_allocators(self) -> None:
        """torch.empty & co. return memory filled with 0xFF while correctness is checked, so an
        output the kernel never writes reads back as NaN / -1 instead of plausible stale data."""
        torch = self.torch
        harness = self
        targets = [(torch, "empty"), (torch, "empty_like"), (torch, "empty_strided"),
                   (torch.Tensor, "new_empty"), (torch.Tensor, "new_empty_strided")]
        for owner, name in targets:
            original = getattr(owner, name, None)
            if original is None:
                continue

            def poisoned(*args, _original=original, **kwargs):
                result = _original(*args, **kwargs)
                if harness.poison_outputs and isinstance(result, torch.Tensor) and result.numel():
                    result.untyped_storage().fill_(harness.poison_byte)
                return result

            setattr(owner, name, poisoned)

    def _poison_free_memory(self, sizes: list[int]) -> None:
        """Fill the caching allocator's free blocks (exact output sizes first) with 0xFF, so memory
        obtained without torch.empty (or freed by an earlier call) is poisoned as well."""
        if not self.is_gpu:
            return
        torch = self.torch
        blocks = [self._empty(int(n), dtype=torch.uint8, device="cuda") for n in sizes if n > 0]
        blocks.append(self._empty(FREE_MEMORY_POISON_BYTES, dtype=torch.uint8, device="cuda"))
        for b in blocks:
            b.fill_(self.poison_byte)
        del blocks

    # -- inputs ----------------------------------------------------------------------------
    def _bound(self, impl: Any, case_list: str, index: int, seed: int) -> tuple[Callable, tuple]:
        """(fn, args) for one case of `impl`, inputs drawn from `seed` on this device."""
        case = getattr(self.task, case_list)[index]
        gen = self._generator(device=self.device)
        gen.manual_seed(int(seed))
        return self.task.call_for(impl, "perf" if case_list == "perf_cases" else "correctness", case, gen)

    def _check_fits(self, impl: Any, case_list: str, index: int) -> None:
        """Before a reference builds a case's inputs: raise ProblemTooLarge if they and the
        outputs would not fit this machine (the task's `sizes`, else its roofline `cost` bytes
        counted as inputs), instead of being killed by the kernel's OOM killer half way."""
        if self.role != "reference":
            return
        case = getattr(self.task, case_list)[index]
        kind = "perf" if case_list == "perf_cases" else "correctness"
        sizes = None
        try:
            if self.task.sizes is not None:
                sizes = self.task.sizes(impl, kind, case)
            elif self.task.cost is not None:
                moved = int(self.task.cost(case).get("bytes", 0))
                sizes = (moved, 0) if moved else None
        except Exception:  # noqa: BLE001 - no estimate: judged as it is
            sizes = None
        if not sizes:
            return
        inputs, outputs = (int(v) for v in sizes)
        if self.task.reference_in_float64 and self.task.reference_impl is None:
            inputs, outputs = 3 * inputs, 3 * outputs  # float64 copies of both next to the natives
        host_need, device_need = memory_need(inputs, outputs, self.is_gpu)
        host = host_memory_available()
        problems = []
        if host and host_need > host:
            problems.append(f"about {gib(host_need)} of host memory, {gib(host)} available")
        if self.is_gpu:
            total = int(self.torch.cuda.get_device_properties(0).total_memory)
            if device_need > total:
                problems.append(f"about {gib(device_need)} of GPU memory, the GPU has {gib(total)}")
        if problems:
            raise ProblemTooLarge(f"{kind} case {case.label}: inputs {gib(inputs)} and outputs {gib(outputs)} "
                                  f"need {' and '.join(problems)}")

    def _upcast(self, args: tuple) -> tuple:
        torch = self.torch
        return tuple(a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                     for a in args)

    def _tensor_args(self, args: tuple) -> list:
        return [a for a in args if isinstance(a, self.torch.Tensor)]

    # -- correctness -------------------------------------------------------------------------
    def op_run(self, msg: dict) -> None:
        """Run each item (case, seed) and stream one reply per item."""
        items = msg["items"]
        for k, item in enumerate(items):
            self.share.doing = f"{self.role} test case {item['case']}" + (" with probes" if item.get("probe") else "")
            with self.share.hold(bool(msg.get("gpu_lock"))):
                if self.role == "candidate":
                    reply = self._run_candidate_item(item)
                else:
                    began, compiled = time.perf_counter(), self._compiled_s()
                    reply = self._run_reference_item(item)
                    if reply.get("ok") and "skipped" not in reply:  # the candidate's limit scales from it
                        reply["run_s"] = max(0.0, time.perf_counter() - began - (self._compiled_s() - compiled))
                reply_ok = bool(reply.get("ok"))
                # Inside the hold: encoding copies the outputs off the GPU (and may launch a kernel
                # for a strided one), and returning the cache to the driver unmaps memory; neither
                # may run inside another worker's timing turn. The pipe is written after letting go.
                try:
                    data = self._encode(reply)
                    if self.role == "reference" and len(data) > max_reply_bytes():
                        raise ProblemTooLarge(f"the reference's reply for case {item['case']} is {gib(len(data))}, "
                                              f"over the {gib(max_reply_bytes())} a reply may carry (its outputs "
                                              "are too large to be compared whole)")
                except BaseException as exc:  # noqa: BLE001 - a fault the copy off the GPU surfaced
                    reply_ok = False
                    data = self._encode(self._error("run", exc, **({} if self.role == "candidate"
                                                                   else {"reference_failed": True})))
                del reply
                if not reply_ok or k == len(items) - 1:
                    self._release_cached_memory()
            self.conn.send_bytes(data)
            del data
            if not reply_ok:
                break  # the worker stops at the first failure

    def _run_reference_item(self, item: dict) -> dict:
        try:
            self._check_fits(self.entry, "correctness_cases", item["case"])
            self._collect_large_garbage()
            fn, args = self._bound(self.entry, "correctness_cases", item["case"], item["seed"])
            self._note_inputs(args)
            before = self.counter.own
            native, from_kernel = self._reference_call(fn, args)
            launches = self.counter.own - before  # kernels of a foreign reference's own file
            meta = [{"dtype": wire.dtype_name(t.dtype), "shape": list(t.shape),
                     "nbytes": t.numel() * t.element_size()} for t in native]
            if self.task.reference_in_float64 and self.task.reference_impl is None:
                reference = flatten_outputs(fn(*self._upcast(args)), self.torch)
            else:
                reference = native
            self._sync()
            # digests of the inputs, never the inputs: the candidate's are compared with them
            reply = {"op": "run", "ok": True, "reference": reference, "meta": meta, "launches": launches,
                     "input_digests": tensor_digests(self.torch, self._tensor_args(args))}
            if from_kernel is not None:
                reply["from_kernel"] = from_kernel
            if native.names is not None:
                reply["names"] = native.names
            if self._should_probe(item):
                # Foreign code (a golden kernel, a user's model) may leave outputs unwritten or read
                # memory it never initialised; it then "passes" only because fresh memory is zero.
                # Run it again on poisoned memory: the positions that change are undefined.
                try:
                    fn, args = self._bound(self.entry, "correctness_cases", item["case"], item["seed"])
                    reply["undefined"] = self._undefined_positions(fn, args, reference, meta)
                except BaseException as exc:  # noqa: BLE001 - the clean values above still stand
                    reply["probe_failed"] = self._probe_failed(exc)
            return reply
        except BaseException as exc:  # noqa: BLE001
            if _is_skip(exc):
                return {"op": "run", "ok": True, "skipped": str(exc)[:300]}
            return self._error("run", exc, reference_failed=True)

    def _release_cached_memory(self) -> None:
        """Give the allocator's cached blocks back to the driver after work at a new size: an idle
        process holding gigabytes would make another worker's large shape run out of memory.
        Called under the GPU lock (shared, or the worker's exclusive turn): unmapping device
        memory is GPU work like any other. (It was a suspect for the rare timing blocks measured
        several times slower than the rest; freeing 4 GiB in a loop beside a timed kernel did not
        move it: docs/benchmarks.md, tenth session.) After a GPU fault
        the context is gone and this raises: the work that faulted reports the fault, so that
        error is dropped here (raising would lose the reply that says what happened)."""
        if self.is_gpu:
            try:
                self.torch.cuda.empty_cache()
            except BaseException:  # noqa: BLE001
                pass

    def _should_probe(self, msg: dict) -> bool:
        return self.task.reference_impl is not None and msg.get("probe", True) and not self.probe_disabled

    def _probe_failed(self, exc: BaseException) -> str:
        """Poisoned memory made the reference itself fail (garbage indices, say). Probing stops in
        this process; the worker re-judges the task without probes if the process is now unusable."""
        self.probe_disabled = True
        return "".join(traceback.format_exception_only(type(exc), exc)).strip()[:500]

    def _undefined_positions(self, fn: Callable, args: tuple, clean: list, meta: list[dict]) -> list:
        """Per output, a bool mask of the positions whose value changed when the same call ran on
        poisoned memory (None where nothing changed). Outputs that are not comparable tensors of
        the same shape get None: they are compared as usual."""
        torch = self.torch
        runs = []
        # Two poisons: 0xFF (NaN, -1) and 0x00. A position the call really writes holds the same
        # value in all three runs; one that depends on uninitialised memory differs somewhere
        # (stale memory in the clean run can itself be NaN, so one poison is not enough).
        for byte in (POISON_BYTE, 0x00):
            self.share.yield_turn()  # each run is a full call: a waiting timer need not wait for all three
            self.poison_byte = byte
            guarded = self._guarded(args, byte)
            self._poison_free_memory([m["nbytes"] for m in meta])
            self.poison_outputs = True
            try:
                # tensors the call makes itself are guarded too (a GEAK test function builds its
                # inputs inside the call, where the argument guards cannot reach them)
                with guarded_allocations(torch, self.device, byte):
                    runs.append(flatten_outputs(fn(*guarded), torch))
                del guarded
                self._sync()
            finally:
                self.poison_outputs = False
                self.poison_byte = POISON_BYTE
        masks = []
        for i, ref in enumerate(clean):
            others = [run[i] if i < len(run) else None for run in runs]
            if not isinstance(ref, torch.Tensor) or any(
                    not isinstance(o, torch.Tensor) or o.shape != ref.shape or o.dtype != ref.dtype for o in others):
                masks.append(None)
                continue
            masks.append(self._changed_positions(ref, others))
        return masks

    def _changed_positions(self, ref: Any, others: list) -> Any:
        """A CPU bool mask of the positions where `ref` and the poisoned runs `others` disagree
        beyond the task's tolerance, or None where they all agree. Bitwise-equal runs (a call
        that writes everything it returns) are settled without arithmetic; otherwise the slices
        are compared on the GPU when there is one: GEAK results come back as CPU tensors, and
        three float64 passes over a 8192x8192 output took 10 s of CPU."""
        from .compare import identical

        torch = self.torch
        if all(identical([ref], [o.to(ref.device)]) for o in others):
            return None
        where = self.device if self.is_gpu else "cpu"
        chunk = MASK_CHUNK_GPU if self.is_gpu else MASK_CHUNK_CPU
        floating = ref.is_floating_point() or ref.is_complex()
        tol = self.task.tolerance_for(wire.dtype_name(ref.dtype)) if floating else None
        flat = [t.reshape(-1) for t in (ref, *others)]
        mask = torch.zeros(ref.numel(), dtype=torch.bool)
        for start in range(0, ref.numel(), chunk):
            part = [f[start:start + chunk].to(where) for f in flat]
            if floating:
                part = [p.to(torch.complex128 if p.is_complex() else torch.float64) for p in part]
            changed = torch.zeros(part[0].shape, dtype=torch.bool, device=part[0].device)
            for a, b in ((part[0], part[1]), (part[0], part[2]), (part[1], part[2])):
                if floating:
                    same = torch.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
                else:
                    same = a == b
                changed |= ~same
            mask[start:start + chunk] = changed.cpu()
        return mask.reshape(ref.shape) if bool(mask.any()) else None

    def _guarded(self, args: tuple, byte: int) -> tuple:
        """`args` with every tensor copied between two GUARD_BYTES zones filled with `byte`, same
        shape and strides. A value the call computes from memory outside its inputs then differs
        between the two probes, and that position counts as undefined. (Without the guards such
        reads hit whatever tensor lies next door: the same in both probes, different in another
        process, so a reference compared with itself failed at random.) A tensor that cannot be
        copied this way (overlapping strides, no memory left) is passed as it is."""
        torch = self.torch

        def place(t: Any) -> Any:
            return in_guard_zone(torch, t, byte, GUARD_BYTES)

        def walk(value: Any) -> Any:
            if isinstance(value, (tuple, list)):
                items = [walk(v) for v in value]
                return type(value)(items) if not hasattr(value, "_fields") else type(value)(*items)
            if isinstance(value, dict):
                return {k: walk(v) for k, v in value.items()}
            return place(value)

        return tuple(walk(a) for a in args)

    def _bound_seeded(self, impl: Any, case_list: str, index: int, seed: int) -> tuple[Callable, tuple]:
        """`_bound`, then the global generators seeded for adapter tasks: their code may draw random
        inputs inside the call (GEAK perf ops build their tensors there), and both sides must see
        the same ones."""
        bound = self._bound(impl, case_list, index, seed)
        if self.task.bind is not None:
            self._seed_globals(int(seed))
        return bound

    def _seed_globals(self, seed: int) -> None:
        random.seed(seed)
        self.torch.manual_seed(seed)
        try:
            import numpy

            numpy.random.seed(seed % (2**32))
        except ImportError:
            pass

    def _call_candidate(self, fn: Callable, args: tuple, poison_sizes: list[int]) -> tuple[Outputs, int, float, dict]:
        """One checked call: (outputs, own launches, seconds, provenance). The provenance says
        which outputs lie outside the memory the candidate's own kernels were given
        (`not_from_kernel`, positions), or, for a benchmark's test function that calls the entry
        points itself, which of those calls returned such a tensor (`foreign_calls`)."""
        self._poison_free_memory(poison_sizes)
        self.poison_outputs = True
        before = self.counter.own
        memory = KernelMemory(self.torch)
        self.counter.memory = memory
        start = self._perf_counter()
        try:
            with tracking_copies(self.torch, memory), EntryCalls(self.entry, memory) as calls:
                outputs = flatten_outputs(fn(*args), self.torch)
            self._sync()
        finally:
            self.poison_outputs = False
            self.counter.memory = None
        seconds = self._perf_counter() - start
        if calls.calls:
            provenance = {"foreign_calls": calls.foreign[:64], "not_from_kernel": []}
        else:
            provenance = {"foreign_calls": [],
                          "not_from_kernel": [i for i, t in enumerate(outputs)
                                              if i not in outputs.numbers and not memory.holds(t)]}
        return outputs, self.counter.own - before, seconds, provenance

    def _reference_call(self, fn: Callable, args: tuple) -> tuple[Outputs, list[bool] | None]:
        """A foreign reference's call, with which of its outputs lie in memory its own kernels
        were given (None for a reference that launched none: a PyTorch one says nothing)."""
        torch = self.torch
        if self.task.reference_impl is None:
            return flatten_outputs(fn(*args), torch), None
        memory = KernelMemory(torch)
        before = self.counter.own
        self.counter.memory = memory
        try:
            with tracking_copies(torch, memory):
                outputs = flatten_outputs(fn(*args), torch)
        finally:
            self.counter.memory = None
        if self.counter.own == before:
            return outputs, None
        return outputs, [i in outputs.numbers or memory.holds(t) for i, t in enumerate(outputs)]

    def _collect_large_garbage(self) -> None:
        """Free the last item's inputs before making the next ones. On the candidate side a
        reference cycle (not yet found: gc.collect() frees it) kept each item's inputs alive until
        the cyclic collector ran, so a child held two sets of inputs (measured under the
        interpreter: 256 MiB of inputs, 639 MiB peak; 413 MiB with this). Only after large inputs:
        a collection costs ~0.1 s."""
        if getattr(self, "_large_inputs", False):
            import gc

            gc.collect()
            self._large_inputs = False

    def _note_inputs(self, args: tuple) -> None:
        self._large_inputs = self._nbytes(args) >= LARGE_INPUT_BYTES

    def _run_candidate_item(self, item: dict) -> dict:
        try:
            self._collect_large_garbage()
            fn, args = self._bound(self.entry, "correctness_cases", item["case"], item["seed"])
            self._note_inputs(args)
            sizes = item.get("poison_sizes", [])
            outputs, launches, seconds, provenance = self._call_candidate(fn, args, sizes)
            # Snapshot now: an output may alias an input, and the repeat call below may change both.
            reply = {"op": "run", "ok": True, "outputs": [t.detach().clone() for t in outputs],
                     "launches": launches, "seconds": seconds, "kernels": dict(self.counter.kernels),
                     # the inputs after the call, as digests (the worker compares them with the
                     # reference's): computed now, before the repeat call below may change them
                     "input_digests": tensor_digests(self.torch, self._tensor_args(args)), **provenance}
            if outputs.names is not None:
                reply["names"] = outputs.names
            n_outputs = len(outputs)
            del outputs  # the reply holds their snapshot: memory for the repeat's outputs
            if item.get("repeat"):
                if self.task.bind is not None:  # adapter tasks draw inputs from global RNG state: re-seed
                    args = None  # let go of the first inputs before making the same ones again
                    self._collect_large_garbage()
                    fn, args = self._bound(self.entry, "correctness_cases", item["case"], item["seed"])
                    self._note_inputs(args)
                again, launches2, _, provenance2 = self._call_candidate(fn, args, sizes)
                reply["repeat_outputs"] = again
                reply["repeat_launches"] = launches2
                # what the second call did not write with its own launches (a result cached from the first)
                reply["repeat_not_from_kernel"] = [i for i in provenance2["not_from_kernel"] if i < n_outputs]
                reply["repeat_foreign_calls"] = provenance2["foreign_calls"]
            return reply
        except BaseException as exc:  # noqa: BLE001 - includes SystemExit raised by the candidate
            return self._error("run", exc)

    # -- performance -------------------------------------------------------------------------
    def op_spot(self, msg: dict) -> None:
        """Run one perf-size call and return its outputs at sampled positions: perf shapes get a
        correctness check too, without shipping hundreds of megabytes."""
        torch = self.torch
        doing = self.share.doing
        try:
            self.share.doing = f"{doing}: making its inputs"
            self._check_fits(self.entry, "perf_cases", msg["case"])
            self._collect_large_garbage()
            fn, args = self._bound_seeded(self.entry, "perf_cases", msg["case"], msg["seed"])
            self._note_inputs(args)
            self.share.doing = f"{doing}: the call"
            undefined = probe_failed = None
            provenance: dict[str, Any] = {}
            if self.role == "candidate":
                outputs, launches, _, provenance = self._call_candidate(fn, args, msg.get("poison_sizes", []))
                positions = msg["positions"]
            else:
                before = self.counter.own
                use64 = self.task.reference_in_float64 and self.task.reference_impl is None
                outputs, from_kernel = self._reference_call(fn, self._upcast(args) if use64 else args)
                launches = self.counter.own - before  # kernels of a foreign reference's own file
                if from_kernel is not None:
                    provenance["from_kernel"] = from_kernel
                native_meta = None
                if use64:  # the expected dtype comes from a native run
                    native = flatten_outputs(fn(*args), torch)
                    native_meta = [{"dtype": wire.dtype_name(t.dtype), "shape": list(t.shape),
                                    "nbytes": t.numel() * t.element_size()} for t in native]
                    del native
                rng = torch.Generator().manual_seed(int(msg["seed"]))
                count = int(msg.get("samples", 4096))
                positions = [torch.randint(0, max(t.numel(), 1), (min(count, t.numel()),), generator=rng).tolist()
                             for t in outputs]
                if self._should_probe(msg):
                    self.share.doing = f"{doing}: probes"
                    try:
                        fn, args = self._bound_seeded(self.entry, "perf_cases", msg["case"], msg["seed"])
                        metas = native_meta or [{"nbytes": t.numel() * t.element_size()} for t in outputs]
                        undefined = self._undefined_positions(fn, args, outputs, metas)
                    except BaseException as exc:  # noqa: BLE001
                        probe_failed = self._probe_failed(exc)
            self.share.doing = f"{doing}: sampling its outputs"
            samples, nan_counts, metas = [], [], []
            for t, pos in zip(outputs, positions):
                flat = t.reshape(-1)
                index = torch.tensor(pos, dtype=torch.long, device=flat.device)
                samples.append(flat[index] if len(pos) else flat[:0])
                nan_counts.append(int(torch.isnan(t).sum()) if t.is_floating_point() else 0)
                metas.append({"dtype": wire.dtype_name(t.dtype), "shape": list(t.shape),
                              "nbytes": t.numel() * t.element_size()})
            reply = {"op": "spot", "ok": True, "samples": samples, "positions": positions,
                     "nan_counts": nan_counts, "meta": metas, "launches": launches,
                     # the configurations checked: timing must use checked ones
                     "tuned": self.counter.tuned_configs(), **provenance}
            if outputs.names is not None:
                reply["names"] = outputs.names
            if undefined is not None:
                # sampled positions whose reference value is undefined, and how many undefined
                # positions each output has (the candidate may hold NaN there)
                reply["undefined_samples"] = [
                    (mask.reshape(-1)[torch.tensor(pos, dtype=torch.long)] if mask is not None and len(pos)
                     else None) for mask, pos in zip(undefined, positions)]
                reply["undefined_counts"] = [int(m.sum()) if m is not None else 0 for m in undefined]
            if probe_failed:
                reply["probe_failed"] = probe_failed
            if self.role != "candidate":
                reply["native_meta"] = native_meta or metas
            del outputs, args
            # Before the reply lets go of the lock: freeing gigabytes unmaps device memory, which
            # must not happen inside another worker's timing turn.
            self._release_cached_memory()
            self.send(reply)
            del reply
        except BaseException as exc:  # noqa: BLE001
            if self.role == "reference" and _is_skip(exc):
                self.send({"op": "spot", "ok": True, "skipped": str(exc)[:300]})
            else:
                self.send(self._error("spot", exc))

    def op_perf_prepare(self, msg: dict) -> None:
        """Make the rotating input sets, warm up on them, and estimate the time of one call."""
        torch = self.torch
        try:
            self.perf_sets = []  # no gc.collect() here: it costs ~0.1 s per perf case
            self._release_cached_memory()
            impl = self.entry if self.role == "candidate" else self.baseline
            t0 = self._perf_counter()
            for seed in msg["seeds"]:
                self.perf_sets.append(self._bound(impl, "perf_cases", msg["case"], seed))
                per_set = self._nbytes(self.perf_sets[0][1])
                if per_set * (len(self.perf_sets) + 1) > PERF_SET_BUDGET_BYTES:
                    break
            if self.flush_buffer is None:
                self.flush_buffer = self._empty(int(msg["flush_bytes"]), dtype=torch.uint8, device=self.device)
            inputs_s = self._perf_counter() - t0
            warm_ms = float(msg.get("warmup_ms", 25.0))
            start = self._perf_counter()
            calls = 0
            before = self.counter.own
            host_ms = []
            # Synchronise after every call: the warm-up lasts `warm_ms` of device time. (Without it
            # the host queued up to 1000 calls within `warm_ms` of *host* time, and a 243 ms kernel
            # spent 55 s warming up.)
            slow = False
            while True:
                fn, args = self.perf_sets[calls % len(self.perf_sets)]
                t = self._perf_counter()
                fn(*args)
                host_ms.append((self._perf_counter() - t) * 1e3)
                self._sync()
                calls += 1
                # the first call may still compile or allocate; a slow steady call warms up alone
                slow = calls >= 2 and (self._perf_counter() - t) * 1e3 >= SLOW_CALL_MS
                if calls >= 1000 or ((calls >= 3 or slow) and (self._perf_counter() - start) * 1e3 >= warm_ms):
                    break
            steady = sorted(host_ms[1:] or host_ms)
            host_median = steady[len(steady) // 2]
            pad_ms = self._host_pad_ms(host_median)
            # (not asked of slow calls: a host wait is lost in their length, and two more calls cost)
            host_sync = not slow and self._waits_for_device(host_median)
            t1 = self._perf_counter()
            times = self._timed_calls(2 if slow else 5, pad_ms)
            flush_ms = self._flush_ms(3)
            gaps = self._escape_gaps(2 if slow else 5) if self.is_gpu else [0.0]
            self.send({"op": "perf_prepare", "ok": True, "est_ms": float(sorted(times)[len(times) // 2]),
                       "phase_s": {"inputs": round(inputs_s, 4), "warmup": round(t1 - start, 4),
                                   "first_call": round(host_ms[0] / 1e3, 4),
                                   "probe": round(self._perf_counter() - t1, 4)},
                       "flush_ms": flush_ms, "pad_ms": pad_ms, "host_ms": float(sorted(host_ms)[len(host_ms) // 2]),
                       # host latency only ever adds to a gap: the minimum is the cleanest reading
                       "gap_ms": float(min(gaps)),
                       "warmup_launches": self.counter.own - before, "warmup_calls": calls,
                       "sets": len(self.perf_sets), "slow": slow, "host_sync": host_sync,
                       "tuned": self.counter.tuned_configs(), "patched": self.patched_timers()})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("perf_prepare", exc))

    def patched_timers(self) -> list[str]:
        """The timing functions that are no longer what they were before the candidate was imported
        (a candidate that patches `time.perf_counter`, `torch.cuda.Event.elapsed_time`, `do_bench`
        or the harness's own timer references to look fast), by name. This runs inside the
        candidate's process, so a candidate can defeat it; the worker's own clock around each
        block is the check it cannot reach (`Worker._time_case`)."""
        now = timing_functions(self.torch)
        found = [name for name, original in self._timers.items() if now.get(name) is not original]
        own = {"_perf_counter": "time.perf_counter"}
        if self.is_gpu:
            own.update(_record="torch.cuda.Event.record", _elapsed="torch.cuda.Event.elapsed_time",
                       _sync="torch.cuda.synchronize")
        found += [f"Harness.{attr}" for attr, name in own.items()
                  if self.__dict__.get(attr) is not self._timers.get(name)]
        return found[:20]

    def _nbytes(self, value: Any) -> int:
        torch = self.torch
        if isinstance(value, torch.Tensor):
            return value.numel() * value.element_size()
        if isinstance(value, (list, tuple)):
            return sum(self._nbytes(v) for v in value)
        if isinstance(value, dict):
            return sum(self._nbytes(v) for v in value.values())
        return 0

    def _waits_for_device(self, host_ms: float) -> bool:
        """Whether one call waits for the GPU inside (`.item()`, a size read back, a synchronize):
        queue a spin of HOST_SYNC_SPIN_MS ahead of it and see whether the call's host time grows
        by about as much. Such a call's device time includes the host's latency after each wait,
        so it depends on CPU load as well as on the kernels (the pad before the start event cannot
        cover it)."""
        if not self.is_gpu or self._sleep is None or not self._cycles_per_ms:
            return False
        fn, args = self.perf_sets[0]
        waited = []
        for _ in range(2):  # both must wait: a busy host alone can stall one call by a millisecond
            self._sync()
            self._sleep(int(HOST_SYNC_SPIN_MS * self._cycles_per_ms))
            t = self._perf_counter()
            fn(*args)
            waited.append((self._perf_counter() - t) * 1e3 - host_ms)
            self._sync()
        return min(waited) >= 0.5 * HOST_SYNC_SPIN_MS

    def _host_pad_ms(self, host_ms: float) -> float:
        """GPU time to queue ahead of each timed call so the kernel is already enqueued when the
        start event fires: otherwise host-side launch time (slow under CPU load, e.g. other
        workers compiling) would be measured as kernel time. Twice the host's time per call."""
        if self._sleep is None:
            return 0.0
        if self._cycles_per_ms is None:
            start, end = self._event_cls(enable_timing=True), self._event_cls(enable_timing=True)
            self._sleep(1000)  # first use: load the spin kernel
            self._sync()
            self._record(start)
            self._sleep(2_000_000)
            self._record(end)
            self._sync()
            self._cycles_per_ms = 2_000_000 / max(self._elapsed(start, end), 1e-3)
        return min(2.0 * host_ms + 0.02, 5.0)

    def _timed_calls(self, n: int, pad_ms: float = 0.0, only_set: int | None = None) -> list[float]:
        """Per-call device time in ms. The L2 is flushed before every call (the flush also keeps
        the GPU busy while the host enqueues the call, so launch latency is not counted). Calls
        cycle through the input sets, or all use set `only_set`."""
        flush = self.flush_buffer
        sets = self.perf_sets if only_set is None else [self.perf_sets[only_set]]
        if self.is_gpu:
            events = [(self._event_cls(enable_timing=True), self._event_cls(enable_timing=True))
                      for _ in range(n)]
            cycles = int(pad_ms * self._cycles_per_ms) if pad_ms > 0 and self._cycles_per_ms else 0
            for i in range(n):
                fn, args = sets[i % len(sets)]
                flush.zero_()
                if cycles:
                    self._sleep(cycles)
                self._record(events[i][0])
                fn(*args)
                self._record(events[i][1])
            self._sync()
            return [self._elapsed(s, e) for s, e in events]
        times = []
        for i in range(n):
            fn, args = sets[i % len(sets)]
            flush.zero_()
            start = self._perf_counter()
            fn(*args)
            times.append((self._perf_counter() - start) * 1e3)
        return times

    def _flush_ms(self, n: int) -> float:
        """Time of one L2 flush: every timed call pays it, so block sizes must count it."""
        if not self.is_gpu:
            start = self._perf_counter()
            for _ in range(n):
                self.flush_buffer.zero_()
            return (self._perf_counter() - start) * 1e3 / n
        start, end = self._event_cls(enable_timing=True), self._event_cls(enable_timing=True)
        self._record(start)
        for _ in range(n):
            self.flush_buffer.zero_()
        self._record(end)
        self._sync()
        return self._elapsed(start, end) / n

    def _escape_gaps(self, n: int) -> list[float]:
        """Time from the end of the call on the current stream to the moment the whole device is
        idle. Work hidden on side streams (outside the timed events) makes this gap large."""
        gaps = []
        for i in range(n):
            fn, args = self.perf_sets[i % len(self.perf_sets)]
            self._sync()
            self.flush_buffer.zero_()
            start, end, idle = (self._event_cls(enable_timing=True) for _ in range(3))
            self._record(start)
            fn(*args)
            self._record(end)
            self._sync()
            self._record(idle)
            self._sync()
            gaps.append(self._elapsed(end, idle))
        return gaps

    def _replace_inputs(self, seed: int, only_set: int | None = None) -> None:
        """Copy every input set (or the one set a block uses) to fresh memory behind a random pad, so the
        addresses (and their alignment to memory channels) change from block to block: placement
        effects then show up as variance between blocks instead of a hidden bias of one process."""
        torch = self.torch
        rng = random.Random(seed)
        self._pad = None
        # Outputs are re-allocated every call from the same cached block: return the cache to the
        # driver so this block's outputs land on new pages too, behind a pad held all block.
        self._release_cached_memory()
        self._pad = self._empty(rng.randrange(1, 8192) * 4096, dtype=torch.uint8, device=self.device)
        self.perf_sets = [(fn, tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
                          if only_set is None or i == only_set else (fn, args)  # the others wait
                          for i, (fn, args) in enumerate(self.perf_sets)]

    def op_gaps(self, msg: dict) -> None:
        """More escape-gap readings of the prepared perf case (the worker asks when one looks late)."""
        try:
            gaps = self._escape_gaps(int(msg["n"])) if self.is_gpu else [0.0]
            self.send({"op": "gaps", "ok": True, "gap_ms": float(min(gaps))})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("gaps", exc))

    def op_time_block(self, msg: dict) -> None:
        try:
            t0 = self._perf_counter()
            only_set = msg.get("only_set")  # a block number: its input set, counted round the sets
            only_set = None if only_set is None else int(only_set) % len(self.perf_sets)
            if msg.get("replace_seed") is not None:
                self._replace_inputs(int(msg["replace_seed"]), only_set)
            t1 = self._perf_counter()
            before = self.counter.own
            times = self._timed_calls(int(msg["n"]), float(msg.get("pad_ms", 0.0)), only_set)
            self.send({"op": "time_block", "ok": True, "times_ms": times,
                       "launches": self.counter.own - before, "patched": self.patched_timers(),
                       "phase_s": {"replace": round(t1 - t0, 4), "timed": round(self._perf_counter() - t1, 4)}})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("time_block", exc))

    def op_memory_fraction(self, msg: dict) -> None:
        """Change the candidate's cap on GPU memory (lifted while its worker has the GPU alone)."""
        try:
            if self.is_gpu and self.role == "candidate":
                self.torch.cuda.set_per_process_memory_fraction(float(msg["fraction"]), 0)
            self.send({"op": "memory_fraction", "ok": True})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("memory_fraction", exc))

    def op_retune(self, msg: dict) -> None:
        try:
            self.send({"op": "retune", "ok": True, "autotuners": self.counter.forget_tuning()})
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("retune", exc))

    def op_memory(self, msg: dict) -> None:
        """This process's memory so far (measurements: `JudgeOptions.measure_memory`)."""
        try:
            status = proc_status_bytes()
            reply = {"op": "memory", "ok": True, "rss_start_bytes": self._rss_start,
                     "rss_bytes": status.get("VmRSS", 0), "rss_peak_bytes": status.get("VmHWM", 0)}
            if self.is_gpu:
                reply["device_peak_bytes"] = int(self.torch.cuda.max_memory_allocated())
                reply["device_reserved_peak_bytes"] = int(self.torch.cuda.max_memory_reserved())
            self.send(reply)
        except BaseException as exc:  # noqa: BLE001
            self.send(self._error("memory", exc))

    def op_sync(self, msg: dict) -> None:
        """Answered last, before a verdict: a reply the candidate wrote on the channel itself and
        that is still unread shows up here as one numbered out of turn."""
        self.send({"op": "sync", "ok": True})

    def op_perf_release(self, msg: dict) -> None:
        self.perf_sets = []
        self._pad = None
        self._release_cached_memory()
        self.send({"op": "perf_release", "ok": True})


_TIMING_METHODS.update((name, Harness.__dict__[name]) for name in
                       ("_timed_calls", "_escape_gaps", "_flush_ms", "op_time_block", "op_perf_prepare", "op_gaps",
                        "patched_timers"))
