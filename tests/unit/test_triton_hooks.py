"""What the judge installs into Triton inside its processes: autotuners tune on a shorter budget
(on both sides alike; a file that states its own benchmarker or budget keeps it), and every launch
path passes the hook that lets a waiting timing turn in. Each test runs in a fresh interpreter:
the hooks patch Triton's classes for the whole process."""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import warnings
    warnings.simplefilter("ignore")
    import triton
    import triton.language as tl
    from kernelwright.judge.sandbox.autotuning import TuningBench
    from kernelwright.judge.sandbox import triton_hooks
    from kernelwright.judge.sandbox.launches import LaunchCounter

    triton_hooks.count_launches(LaunchCounter(None))

    @triton.jit
    def k(x_ptr):
        pass

    def tuner(n=1, **kwargs):
        configs = [triton.Config({}, num_warps=w) for w in (1, 2, 4, 8, 16, 32)[:n]]
        return triton.autotune(configs=configs, key=[], **kwargs)(k)

    def own(kernel_call, quantiles):
        return [1.0]

    bench, graph = tuner(6)._do_bench, tuner(use_cuda_graph=True)._do_bench
    print(isinstance(bench, TuningBench) and not bench.cuda_graph and bench.n_configs == 6)
    print(isinstance(graph, TuningBench) and graph.cuda_graph and graph.n_configs == 1)
    print(not isinstance(tuner(use_cuda_graph=True, rep=50)._do_bench, TuningBench))
    print(tuner(do_bench=own)._do_bench is own)
""")


def test_default_and_cuda_graph_tuners_get_the_short_budget_and_stated_ones_are_kept(tmp_path):
    script = tmp_path / "tuners.py"  # @triton.jit needs its source in a file
    script.write_text(SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"] * 4, out.stdout + out.stderr


LAUNCH_SCRIPT = textwrap.dedent("""
    import triton
    import triton.language as tl
    from kernelwright.judge.sandbox.triton_hooks import yield_at_launches

    class Hold:
        looked = 0

        def yield_if_timer_waits(self):
            Hold.looked += 1

    assert yield_at_launches(Hold())
    assert yield_at_launches(Hold())  # installed once: a second call does not wrap it again

    @triton.jit
    def k(x_ptr):
        pass

    @triton.autotune(configs=[triton.Config({}, num_warps=4)], key=[])
    @triton.jit
    def tuned(x_ptr):
        pass

    for kernel in (k, tuned):
        try:
            kernel[(1,)](None)  # no GPU here: the launch itself fails after the hook ran
        except Exception:
            pass
    print(Hold.looked)
""")


def test_every_launch_path_passes_the_yield_hook_once(tmp_path):
    """Plain launches and autotuned ones (which reach `JITFunction.run` too) look for a waiting
    timer before launching, once per launch."""
    script = tmp_path / "launches.py"
    script.write_text(LAUNCH_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2"], out.stdout + out.stderr


def test_checks_tune_on_a_small_budget_and_timing_turns_on_the_full_one(monkeypatch):
    """Configs picked during a check are dropped at the timing turn and tuned again alone, so a
    check (a request sharing the GPU) tunes on 1 + 3 ms per config; inside the turn, 3 + 12 ms,
    and an autotuner of many configs gets less per config, so that one tuning stays bounded."""
    import triton.testing

    from kernelwright.judge.sandbox import autotuning

    seen = []
    monkeypatch.setattr(triton.testing, "do_bench",
                        lambda fn, warmup, rep, quantiles: seen.append(("bench", warmup, rep)) or 1.0)
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph",
                        lambda fn, rep, quantiles: seen.append(("graph", rep)) or 1.0)
    monkeypatch.setattr(autotuning, "_checking", [True])
    autotuning.TuningBench(4)(None, None)
    autotuning.TuningBench(4, cuda_graph=True)(None, None)
    autotuning._checking[0] = False
    autotuning.TuningBench(4)(None, None)
    autotuning.TuningBench(4, cuda_graph=True)(None, None)
    assert seen == [("bench", autotuning.CHECK_TUNING_WARMUP_MS, autotuning.CHECK_TUNING_REP_MS),
                    ("graph", autotuning.CHECK_TUNING_REP_MS),
                    ("bench", autotuning.TUNING_WARMUP_MS, autotuning.TUNING_REP_MS), ("graph", autotuning.TUNING_REP_MS)]
    assert autotuning.CHECK_TUNING_REP_MS < autotuning.TUNING_REP_MS
    # many configs: the rep shrinks so that one tuning stays within TUNING_TOTAL_MS, down to a floor
    seen.clear()
    for n in (48, 100000):
        autotuning.TuningBench(n)(None, None)
    (_, w48, r48), (_, w_many, r_many) = seen
    assert r48 * 48 == autotuning.TUNING_TOTAL_MS and r48 < autotuning.TUNING_REP_MS
    assert w48 / r48 == autotuning.TUNING_WARMUP_MS / autotuning.TUNING_REP_MS
    assert r_many == autotuning.TUNING_MIN_REP_MS


def test_the_timing_turn_tuning_budget_can_be_set_for_measurements(monkeypatch):
    import pytest

    from kernelwright.judge.sandbox.autotuning import _tuning_ms_from_env

    monkeypatch.delenv("KERNELWRIGHT_TUNING_MS", raising=False)
    assert _tuning_ms_from_env() == (3.0, 12.0)
    monkeypatch.setenv("KERNELWRIGHT_TUNING_MS", "5,25")
    assert _tuning_ms_from_env() == (5.0, 25.0)
    for bad in ("10", "a,b", "0,10", "5,5000", "1,2,3"):
        monkeypatch.setenv("KERNELWRIGHT_TUNING_MS", bad)
        with pytest.raises(ValueError, match="WARMUP,REP in milliseconds"):
            _tuning_ms_from_env()


SHORTLIST = textwrap.dedent("""
    import warnings
    warnings.simplefilter("ignore")
    import triton
    import triton.language as tl
    from kernelwright.judge.sandbox import autotuning, triton_hooks
    from kernelwright.judge.sandbox import triton_hooks
    from kernelwright.judge.sandbox.launches import LaunchCounter

    assert triton_hooks.shortlist_at_timing_turns()
    counter = LaunchCounter(None)
    triton_hooks.count_launches(counter)

    @triton.autotune(configs=[triton.Config({"B": b}) for b in range(20)], key=["n"])
    @triton.jit
    def k(x_ptr, n, B: tl.constexpr):
        pass

    tried = []
    k.fn.run = lambda *args, **kwargs: tried.append(kwargs["B"])  # no GPU: the launch is a record
    # the checks' rankings at the two keys (4096: 0, 17, 14, 11, 8, 5, 2, 19, ...; 64: B = 0..7)
    check_ms = {4096: {b: 1.0 + (b * 7) % 20 for b in range(20)}, 64: {b: 1.0 + b for b in range(20)}}
    alone_ms = {b: 50.0 - b for b in range(20)}  # alone, the largest B is fastest
    n_now = [0]

    def bench(kernel_call, quantiles):
        kernel_call()
        ms = (check_ms[n_now[0]] if autotuning._checking[0] else alone_ms)[tried[-1]]
        return [ms, ms, ms]

    k._do_bench = bench
    autotuning._checking[0] = True
    for n in (4096, 64):             # checks tune all 20 configs at two keys
        n_now[0] = n
        k[(1,)](0, n)
    tried.clear()
    autotuning._checking[0] = False
    counter.forget_tuning()          # the timing turn begins
    k[(1,)](0, 4096)                 # a key the checks tuned: its own shortlist
    print(sorted(set(tried)))
    print(k.best_config.kwargs["B"])
    tried.clear()
    k[(1,)](0, 128)                  # a key they did not: every key's shortlist together
    print(sorted(set(tried)))
    print(k.best_config.kwargs["B"])
""")


def test_timing_turns_tune_again_among_the_checks_fastest_configs(tmp_path):
    """At the timing turn an autotuner of 20 configs tries, at a key the checks tuned, only the 8
    fastest there; at another key, those that were among the 8 fastest at any key the checks
    tuned. The choice among them is made alone."""
    script = tmp_path / "shortlist.py"
    script.write_text(SHORTLIST)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TRITON_INTERPRET": "0"})
    assert out.returncode == 0, out.stderr[-3000:]
    tried, best, tried_new_key, best_new_key = out.stdout.split("\n")[:4]
    at_4096 = set(sorted(range(20), key=lambda b: (b * 7) % 20)[:8])
    assert eval(tried) == sorted(at_4096)  # noqa: S307 - our script's output
    assert int(best) == max(at_4096)
    union = at_4096 | set(range(8))
    assert eval(tried_new_key) == sorted(union) and len(union) < 20  # noqa: S307
    assert int(best_new_key) == max(union)
