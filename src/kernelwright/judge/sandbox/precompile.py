"""Compile an autotuner's configs side by side, before it tries them one by one.

Triton's autotuner, at every new key, runs each config in turn, and a config's first run
compiles it: one process compiles them one after another. A file that declares many configs
then spends minutes compiling (on the H200, TritonBench's triton_linear_activation took 144 s
for 98 configs in its golden test and 80-89 s again at each of three perf shapes;
int8_dequant_matmul, 401 configs, did not finish its golden test in ten minutes), and holds a
worker for all of it. Triton (3.4 and later) can hand compilations to an executor
(`AsyncCompileMode`): here, just before the autotuner benchmarks, every config it is about to try
is compiled by a thread pool, with the GPU lock let go (compiling is CPU work). The autotuner then
finds each kernel compiled. A config that fails to compile is left to the autotuner, which compiles
it again and handles the failure as it always does.

Both sides of a comparison get the same treatment: it changes when a kernel is compiled, never
what is compiled or how it is tuned.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, ContextManager

from ..common.knobs import env_numbers

# Threads per process. Workers' processes compile at the same time as each other, so one
# process does not take every core; KERNELWRIGHT_COMPILE_THREADS=1 turns this off.
DEFAULT_THREADS = max(1, min(8, (os.cpu_count() or 2) // 2))


def compile_threads_from_env() -> int:
    return int(env_numbers("KERNELWRIGHT_COMPILE_THREADS", (DEFAULT_THREADS,), 1, 256, whole=True)[0])


def _worth_compiling_ahead(tuner: Any, configs: list, kwargs: dict) -> bool:
    """Only a real benchmark of several configs: a launch (`grid` given, not a warm-up) with the
    call's positional arguments known."""
    return (len(configs) > 1 and kwargs.get("warmup") is False and "grid" in kwargs
            and getattr(tuner, "nargs", None) is not None)


def _compile_all(tuner: Any, configs: list, kwargs: dict, released: Callable[[], ContextManager],
                 threads: int, async_mode: Callable) -> None:
    from concurrent.futures import ThreadPoolExecutor

    args = tuple(tuner.nargs.values())  # the autotuner's run() zipped them with its arg names, in order
    with contextlib.ExitStack() as stack:
        stack.enter_context(released())
        pool = stack.enter_context(ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kw-compile"))
        # entered last, left first: its exit waits for every compilation and caches the kernels
        stack.enter_context(async_mode(pool, ignore_errors=True))
        for config in configs:
            meta = config.all_kwargs()
            if kwargs.keys() & getattr(config, "kwargs", {}).keys():
                continue  # the autotuner rejects such a config itself, with its own message
            try:
                tuner.fn.run(*args, **{**kwargs, **meta, "warmup": True})
            except Exception:  # noqa: BLE001 - left to the autotuner, which reports it in context
                continue
