"""Adapters for GEAK-eval's benchmarks, read from the user's own checkout (never vendored here):
TritonBench-revised here, ROCm in `geak_rocm.py`, the file conventions both share in
`geak_source.py`, and `load_suite` for either.

TritonBench-revised (`geak_eval/data/TritonBench/data/TritonBench_G_v1/*.py`, 184 tasks): each file
is a golden Triton implementation, a separator line of 146 `#`, and a `test_*()` function returning
a dict of outputs. A candidate is kernel code like the part before the separator; the judge appends
the golden test code to it, exactly as GEAK-eval does, and compares the candidate's result dict with
the golden one (dtype-aware tolerances, every seed, bitwise-stable reruns). Performance cases are
the inputs of the task's `*_perf.py` script, timed by kernelwright's protocol.
"""

from __future__ import annotations

import contextlib
import io
import sys
import types
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from ..tasks.model import Case, EntryPoint, Task
from . import geak_compat, geak_perf_inputs
from .adapter import (SuiteError, cache_file, collect_forked, defined_names, exec_module, exec_source,
                      flatten_results, fork_json, from_ref, in_forked_process, json_cached, load_each,
                      required_names, seed_everything, store_json)
from .geak_rocm import rocm_task
from .geak_source import (GOLDEN_PACKAGE, TRITONBENCH_DIR, TRITONBENCH_JSON, TRITONBENCH_PERF_DIR, checkout_root,
                          geak_task, instructions, portable_libdevice, rocm_files, split_source, strip_test_calls,
                          tritonbench_files)


@dataclass
class GeakImpl:
    """An implementation (golden or candidate) loaded together with the task's test code."""

    module: types.ModuleType
    test_fn: Callable[..., Any]
    stem: str
    is_reference: bool
    perf_script_path: Path | None = None
    _perf: Any = field(default=None, repr=False)
    _one_by_one: bool | None = field(default=None, repr=False)  # can inputs be built per case?
    _unfollowable: dict = field(default_factory=dict, repr=False)  # case index -> why not
    _eager: Any = field(default=None, repr=False)  # every case's inputs, the script's own way

    def perf_script(self) -> Any:
        """The perf script's `performance_metrics` object (made once, no inputs yet)."""
        if self._perf is None:
            # Perf scripts import the golden module under its package name as `<op>_ref`, and some
            # `call_op`s call it (apply_penalty's second `call_op` times the golden). In each process
            # both names resolve to that process's own implementation: a candidate's process never
            # holds reference code, and the candidate side always times the candidate.
            geak_compat.install({self.stem: self.module, f"{GOLDEN_PACKAGE}.{self.stem}": self.module})
            script = exec_module(f"kernelwright_perf_{self.stem}", self.perf_script_path.read_text(),
                                 str(self.perf_script_path))
            self._perf = script.performance_metrics()
        return self._perf

    def perf_inputs(self, index: int, device: str) -> Any:
        """Fresh inputs of perf case `index` on `device`, through the script's `to_cuda`: built for
        that case alone, directly on the device, where the script allows it (geak_perf_inputs),
        else the script's own way (every case on the CPU, once per process, copied per call)."""
        perf = self.perf_script()
        if self._one_by_one is None:
            try:
                self._one_by_one = geak_perf_inputs.suits_one_case(perf)
            except Exception:  # noqa: BLE001 - the eager build below reports real problems
                self._one_by_one = False
        if self._one_by_one and index not in self._unfollowable:
            seed_everything(0)
            try:
                return perf.to_cuda(geak_perf_inputs.one_case(perf, index, device))
            except geak_perf_inputs.Unfollowable as exc:
                self._unfollowable[index] = str(exc)
        if self._eager is None:
            seed_everything(0)
            perf.get_input_tensors()
            self._eager = perf.input_tensors
        # A copy per call where `to_cuda` would not make one (tensors already on the device): an
        # operation that works in place must not see what an earlier call (a probe, say) left.
        return perf.to_cuda(_copied_on(self._eager[index], _device_type(device)))


def _device_type(device: str) -> str:
    return device.split(":")[0]


def _copied_on(value: Any, device_type: str) -> Any:
    """`value` with every tensor on `device_type` cloned (containers rebuilt, the rest shared)."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone() if value.device.type == device_type else value
    if isinstance(value, (list, tuple)):
        items = [_copied_on(v, device_type) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, dict):
        return {k: _copied_on(v, device_type) for k, v in value.items()}
    return value


def _load_tritonbench_impl(stem: str, test_code: str, perf_script: Path | None, operator_names: frozenset[str]):
    def load(path: str, module_name: str) -> GeakImpl:
        kernel_code, _ = split_source(Path(path).read_text())
        module = exec_module(module_name, portable_libdevice(kernel_code), path)
        stripped, test_name = strip_test_calls(test_code, operator_names)
        exec_source(stripped, f"<{stem} test code>", module.__dict__)
        return GeakImpl(module, module.__dict__[test_name], stem, module_name != "candidate", perf_script)

    return load


def _bind_tritonbench(impl: GeakImpl, kind: str, case: Case, gen) -> tuple[Callable, tuple]:
    if kind == "perf":
        perf = impl.perf_script()
        return perf.call_op, (impl.perf_inputs(case.index, str(gen.device)),)
    seed = gen.initial_seed()

    def run_test() -> list:
        seed_everything(seed)
        return flatten_results(impl.test_fn())

    return run_test, ()


def _describe(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return "x".join(map(str, value.shape)) + " " + str(value.dtype).removeprefix("torch.")
    if isinstance(value, (tuple, list)):
        return ", ".join(_describe(v) for v in value)
    return repr(value)[:40]


def _enumerate_perf_inputs(perf_script: str, golden_path: Path | None = None,
                           kernel_code: str = "") -> tuple[tuple[str, ...], str]:
    """Labels of a perf script's inputs, found by running `get_input_tensors` with every tensor
    created on PyTorch's "meta" device (no memory, no GPU). Returns (labels, problem). A script
    that builds inputs with the golden module's own functions (int4_matmul's `quantize_int4`,
    fast_rms_layernorm's `SimpleLayerNorm`) is counted again with that module loaded, in a forked
    process, and the labels are cached by content for the judge's processes."""
    labels, problem, needs_golden = _count_with_stand_in(perf_script)
    if not needs_golden or golden_path is None:
        return labels, problem
    try:
        return tuple(_perf_labels_with_golden(str(perf_script), str(golden_path), kernel_code)), ""
    except Exception as exc:  # noqa: BLE001 - reported with the task, never fatal
        return (), f"could not enumerate the perf script's inputs: {exc}"


@lru_cache(maxsize=None)
def _count_with_stand_in(perf_script: str) -> tuple[tuple[str, ...], str, bool]:
    """The meta-device count with a stand-in for the golden module: (labels, problem, whether
    the script called the golden module, so that only a count with it loaded can tell)."""
    stem = Path(perf_script).stem.removesuffix("_perf")
    stub = geak_compat.unavailable_module(stem, "inputs are only being counted")
    geak_compat.install({stem: stub, f"{GOLDEN_PACKAGE}.{stem}": stub})
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            script = exec_module(f"kernelwright_perf_count_{stem}", Path(perf_script).read_text(), perf_script)
            inputs, _ = geak_perf_inputs.count_inputs(script.performance_metrics())
        return tuple(_describe(x) for x in inputs), "", False
    except geak_compat.Unavailable as exc:
        return (), f"could not enumerate the perf script's inputs: {exc}", True
    except Exception as exc:  # noqa: BLE001 - reported with the task, never fatal
        return (), f"could not enumerate the perf script's inputs: {type(exc).__name__}: {exc}", False
    finally:
        for name in (stem, f"kernelwright_perf_count_{stem}"):
            sys.modules.pop(name, None)


def _golden_labels_cache(perf_script: str, kernel_code: str) -> Path:
    return cache_file("perf-labels", "perf-v1", perf_script, Path(perf_script).read_text(), kernel_code)


def _perf_labels_with_golden(perf_script: str, golden_path: str, kernel_code: str) -> list[str]:
    """`_golden_perf_labels` in a forked process, cached by the content of both files."""
    return json_cached(_golden_labels_cache(perf_script, kernel_code),
                        lambda: in_forked_process(_golden_perf_labels, perf_script, golden_path, kernel_code))


def _prefetch_golden_perf_labels(root: Path, stems: list[str]) -> None:
    """Count, all at once, the perf inputs of scripts that need their golden module to build them
    (their Python loops take up to half a minute each on the meta device): one forked process per
    script, results cached where `_perf_labels_with_golden` finds them. Failures are left for the
    per-task load to report."""
    jobs = []
    for stem in stems:
        perf_script = root / TRITONBENCH_PERF_DIR / f"{stem}_perf.py"
        golden_path = root / TRITONBENCH_DIR / f"{stem}.py"
        if not perf_script.is_file() or not golden_path.is_file():
            continue
        kernel_code, _ = split_source(golden_path.read_text())
        cache = _golden_labels_cache(str(perf_script), kernel_code)
        if cache.is_file():
            continue
        if _count_with_stand_in(str(perf_script))[2]:  # the cheap count says the golden is needed
            jobs.append((cache, fork_json(_golden_perf_labels, str(perf_script), str(golden_path), kernel_code)))
    for cache, (pid, read_end) in jobs:
        try:
            store_json(cache, collect_forked(pid, read_end))
        except (RuntimeError, OSError, ValueError):
            pass


def _golden_perf_labels(perf_script: str, golden_path: str, kernel_code: str) -> list[str]:
    stem = Path(perf_script).stem.removesuffix("_perf")
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        golden = exec_module(f"kernelwright_golden_count_{stem}", portable_libdevice(kernel_code), golden_path)
        geak_compat.install({stem: golden, f"{GOLDEN_PACKAGE}.{stem}": golden})
        script = exec_module(f"kernelwright_perf_count_{stem}", Path(perf_script).read_text(), perf_script)
        inputs, _ = geak_perf_inputs.count_inputs(script.performance_metrics())
    return [_describe(x) for x in inputs]


def tritonbench_task(root: Path, stem: str) -> Task:
    path = root / TRITONBENCH_DIR / f"{stem}.py"
    text = path.read_text()
    kernel_code, test_code = split_source(text)
    info = instructions(str(root / TRITONBENCH_JSON)).get(path.name, {})
    perf_script = root / TRITONBENCH_PERF_DIR / f"{stem}_perf.py"
    notes = []
    if test_code is None:
        raise SuiteError(f"{path}: no 146-# separator between the kernel and its test")
    stripped, _ = strip_test_calls(test_code, defined_names(kernel_code))
    names = required_names(kernel_code, stripped)
    perf_cases: list[Case] = []
    if perf_script.is_file():
        labels, problem = _enumerate_perf_inputs(str(perf_script), path, kernel_code)
        perf_cases = [Case("any", label=f"input {i}: {label}", index=i) for i, label in enumerate(labels)]
        if problem:
            notes.append(problem)
    else:
        perf_script, _ = None, notes.append("no perf script: correctness only")
    return geak_task(
        kernel_code,
        name=stem,
        instruction=info.get("instruction", f"Write the Triton kernels and wrappers of {stem}.").strip(),
        entry_point=EntryPoint(names[0], ", ".join(names)),
        visible_cases=[Case("any", label="golden test function")],
        perf_cases=perf_cases,
        source_path=path,
        difficulty=int(info["difficulty"]) if str(info.get("difficulty", "")).isdigit() else None,
        tags=("tritonbench-revised",),
        ref=f"tritonbench-revised:{root}::{stem}",
        load_impl=_load_tritonbench_impl(stem, test_code, perf_script, defined_names(kernel_code)),
        bind=_bind_tritonbench,
        reference_impl=path,
        suite="tritonbench-revised",
        notes=notes,
    )


ADAPTER_LOADERS = {"tritonbench-revised": from_ref(tritonbench_task), "rocm": from_ref(rocm_task)}


def load_suite(name: str, path: str | Path) -> tuple[list[Task], list[tuple[str, str]]]:
    """All tasks of a GEAK suite in a checkout, and (file, reason) for every file that could not
    become a task: nothing is dropped silently."""
    root = checkout_root(path)
    files, factory = {"tritonbench-revised": (tritonbench_files, tritonbench_task),
                      "rocm": (rocm_files, rocm_task)}[name]
    if name == "tritonbench-revised":
        _prefetch_golden_perf_labels(root, [file.stem for file in files(root)])
    return load_each(factory, root, ((file.stem, file.name) for file in files(root)))
