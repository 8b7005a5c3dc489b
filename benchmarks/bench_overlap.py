"""Do LLM calls and judging overlap? `kernelwright bench` with the scripted model answering every
call after a fixed delay (a stand-in for a real model's latency), each answer a task's own Triton
reference (correct, so every iteration is a full judge cascade and the optimizer runs).

    PYTHONPATH=src python benchmarks/bench_overlap.py --delay 5 --runs 4 --iterations 3 \
        [--tasks softmax vector_add ...] [--concurrency N] --out OUT_DIR

Reports the wall time against the sum of the model's delays divided by the number of calls in
flight (the time the model alone would take), and the judge meter's utilization and idle
fraction (the share of the run with nothing being judged), from the run's metrics.json.
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


def main() -> None:
    from kernelwright.llm.testing import ScriptedServer
    from kernelwright.tasks import builtin_task_paths, load_task_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--tasks", nargs="*")
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--llm-concurrency", type=int, default=64)
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more bench flags")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    names = args.tasks or list(builtin_task_paths())
    rules = []
    for name in names:
        task = load_task_file(builtin_task_paths()[name])
        code = Path(task.triton_reference).read_text()
        rules.append({"match": f"## Task: {name}\n", "delay_s": args.delay,
                      "content": f"## Strategy\nThe reference.\n\n```python\n{code}```\n",
                      "usage": {"input_tokens": 3000, "output_tokens": 1000}})
    run_dir = args.out / "bench-run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELWRIGHT_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), os.environ.get("PYTHONPATH")) if p)
    with ScriptedServer({"rules": rules}) as server:
        cmd = [sys.executable, "-m", "kernelwright", "bench", "--suite", "builtin", "--model",
               "openai-compatible/scripted", "--base-url", server.openai_base_url, "--no-cache",
               "--runs", str(args.runs), "--iterations", str(args.iterations), "--seed", "1",
               "--llm-concurrency", str(args.llm_concurrency), "--out", str(run_dir), "--json"]
        for n in args.tasks or []:
            cmd += ["--tasks", n]
        if args.concurrency:
            cmd += ["--concurrency", str(args.concurrency)]
        cmd += args.extra
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
        wall = time.monotonic() - start
        peak = server.max_in_flight
        calls = len(server.requests)
    metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").is_file() else {}
    judge = metrics.get("judge", {})
    final = (metrics.get("per_iteration") or [{}])[-1].get("metrics", {})
    report = {
        "command": " ".join(cmd[2:]), "exit": proc.returncode, "wall_s": round(wall, 1),
        "llm_calls": calls, "llm_delay_s": args.delay, "llm_peak_in_flight": peak,
        "llm_alone_s": round(calls * args.delay / max(1, peak), 1),
        "judge": judge, "execution_accuracy": final.get("execution accuracy", {}).get("value"),
        "geak_speedup": final.get("GEAK speedup", {}).get("value"),
        "stderr_tail": proc.stderr[-1500:] if proc.returncode else "",
    }
    print(json.dumps(report, indent=2))
    (args.out / "bench_overlap.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
