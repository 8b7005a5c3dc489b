"""Timing precision (A/A): each starter task's Triton reference timed against itself, through the
full performance stage (separate processes, interleaved blocks, L2 flush, rotating inputs).
A precise timer reports speedup 1.0 with a 95% interval that covers 1.0.

usage: PYTHONPATH=src python benchmarks/timing_precision.py [--blocks 10] [--repeats 2] [--out FILE]
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

STARTER = ["vector_add", "softmax", "rmsnorm", "matmul"]


def main() -> None:
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.tasks import resolve_task

    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = []
    options = JudgeOptions(seeds=1, perf=True, baseline="triton", perf_blocks=args.blocks)
    with JudgePool(args.device, workers=1, options=options) as pool:
        for repeat in range(args.repeats):
            for name in STARTER:
                task = resolve_task(name)
                verdict = pool.judge(task, task.triton_reference)
                if not verdict.passed:
                    print(f"{name}: {verdict.stage}: {verdict.reason}", file=sys.stderr)
                    continue
                for c in verdict.cases:
                    if c.kind == "performance" and c.speedup is not None:
                        rows.append({"task": name, "case": c.label, "repeat": repeat, "ref_ms": c.ref_ms,
                                     "cand_ms": c.cand_ms, "speedup": c.speedup, "ci95": c.ci95,
                                     "covers_1": c.ci95[0] <= 1.0 <= c.ci95[1],
                                     "calls_per_block": c.timing["calls_per_block"],
                                     "escape_gap_ms": c.timing["escape_gap_ms"]})
    long_rows = [r for r in rows if r["ref_ms"] >= 0.020]
    summary = {
        "device": pool.device_info.get("name"),
        "cases": len(rows),
        "median_abs_dev_all": statistics.median(abs(r["speedup"] - 1) for r in rows) if rows else None,
        "median_abs_dev_ge_20us": statistics.median(abs(r["speedup"] - 1) for r in long_rows) if long_rows else None,
        "max_abs_dev_ge_20us": max(abs(r["speedup"] - 1) for r in long_rows) if long_rows else None,
        "ci_covers_1": sum(r["covers_1"] for r in rows),
        "max_escape_gap_difference_ms": max(abs(r["escape_gap_ms"]["cand"] - r["escape_gap_ms"]["ref"])
                                            for r in rows) if rows else None,
    }
    print("| task | case | rep | ref ms | cand ms | speedup | 95% CI | covers 1 |\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['task']} | {r['case']} | {r['repeat']} | {r['ref_ms']:.4f} | {r['cand_ms']:.4f} | "
              f"{r['speedup']:.4f} | [{r['ci95'][0]:.4f}, {r['ci95'][1]:.4f}] | {'yes' if r['covers_1'] else 'NO'} |")
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
