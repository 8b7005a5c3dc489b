"""Every change the judge makes to Triton inside a child, in one place, in the order `install`
applies them (a later wrapper runs first; several purposes may wrap one method, each once).

Both sides install the same hooks before any foreign code can define or bind a kernel:

1. `watch_compiles`: `triton.compiler.compile`, `CompiledKernel._init_handles` (a launcher build)
   and `Autotuner._bench` tell the worker when this process compiles or tunes, so compiling gets
   its own limit and running a short one (`compilewatch`).
2. `shortlist_at_timing_turns`: `Autotuner.run` ranks what the checks tuned and
   `Autotuner.prune_configs` tries only that shortlist at timing turns (`autotuning`).
3. On a GPU, `release_during_compile`: `compile` and `_init_handles` again, outside the shared GPU
   lock; after 1, so the compile spans lie inside the unlocked stretch.
4. On a GPU, `compile_configs_in_parallel`: `Autotuner.prune_configs` again, compiling an
   autotuner's configs side by side with the lock let go; after 2, so what is compiled ahead is
   what will be tried (`precompile`).
5. On a GPU, `yield_at_launches`: `JITFunction.run` checks for a waiting timing turn first.
6. `count_launches`: `Autotuner.__init__` registers every autotuner (and gives it the judge's
   benchmarker) and `JITFunction.run` / `InterpretedFunction.run` count every launch; last, so the
   count sees each launch before anything else runs (`launches`). During a profile's recorded
   call, own launches also go through the counter's profiler (`profiling`).
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, ContextManager

from ..common.gpulock import SharedHold
from .autotuning import TuningBench, _autotune_key, _checking, _note_check_tuning
from .compilewatch import CompileWatch, both
from .launches import LaunchCounter
from .precompile import _compile_all, _worth_compiling_ahead


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


def install(watch: CompileWatch, share: SharedHold, counter: LaunchCounter, is_gpu: bool,
            compile_threads: int) -> None:
    """Every hook, in the order the module's docstring gives and explains."""
    watch_compiles(watch)
    shortlist_at_timing_turns()
    if is_gpu:
        release_during_compile(share)
        compile_configs_in_parallel(both(share.compiling, watch.span), compile_threads)
        yield_at_launches(share)
    count_launches(counter)


def watch_compiles(watch: CompileWatch) -> bool:
    """Wrap `triton.compiler.compile` and `CompiledKernel._init_handles` (a launcher build:
    the C compiler runs) in a span, and `Autotuner._bench` with a tune notice. Installed
    before `gpulock.release_during_compile`, so these spans lie inside its unlocked stretch
    (queueing for the lock after a compile is told apart, by `gpu_lock` notices). False when
    this Triton has no compiler to wrap (under the CPU interpreter the compile wrappers are
    never called: nothing compiles there)."""
    try:
        import triton.compiler as compiler
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return False
    watch = watch

    def spanned(when: Callable[..., bool] = lambda *a: True):
        def make(original):
            def compiling(*args, **kwargs):
                if not when(*args):
                    return original(*args, **kwargs)
                with watch.span():
                    return original(*args, **kwargs)
            return compiling
        return make

    wrap_once(CompiledKernel, "_init_handles", "_kernelwright_watched",
              spanned(lambda kernel: getattr(kernel, "module", None) is None))
    install_tune_notices(watch)
    return wrap_once(compiler, "compile", "_kernelwright_watched", spanned())


def install_tune_notices(watch: CompileWatch) -> bool:
    """A tune notice before each config an autotuner benchmarks (interpreted kernels too)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False

    def make_bench(original):
        def bench(self, *args, **kwargs):
            watch.tuning_config()
            return original(self, *args, **kwargs)
        return bench

    return wrap_once(Autotuner, "_bench", "_kernelwright_watched", make_bench)


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


def release_during_compile(hold: SharedHold) -> bool:
    """Wrap `triton.compiler.compile` (looked up by every JIT function when it first binds, hence
    before any kernel of this process is compiled) so compilation runs outside the GPU lock, and
    `CompiledKernel._init_handles`, which builds the kernel's launcher and loads its binary at its
    first run. The launcher is a C extension that Triton compiles with the system's C compiler,
    after `compile` has returned, so it was built under the lock. That is the first suspect for
    the checks that held the GPU for 20-60 s on a kernel's first use while timing turns waited
    (TritonBench on the H200: log_softmax's 32768 case took 58.6 s in the reference process and
    0.6 s in the candidate process, which found the same code in Triton's caches). Returns False
    when this Triton has no `compile` (the lock is then kept while compiling)."""
    try:
        import triton.compiler as compiler
        from triton.compiler.compiler import CompiledKernel
    except ImportError:
        return False
    # a kernel already loaded has nothing to build: its launches go straight through
    _unlock_around(CompiledKernel, "_init_handles", hold,
                   when=lambda kernel: getattr(kernel, "module", None) is None)
    return _unlock_around(compiler, "compile", hold)


def _unlock_around(owner: Any, name: str, hold: SharedHold, when: Callable[..., bool] = lambda *a: True) -> bool:
    """Replace `owner.name` with a wrapper that runs it under `hold.compiling()` (when `when(*args)`
    says so). Wraps once; False when `owner` has no such attribute."""
    def make(original):
        def unlocked(*args, **kwargs):
            if not when(*args):
                return original(*args, **kwargs)
            with hold.compiling():
                return original(*args, **kwargs)
        return unlocked

    return wrap_once(owner, name, "_kernelwright_unlocked", make)


def compile_configs_in_parallel(released: Callable[[], ContextManager], threads: int) -> bool:
    """Wrap `Autotuner.prune_configs` (called once per new key, right before the configs are
    benchmarked) so that the configs it returns are compiled `threads` at a time inside
    `released()` (the GPU lock let go). False when this Triton cannot compile asynchronously,
    or when `threads` is 1 (nothing is changed then)."""
    if threads <= 1 or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    try:
        from triton.runtime import _async_compile
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False

    def make(original):
        def prune_configs(self, kwargs, *rest):
            configs = original(self, kwargs, *rest)
            try:
                if _worth_compiling_ahead(self, configs, kwargs) and _async_compile.active_mode.get() is None:
                    _compile_all(self, configs, kwargs, released, threads, _async_compile.AsyncCompileMode)
            except Exception:  # noqa: BLE001 - a head start only: the autotuner compiles what is missing
                pass
            return configs
        return prune_configs

    return wrap_once(Autotuner, "prune_configs", "_kernelwright_parallel", make)


def yield_at_launches(hold: SharedHold) -> bool:
    """Wrap the launch path of every Triton JIT function (`JITFunction.run`, which autotuners and
    heuristics reach too) so a shared holder checks for a waiting timing turn before each launch.
    Returns False when this Triton has no such class."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False

    def make(original):
        def run(self, *args, **kwargs):
            hold.yield_if_timer_waits()
            return original(self, *args, **kwargs)
        return run

    return wrap_once(JITFunction, "run", "_kernelwright_yields", make)


def count_launches(counter: LaunchCounter) -> None:
    """Every launch (`JITFunction.run`, interpreted ones too; autotuners and heuristics reach it)
    is counted by `counter`, which also learns of every autotuner made from now on."""
    register_autotuners(counter.autotuners)
    classes = []
    from triton.runtime.jit import JITFunction

    classes.append(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    except ImportError:
        pass
    counter = counter
    for cls in classes:
        original = cls.run

        def run(self, *args, _original=original, **kwargs):
            if not kwargs.get("warmup", False) and counter._record(self, args, kwargs):
                profiler = counter.profiler  # (None but for the one recorded call of a profile)
                if profiler is not None:
                    return profiler.launch(self, _original, args, kwargs)
            return _original(self, *args, **kwargs)

        cls.run = run


def register_autotuners(tuners: weakref.WeakSet) -> None:
    """Wrap `Autotuner.__init__`: every autotuner made from now on joins `tuners`, and one that did
    not state its own benchmarker gets a TuningBench. Nothing without Triton's autotuner."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return
    init = Autotuner.__init__

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
