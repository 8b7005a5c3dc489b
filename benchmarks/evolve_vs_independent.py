"""`--search evolve` against independent runs and against the tuning pass alone, at the same number
of judged candidates, with the local editing model (llm/testing/editing_model.py: it answers by
editing the code it is shown, deterministic per seed, over the real OpenAI-compatible HTTP path).

    arm          command (each: kernelwright bench --suite builtin, one run directory per arm)
    independent  --runs R --iterations T                         R*T candidates per task
    evolve       --runs R --iterations T --search evolve         R*T candidates per task
    tune         --runs 1 --iterations 1 --tune --tune-variants R*T-1   1 + (R*T-1) per task

Every arm starts from the same seed kernels (the built-in suite's Triton references: the editing
model's first answer) and uses the same --llm-seed. Printed per arm: the geometric mean over tasks
of the best verified kernel's speedup against the reference (95% bootstrap interval over tasks),
the tasks solved, the candidates the judge took (its meter: the tuning pass's unkept variants
included) and the judge's busy seconds.

    PYTHONPATH=src python benchmarks/evolve_vs_independent.py [--tasks softmax,gelu] [--runs 4 --iterations 8]
    PYTHONPATH=src python benchmarks/evolve_vs_independent.py --quick     # CPU smoke test (minutes)

--quick: one small task, 2 runs x 2 iterations, timed under the CPU interpreter (--perf --force,
one perf shape): the numbers say nothing about GPU speed; it checks that every arm runs (the
interpreter may time no shape of vector_add: then every geomean is "-" and the tuning pass keeps
nothing, as it does without timing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

MODEL = "openai-compatible/editing"


def arms(runs: int, iterations: int) -> dict[str, list[str]]:
    budget = runs * iterations
    return {"independent": ["--runs", str(runs), "--iterations", str(iterations)],
            "evolve": ["--runs", str(runs), "--iterations", str(iterations), "--search", "evolve"],
            "tune": ["--runs", "1", "--iterations", "1", "--tune", "--tune-variants", str(max(1, budget - 1))]}


def run_arm(name: str, extra: list[str], args: argparse.Namespace, base_url: str) -> dict:
    out = args.out / name
    cmd = [sys.executable, "-m", "kernelwright", "bench", "--suite", "builtin", "--model", MODEL,
           "--base-url", base_url, "--no-cache", "--llm-seed", str(args.seed), "--device", args.device,
           "--json", "--out", str(out), *extra]
    for task in args.tasks or ():
        cmd += ["--tasks", task]
    if args.quick:
        cmd += ["--perf", "--force", "--max-perf-cases", "1", "--judge-seeds", "1"]
    elif args.max_perf_cases:
        cmd += ["--max-perf-cases", str(args.max_perf_cases)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)}
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)
    return summarize(name, out, report, time.monotonic() - started)


def summarize(name: str, out: Path, report: dict, wall_s: float) -> dict:
    from kernelwright.agent.memory import Attempt
    from kernelwright.agent.scaling import geomean_ci
    from kernelwright.store import RunStore

    with RunStore(out, create=False, decode=Attempt.from_dict) as store:
        attempts = store.attempts()
    best: dict[str, float] = {}
    for a in attempts:
        if a.passed and a.speedup is not None:
            best[a.task] = max(best.get(a.task, 0.0), a.speedup)
    tasks = sorted({a.task for a in attempts})
    speeds = [best[t] for t in tasks if t in best]
    import math

    geo = math.exp(sum(math.log(s) for s in speeds) / len(speeds)) if speeds else None
    judge = report.get("judge") or {}
    busy = judge.get("utilization", 0.0) * judge.get("workers", 0) * judge.get("wall_s", 0.0)
    return {"arm": name, "tasks": len(tasks), "solved": len(speeds), "geomean": geo, "ci95": geomean_ci(speeds),
            "candidates": judge.get("candidates"), "judge_busy_s": round(busy, 1), "wall_s": round(wall_s, 1),
            "best": best, "run_dir": str(out)}


def table(rows: list[dict]) -> str:
    lines = ["| arm | tasks solved | geomean speedup of the best kernel [95% CI] | judged candidates | judge busy s | wall s |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        geo = "-" if r["geomean"] is None else f"{r['geomean']:.3f}" + (
            f" [{r['ci95'][0]:.3f}-{r['ci95'][1]:.3f}]" if r["ci95"] else "")
        lines.append(f"| {r['arm']} | {r['solved']}/{r['tasks']} | {geo} | {r['candidates']} | {r['judge_busy_s']} | {r['wall_s']} |")
    return "\n".join(lines)


def main() -> None:
    from kernelwright.cli.options import add_tasks_argument
    from kernelwright.llm.testing.editing_model import EditingServer, builtin_seeds

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_tasks_argument(parser)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1, help="--llm-seed of every arm")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--arms", default="independent,evolve,tune", help="comma list of arms to run")
    parser.add_argument("--quick", action="store_true", help="CPU smoke test: vector_add, 2 runs x 2 iterations")
    parser.add_argument("--out", type=Path, default=Path("kernelwright-runs") / f"evolve-vs-independent-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("--max-perf-cases", type=int, metavar="N",
                        help="time at most N shapes per task (every arm alike; default: all of them)")
    parser.add_argument("--json", type=Path, help="write the rows here too (after each arm: a run cut short keeps those done)")
    args = parser.parse_args()
    if args.quick:
        args.tasks = args.tasks or ["vector_add"]
        args.runs, args.iterations, args.device = min(args.runs, 2), min(args.iterations, 2), "cpu"
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with EditingServer(builtin_seeds()) as server:
        for name, extra in arms(args.runs, args.iterations).items():
            if name in args.arms.split(","):
                rows.append(run_arm(name, extra, args, server.openai_base_url))
                print(f"{name}: done ({rows[-1]['wall_s']} s)", file=sys.stderr, flush=True)
                if args.json:
                    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"{args.runs} runs x {args.iterations} iterations = {args.runs * args.iterations} judged candidates "
          f"per task and arm (tune: 1 + {args.runs * args.iterations - 1} variants); seed {args.seed}")
    print(table(rows))


if __name__ == "__main__":
    main()
