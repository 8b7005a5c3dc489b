"""How autotuners tune inside a judge child: on a short budget of their own (the same on both
sides), shorter still while checks share the GPU, and at a timing turn only among the configs the
checks found fastest. Installed into Triton's `Autotuner` class for the whole process."""

from __future__ import annotations

import weakref
from typing import Any

from ..common.knobs import env_numbers


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


def set_checking(checking: bool) -> None:
    """Whether the request being answered shares the GPU (a check) or has it alone."""
    _checking[0] = checking


def forget_tuning(tuners: weakref.WeakSet) -> int:
    """Drop every autotuner's chosen configs: the next call at each shape benchmarks its configs
    again (its shortlist from the checks, where it has one). Perf shapes are first run (compiled,
    autotuned) while other workers share the GPU; the timed choice must come from a run with the
    GPU to itself."""
    for tuner in list(tuners):
        getattr(tuner, "cache", {}).clear()
        by_key = _check_shortlists.get(tuner)
        if by_key:
            tuner._kernelwright_shortlist = by_key
    return len(tuners)


def tuned_configs(tuners: weakref.WeakSet) -> dict[str, str]:
    """Each autotuned kernel's current choice, by kernel name: a reference timed against itself can
    come out 20% apart when the two sides settle on different configs."""
    chosen = {}
    for tuner in list(tuners):
        best = getattr(tuner, "best_config", None)
        if best is not None:
            name = getattr(getattr(tuner, "base_fn", None), "__name__", "kernel")
            chosen[name] = str(best)
    return chosen
