"""Compatible stand-ins for the GEAK-eval helper modules that benchmark files import.

GEAK-eval's perf scripts import `geak_eval.perf.performance_utils` and its ROCm tests import
`geak_eval.perf.ROCm.performance_utils_pytest`; neither ships with the benchmark data. kernelwright
provides its own implementation of the names they use. In the judge they do not time anything:
kernelwright's own timing protocol does. `PytestBenchmarker.run_benchmark` hands the operation it
was given back to the judge (by raising `CapturedOp`), so a ROCm perf test becomes one perf case.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, Callable


class CapturedOp(Exception):
    """Raised by `PytestBenchmarker.run_benchmark`: carries the callable that would be timed."""

    def __init__(self, op: Callable[[], Any], params: dict | None) -> None:
        super().__init__("captured the operation to time")
        self.op = op
        self.params = params or {}


@dataclass
class do_bench_config:  # noqa: N801 - the name GEAK-eval's files import
    warm_up: int = 25
    repetition: int = 100
    grad_to_none: Any = None
    quantiles: Any = None
    return_mode: str = "median"


class Performance_Metrics:  # noqa: N801 - the name GEAK-eval's perf scripts subclass
    """Base class of TritonBench perf scripts: they fill `input_tensors` in `get_input_tensors`
    and define `to_cuda`, `call_op`, `call_op_ref`, `get_gbps`, `get_tflops`."""

    def __init__(self, op_name: str, dtype=None, is_backward: bool = False, **kwargs) -> None:
        self.op_name = op_name
        self.dtype = dtype
        self.is_backward = is_backward
        self.kwargs = kwargs
        self.input_tensors: list = []
        self.do_bench_config = do_bench_config()

    def get_do_bench_config(self, warmup: int = 25, rep: int = 100) -> None:
        self.do_bench_config = do_bench_config(warm_up=warmup, repetition=rep)

    def to_cuda(self, input_tensor):
        import torch

        if isinstance(input_tensor, torch.Tensor):
            return input_tensor.cuda()
        if isinstance(input_tensor, (tuple, list)):
            return type(input_tensor)(self.to_cuda(t) for t in input_tensor)
        return input_tensor

    def get_runtime(self, op: Callable[[], Any]) -> float:
        import triton

        return triton.testing.do_bench(op, warmup=self.do_bench_config.warm_up,
                                       rep=self.do_bench_config.repetition, return_mode="median")

    def run_benchmark(self):  # the judge times instead; kept for scripts run by hand
        results = []
        for tensor in self.input_tensors:
            args = self.to_cuda(tensor)
            ms = self.get_runtime(lambda: self.call_op(args))
            results.append({"ms": ms})
        return results


class PytestBenchmarker:
    """ROCm tests build one per perf parametrization and call `run_benchmark`."""

    def __init__(self, op_callable: Callable[[], Any], op_name: str = "", config: Any = None, **kwargs) -> None:
        self.op_callable = op_callable
        self.op_name = op_name
        self.config = config

    def run_benchmark(self, current_params_dict: dict | None = None, gbps_calculator=None,
                      tflops_calculator=None, **kwargs):
        raise CapturedOp(self.op_callable, current_params_dict)


def save_all_benchmark_results(output_directory: str) -> None:
    """Nothing to save: the judge keeps its own measurements."""


def install(extra: dict[str, types.ModuleType] | None = None) -> None:
    """Register the stand-in modules under GEAK-eval's import names (and any extra modules)."""
    def module(name: str, **attrs) -> types.ModuleType:
        mod = sys.modules.get(name)
        if mod is None or not getattr(mod, "__kernelwright_compat__", False):
            mod = types.ModuleType(name)
            mod.__kernelwright_compat__ = True
            mod.__path__ = []  # a package, so that submodules resolve
            sys.modules[name] = mod
        for key, value in attrs.items():
            setattr(mod, key, value)
        return mod

    module("geak_eval")
    module("geak_eval.perf", performance_utils=None)
    utils = module("geak_eval.perf.performance_utils", Performance_Metrics=Performance_Metrics,
                   do_bench_config=do_bench_config)
    sys.modules["geak_eval.perf"].performance_utils = utils
    module("geak_eval.perf.ROCm")
    module("geak_eval.perf.ROCm.performance_utils_pytest", PytestBenchmarker=PytestBenchmarker,
           do_bench_config=do_bench_config, save_all_benchmark_results=save_all_benchmark_results)
    for name in ("geak_eval.data", "geak_eval.data.TritonBench", "geak_eval.data.TritonBench.data",
                 "geak_eval.data.TritonBench.data.TritonBench_G_v1"):
        module(name)
    for name, mod in (extra or {}).items():
        sys.modules[name] = mod


class Unavailable(RuntimeError):
    """Code called a function of a module that is only a stand-in here."""


def unavailable_module(name: str, why: str) -> types.ModuleType:
    """A module whose every attribute is a function that raises: stands in for the golden module
    inside a candidate's process, where reference code must never run."""
    mod = types.ModuleType(name)

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)

        def unavailable(*args, **kwargs):
            raise Unavailable(f"{name}.{attr} is not available here: {why}")

        return unavailable

    mod.__getattr__ = __getattr__
    return mod
