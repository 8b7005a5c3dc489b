"""An autotuner's configs are compiled side by side before it benchmarks them (with the GPU lock let
go), through Triton's own asynchronous compilation; the autotuner's choice is untouched. Driven here
with a stand-in kernel whose compile step sleeps: the CPU machine has no GPU to compile for."""

import contextlib
import inspect
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

pytest.importorskip("triton.runtime._async_compile")

from triton.runtime import _async_compile  # noqa: E402
from triton.runtime.autotuner import Autotuner  # noqa: E402

from kernelwright.judge.sandbox import precompile, triton_hooks  # noqa: E402

COMPILE_S = 0.3


class Config:
    def __init__(self, **kwargs):
        self.kwargs = kwargs

    def all_kwargs(self):
        return {**self.kwargs, "num_warps": 4}


class FakeKernel:
    """Compiles like JITFunction.run under AsyncCompileMode: hands the compile to the mode."""

    def __init__(self, fail: set[int] = frozenset()):
        self.compiled, self.cached, self.calls, self.fail = [], {}, [], fail
        self.lock = threading.Lock()

    def run(self, *args, grid, warmup, **kwargs):
        self.calls.append((args, warmup, kwargs))
        key = kwargs["BLOCK"]
        mode = _async_compile.active_mode.get()
        assert mode is not None and warmup

        def compile_():
            time.sleep(COMPILE_S)
            if key in self.fail:
                raise RuntimeError("PTXASError: out of registers")
            with self.lock:
                self.compiled.append((key, threading.current_thread().name))
            return f"kernel {key}"

        extra = (lambda *_: None,) if "cleanup_fn" in inspect.signature(mode.submit).parameters else ()  # Triton 3.7+
        return mode.submit(key, compile_, lambda kernel: self.cached.__setitem__(key, kernel), *extra)


class FakeTuner:
    early_config_prune = perf_model = None

    def __init__(self, n, fail=frozenset()):
        self.configs = [Config(BLOCK=16 << i) for i in range(n)]
        self.fn = FakeKernel(fail)
        self.nargs = {"x": "X", "n": 7}


@pytest.fixture
def installed(monkeypatch):
    monkeypatch.setattr(Autotuner, "prune_configs", Autotuner.prune_configs)  # restored afterwards
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    events = []

    @contextlib.contextmanager
    def released():
        events.append("let go")
        yield
        events.append("taken again")

    assert triton_hooks.compile_configs_in_parallel(released, threads=4)
    return events


@pytest.mark.serial  # four 0.3 s compiles must finish within 0.9 s of wall clock
def test_configs_are_compiled_in_parallel_with_the_lock_let_go(installed):
    tuner = FakeTuner(4)
    start = time.monotonic()
    configs = Autotuner.prune_configs(tuner, {"grid": (1,), "warmup": False, "GROUP": 8})
    took = time.monotonic() - start
    assert configs == tuner.configs  # what is tried, and in what order, is the autotuner's
    assert sorted(tuner.fn.cached) == [16, 32, 64, 128]  # every kernel compiled and cached
    assert took < 4 * COMPILE_S * 0.75, f"{took:.2f} s: not compiled side by side"
    assert {name.split("_")[0] for _, name in tuner.fn.compiled} == {"kw-compile"}
    assert installed == ["let go", "taken again"]  # once around the batch, after every compile
    args, warmup, kwargs = tuner.fn.calls[0]
    assert args == ("X", 7) and warmup is True and kwargs["GROUP"] == 8 and kwargs["num_warps"] == 4


def test_a_config_that_fails_to_compile_is_left_to_the_autotuner(installed):
    tuner = FakeTuner(3, fail={32})
    configs = Autotuner.prune_configs(tuner, {"grid": (1,), "warmup": False})
    assert configs == tuner.configs and sorted(tuner.fn.cached) == [16, 64]


@pytest.mark.parametrize("n,kwargs", [
    (1, {"grid": (1,), "warmup": False}),   # one config: nothing to tune
    (3, {"grid": (1,), "warmup": True}),    # the autotuner's own warm-up path
    (3, {"warmup": False}),                 # not a launch
    (3, {"grid": (1,), "warmup": False, "BLOCK": 8}),  # conflicts: the autotuner's own error
])
def test_nothing_is_compiled_ahead_outside_a_real_benchmark(installed, n, kwargs):
    tuner = FakeTuner(n)
    assert Autotuner.prune_configs(tuner, kwargs) == tuner.configs
    assert tuner.fn.cached == {}


def test_one_thread_or_the_interpreter_changes_nothing(monkeypatch):
    monkeypatch.setattr(Autotuner, "prune_configs", Autotuner.prune_configs)
    original = Autotuner.prune_configs
    assert not triton_hooks.compile_configs_in_parallel(contextlib.nullcontext, threads=1)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert not triton_hooks.compile_configs_in_parallel(contextlib.nullcontext, threads=4)
    assert Autotuner.prune_configs is original


def test_the_thread_count_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("KERNELWRIGHT_COMPILE_THREADS", raising=False)
    assert precompile.compile_threads_from_env() == precompile.DEFAULT_THREADS
    monkeypatch.setenv("KERNELWRIGHT_COMPILE_THREADS", "1")
    assert precompile.compile_threads_from_env() == 1
    for bad in ("0", "many", "1.5", "1000"):
        monkeypatch.setenv("KERNELWRIGHT_COMPILE_THREADS", bad)
        with pytest.raises(ValueError, match="KERNELWRIGHT_COMPILE_THREADS"):
            precompile.compile_threads_from_env()


REAL_TRITON = textwrap.dedent("""
    import os, sys, threading, warnings
    warnings.simplefilter("ignore")
    import triton
    import triton.language as tl
    import triton.compiler
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver
    from triton.runtime.jit import MockTensor

    class Driver:  # compiles for an H100/H200 without one: no launch happens here
        def get_current_device(self): return 0
        def get_current_stream(self, device=None): return 0
        def get_current_target(self): return GPUTarget("cuda", 90, 32)
        def get_active_torch_device(self): return None

    driver.set_active(Driver())
    threads = []
    original = triton.compiler.compile

    def compile(*args, **kwargs):  # where the judge's own wrapper sits (the lock let go)
        threads.append(threading.current_thread().name)
        return original(*args, **kwargs)

    triton.compiler.compile = compile
    import contextlib
    from kernelwright.judge.sandbox.triton_hooks import compile_configs_in_parallel
    assert compile_configs_in_parallel(contextlib.nullcontext, threads=2)

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (64, 128) for w in (2, 4)],
                     key=["n"])
    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    t = MockTensor(tl.float32)
    add.nargs = dict(zip(add.arg_names, (t, t, t, 4096)))  # as Autotuner.run sets them
    configs = add.prune_configs({"grid": (1,), "warmup": False})
    cache = add.fn.device_caches[0][0]
    print(len(configs), len(cache), sorted(set(name.split("_")[0] for name in threads)))
""")


def test_a_real_autotuner_finds_its_configs_compiled(tmp_path):
    """Triton's own JIT path, end to end on the CPU (compiling for sm_90 needs no GPU): the
    autotuner's prune step returns its four configs, and all four kernels are then in the kernel's
    cache, compiled on the pool's threads."""
    script = tmp_path / "real.py"  # @triton.jit needs its source in a file
    script.write_text(REAL_TRITON)
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "0"}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["4", "4", "['kw-compile']"], out.stdout + out.stderr[-3000:]
