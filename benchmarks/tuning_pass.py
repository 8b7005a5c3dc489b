"""The LLM-free tuning pass on the built-in suite's Triton references: each reference is judged
as a candidate, then its launch parameters are swept (agent/tuning.py, its variants
from launchknobs.py) within a budget; reported
per task: the reference's speedup against torch, the tuned variant's (when one beats it), the
variants tried and passed, and the judge time the pass cost.

    PYTHONPATH=src python benchmarks/tuning_pass.py --variants 6 [--tasks softmax gelu ...] --out tuning.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def main() -> None:
    from kernelwright.agent.memory import Attempt
    from kernelwright.agent.tuning import TuneBudget, tune
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.tasks import builtin_task_paths, load_task_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    from kernelwright.cli.options import add_tasks_argument

    add_tasks_argument(parser)
    parser.add_argument("--variants", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=240.0, help="budget per task")
    parser.add_argument("--max-perf-cases", type=int)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    tasks = [load_task_file(p) for n, p in builtin_task_paths().items() if not args.tasks or n in args.tasks]
    tasks = [t for t in tasks if t.triton_reference]
    rows = []
    with JudgePool(args.device, options=JudgeOptions(seeds=1, max_perf_cases=args.max_perf_cases),
                   workers_per_device=None) as pool:
        pool.start()

        def one(task):
            code = Path(task.triton_reference).read_text()
            start = time.monotonic()
            verdict = pool.submit(task, code, f"{task.name}-reference").result()
            base = Attempt(task.name, 0, 0, "given", 0, None, code).with_verdict(verdict, verdict.feedback())
            if not base.passed:
                return {"task": task.name, "reference": base.kind, "reason": base.reason[:200]}
            result = tune(task, base, pool, TuneBudget(args.variants, args.seconds), next_index=1, run=0)
            return {"task": task.name, "reference_speedup": base.speedup,
                    "tuned_speedup": result.attempt.speedup if result.attempt else None,
                    "tuned": result.attempt.strategy if result.attempt else None,
                    "tried": result.tried, "passed": result.passed,
                    "judge_s": round(result.judge_seconds, 1), "wall_s": round(time.monotonic() - start, 1),
                    "notes": result.notes}

        start = time.monotonic()
        with ThreadPoolExecutor(max(1, pool.n_workers // 2)) as ex:
            for future in as_completed([ex.submit(one, t) for t in tasks]):
                rows.append(future.result())
                if args.out:  # what is done so far survives a run cut short by a time limit
                    args.out.write_text(json.dumps({"partial": True, "rows": rows}, indent=2, default=str) + "\n")
        wall = time.monotonic() - start
        rows.sort(key=lambda r: r["task"])
    improved = [r for r in rows if r.get("tuned_speedup")]
    summary = {"device": pool.device_info.get("name", pool.backend), "tasks": len(rows), "improved": len(improved),
               "wall_s": round(wall, 1), "judge_s": round(sum(r.get("judge_s", 0) for r in rows), 1),
               "variants_tried": sum(r.get("tried", 0) for r in rows), "rows": rows}
    for r in rows:
        print(f"{r['task']:28s} ref {r.get('reference_speedup') or r.get('reference')!s:>8.8} "
              f"tuned {r.get('tuned_speedup') or '-'!s:>8.8} tried {r.get('tried', '-')} passed {r.get('passed', '-')} "
              f"judge {r.get('judge_s', '-')} s  {r.get('tuned') or ''}")
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
