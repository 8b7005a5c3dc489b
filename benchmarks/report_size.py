"""How long `kernelwright report` takes and how much the file weighs on a bench-sized run: a
synthetic run directory of 30 tasks x 4 runs x 5 iterations (with timings, profiles, a tuning pass
and two LLM calls per fix), built with the store's own API (RunStore, Attempt, Reply), never by
hand-written SQL. Issue 31's bound: written in under 10 s, under 5 MB.

    PYTHONPATH=src python benchmarks/report_size.py [--out DIR] [--task-count 30 --runs 4 --iterations 5]

Prints one JSON line: seconds and cpu_seconds (the command in this process, its own imports
included, matplotlib's not), bytes, plots.
`build_run` is also what tests/report/ use for a timed run and for a second run to compare.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

KINDS = ("compile_error", "runtime_error", "wrong_values", "timeout", "shape_mismatch")
CODE = '''import torch
import triton
import triton.language as tl


@triton.jit
def {name}_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * {scale} + 1.0, mask=mask)


def {name}(x):
    out = torch.empty_like(x)
    n = x.numel()
    {name}_kernel[(triton.cdiv(n, {block}),)](x, out, n, BLOCK={block}, num_warps={warps})
    return out
'''


def _code(name: str, rng: random.Random) -> str:
    return CODE.format(name=name, scale=round(rng.uniform(0.5, 2), 3), block=rng.choice((256, 512, 1024, 2048)),
                       warps=rng.choice((2, 4, 8)))


def _timings(rng: random.Random, speed: float):
    from kernelwright.agent.memory import CaseTiming

    out = []
    for size in (1 << 12, 1 << 16, 1 << 20, 1 << 24):
        ref = size * 4e-7 + 0.005
        s = speed * rng.uniform(0.85, 1.15)
        out.append(CaseTiming(f"n={size}", ref, ref / s, s, (s * 0.97, s * 1.03), ref * 0.3))
    return tuple(out)


def _profile(speed: float) -> dict:
    side = {"time_ms": 0.2 / speed, "bytes_min": 8 << 20, "bandwidth_frac": min(0.95, 0.3 * speed),
            "flops": None, "flop_frac": None, "launches": [], "diagnosis": []}
    return {"level": "basic", "case": 3, "label": "n=16777216", "device": "NVIDIA H200 (synthetic)",
            "peak_bandwidth_tbs": 4.8, "candidate": side, "reference": dict(side, time_ms=0.2, bandwidth_frac=0.3)}


def _attempt(name: str, run: int, index: int, rng: random.Random, solved_p: float, mode: str):
    from kernelwright.agent.memory import Attempt

    passed = rng.random() < solved_p
    speed = rng.lognormvariate(0.1, 0.4) if passed else None
    kind = "passed" if passed else rng.choice(KINDS)
    return Attempt(name, run, index, mode, 0, index - 1 if index else None, _code(name, rng),
                   strategy="Fuse the loads; one program per block of elements.",
                   reflection="" if index == 0 else "The mask was computed on the wrong axis; " * 5,
                   candidate_id=f"{name}-r{run}-a{index}", kind=kind, stage="passed" if passed else "call",
                   call=passed or kind != "compile_error", correct=passed, speedup=speed,
                   speedup_geomean=speed, speedup_ci95=(speed * 0.97, speed * 1.03) if speed else None,
                   timings=_timings(rng, speed) if speed else (), tokens=1800, cost_usd=0.012,
                   reason="passed" if passed else f"case 3: {kind.replace('_', ' ')} at offset 4096 " + "x" * 200,
                   created=time.time(), profile=_profile(speed) if speed else {})


def _reply(role: str, rng: random.Random):
    from kernelwright.agent.calls import Reply

    return Reply(role, [{"role": "user", "content": "prompt " * 200}], "answer " * 100, "openai/synthetic",
                 1200, 600 if role != "reflect" else 200, 0.006, False, "stop", rng.uniform(2, 20))


def build_run(out: Path, tasks: int = 30, runs: int = 4, iterations: int = 5, seed: int = 0,
              tune: bool = True, prefix: str = "task") -> Path:
    """A finished bench run directory with metrics.json and results.jsonl written by bench's own code."""
    from kernelwright.agent.app import RunSpec, open_run
    from kernelwright.agent.budget import Limits
    from kernelwright.agent.loop import AgentSettings
    from kernelwright.agent.results import write_outputs
    from kernelwright.agent.run_metrics import write_metrics

    rng = random.Random(seed)
    names = [f"{prefix}_{i:02d}" for i in range(tasks)]
    starts = {n: _code(n, rng) for n in names}
    spec = RunSpec("bench", tuple(f"/nonexistent/{n}.py" for n in names), "openai/synthetic",
                   AgentSettings(iterations=iterations, runs=runs, seed=seed, tune=tune), Limits(), Limits(),
                   starts, suite="synthetic", device="cuda", perf=True, task_names=tuple(names))
    store, spec = open_run(out, spec, resume=False)
    for t, name in enumerate(names):
        solved_p = 0.15 + 0.7 * (t % 5) / 4
        for run in range(runs):
            for index in range(iterations):
                mode = "generate" if index == 0 else rng.choice(("fix", "optimize"))
                store.add_attempt(_attempt(name, run, index, rng, solved_p, mode))
                for role in (("reflect", mode) if index else (mode,)):
                    store.add_call(name, run, index, _reply(role, rng))
            if tune:
                store.add_attempt(_attempt(name, run, iterations, rng, solved_p, "tune"))
            store.end_task_run(name, run, "all iterations done", None)
    write_metrics(store, spec, judge={"wall_s": 600.0, "workers": 8, "candidates": tasks * runs * iterations,
                                      "utilization": 0.8, "idle_fraction": 0.2})
    write_outputs(store, names, runs)
    store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="where the run directory goes (default: a temporary one)")
    parser.add_argument("--task-count", type=int, default=30, help="synthetic tasks (--tasks names tasks elsewhere)")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()
    from typer.testing import CliRunner

    from kernelwright.cli import app

    with tempfile.TemporaryDirectory() as tmp:
        run = build_run((args.out or Path(tmp)) / "run", args.task_count, args.runs, args.iterations)
        import matplotlib  # noqa: F401 - the imports are not the report's time

        started, cpu = time.perf_counter(), time.process_time()
        result = CliRunner().invoke(app, ["report", str(run), "--json"])
        # the process's CPU time beside the wall time: on a shared machine the wall time is
        # mostly other processes' (both are printed; the bound is on a machine to itself)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        if result.exit_code != 0:
            raise SystemExit(f"report failed ({result.exit_code}): {result.output}")
        data = json.loads(result.stdout)
        html = Path(data["html"]).read_text()
        print(json.dumps({"tasks": args.task_count, "runs": args.runs, "iterations": args.iterations,
                          "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2), "bytes": data["bytes"], "mb": round(data["bytes"] / 1e6, 3),
                          "plots": html.count('<figure class="plot"'), "under_10_s": seconds < 10,
                          "under_5_mb": data["bytes"] < 5e6}))


if __name__ == "__main__":
    main()
