"""Throughput: time to judge (static + call + correctness) a batch of candidates with warm judge
workers, against a fresh `python` process per candidate (GEAK-eval's way), in the same run.

Candidates are the starter tasks' Triton references, each in several variants whose kernels differ
by a harmless line, so every candidate compiles its own kernels (as distinct LLM candidates do).
Each method gets an empty Triton cache of its own.

usage: PYTHONPATH=src python benchmarks/judge_throughput.py [--variants 4] [--device auto] [--out FILE]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

STARTER = ["vector_add", "softmax", "rmsnorm", "matmul"]


def make_variants(tmp: Path, n: int) -> list[tuple[str, Path]]:
    from kernelwright.tasks import resolve_task

    out = []
    for name in STARTER:
        source = resolve_task(name).triton_reference.read_text()
        for k in range(n):
            # a constant assignment as the first statement of every kernel: new cache key, same code
            variant = re.sub(r"(@triton\.jit\ndef [^\n]*?(?:\n[^\n]*?)*?\):\n)", rf"\1    _variant = {k}\n", source)
            path = tmp / f"{name}_v{k}.py"
            path.write_text(variant)
            out.append((name, path))
    return out


def run_judge(cands, device, per_device, seeds, sandbox="auto"):
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.tasks import resolve_task

    options = JudgeOptions(seeds=len(seeds), seed=seeds[0], perf=False, sandbox=sandbox)
    with JudgePool(device, options=options, workers_per_device=per_device) as pool:
        # the tasks' files readable by confined children from their first fork, as judge_many
        # does for a pool it starts (started before, its spares would be forked again at each
        # worker's first request)
        pool.admit(resolve_task(name) for name, _ in cands)
        t0 = time.perf_counter()
        pool.start()
        warm_s = time.perf_counter() - t0
        jobs = [(resolve_task(name), path) for name, path in cands]
        t0 = time.perf_counter()
        verdicts = pool.judge_many(jobs)
        wall = time.perf_counter() - t0
    setup = sorted(v.sandbox.get("setup_ms", 0.0) for v in verdicts if v.sandbox.get("layers"))
    return wall, warm_s, [v.stage for v in verdicts], setup


def run_fresh(cands, seeds):
    from kernelwright.tasks import resolve_task

    script = ROOT / "benchmarks" / "fresh_process_check.py"
    results = []
    t0 = time.perf_counter()
    for name, path in cands:
        proc = subprocess.run([sys.executable, str(script), str(resolve_task(name).source_path), str(path),
                               *map(str, seeds)], capture_output=True, text=True)
        results.append("passed" if proc.returncode == 0 else proc.stdout[-200:] + proc.stderr[-300:])
    return time.perf_counter() - t0, results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--per-device", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--sandbox", nargs="+", default=["auto"],
                        help="judge with each of these --sandbox levels (e.g. off auto: the sandbox's cost)")
    parser.add_argument("--repeats", type=int, default=1, help="each judge run this many times, levels interleaved")
    parser.add_argument("--no-fresh", action="store_true", help="leave out the fresh-process baseline")
    args = parser.parse_args()
    seeds = [11, 12, 13]
    report = {"candidates": None, "seeds_per_case": len(seeds), "runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        cands = make_variants(Path(tmp), args.variants)
        report["candidates"] = len(cands)
        fresh_wall = None
        if not args.no_fresh:
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-fresh-")
            fresh_wall, fresh_results = run_fresh(cands, seeds)
            bad = [r for r in fresh_results if r != "passed"]
            if bad:  # a baseline that stops early is cheaper than real: refuse to report it
                raise SystemExit(f"the fresh-process baseline failed on {len(bad)} candidates:\n{bad[0]}")
            report["runs"].append({"method": "fresh python per candidate", "wall_s": fresh_wall,
                                   "per_candidate_s": fresh_wall / len(cands), "failures": bad[:3]})
        for rep in range(args.repeats):
            levels = args.sandbox if rep % 2 == 0 else args.sandbox[::-1]  # drift cancels over pairs
            for per_device in args.per_device:
                for level in levels:
                    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"triton-judge{per_device}-")
                    wall, warm, stages, setup = run_judge(cands, args.device, per_device, seeds, level)
                    report["runs"].append({
                        "method": f"kernelwright judge, {per_device} worker(s) per device, --sandbox {level}",
                        "sandbox": level, "per_device": per_device, "repeat": rep,
                        "wall_s": wall, "per_candidate_s": wall / len(cands), "worker_start_s": warm,
                        "speedup_vs_fresh": fresh_wall / wall if fresh_wall else None,
                        "sandbox_setup_ms_median": setup[len(setup) // 2] if setup else None,
                        "sandbox_setup_ms_max": setup[-1] if setup else None,
                        "not_passed": [s for s in stages if s != "passed"]})
    print(json.dumps(report, indent=2))
    print("\n| method | candidates | wall (s) | per candidate (s) | vs fresh process |\n|---|---|---|---|---|")
    for r in report["runs"]:
        vs = r.get("speedup_vs_fresh")
        print(f"| {r['method']} | {len(cands)} | {r['wall_s']:.1f} | {r['per_candidate_s']:.2f} | "
              f"{f'{vs:.2f}x' if vs else '-'} |")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
