"""How long the judge takes to return a verdict for candidates that hang, with its default
limits (or a --run-timeout of your choice): a host loop in the first call, in a later call, at
import, a kernel that never terminates, a host loop only at a perf size (the perf-size check, on
the tiny_add test task), and, for comparison, an honest candidate and one whose first call spends
8 s compiling (not cut off). Prints JSON: per candidate the seconds from submit
to verdict (the pool warmed up first), its stage, kind and reason.

usage: PYTHONPATH=src python benchmarks/hang_detection.py [--device cpu|cuda|auto] [--workers 1]
       [--run-timeout S] [--out FILE]
(--device cpu sets TRITON_INTERPRET=1 itself.)
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
CANDIDATES = ROOT / "tests" / "candidates"
NAMES = ["hangs/host_loop_first_call.py", "hangs/host_loop_later_call.py", "hangs/import_loop.py",
         "hangs/kernel_never_ends.py", "tiny_add/hang_at_perf_size.py", "hangs/slow_compile_finishes.py",
         "vector_add/good.py"]
# Short timing settings: only the perf-size check matters here, not the speedup.
QUICK_PERF = dict(perf=True, perf_blocks=3, block_ms=3, warmup_ms=3, min_calls_per_block=2, max_perf_cases=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda", "hip", "auto"])
    parser.add_argument("--workers", type=int, default=1, help="workers (per GPU on a GPU): >1 judges side by side")
    parser.add_argument("--run-timeout", type=float, default=None, help="JudgeOptions.run_timeout (default: its default)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.tasks import load_task_file, resolve_task

    tasks = {"vector_add": resolve_task("vector_add"),
             "tiny_add": load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")}
    task = tasks["vector_add"]
    extra = {} if args.run_timeout is None else {"run_timeout": args.run_timeout}
    options = JudgeOptions(seeds=2, seed=1, **QUICK_PERF, **extra)
    results = []
    started = time.monotonic()
    kw = {"workers": args.workers} if args.device == "cpu" else {"workers": 1, "workers_per_device": args.workers}
    with JudgePool(args.device, options=options, **kw) as pool:
        warm_s = time.monotonic()
        warm = [pool.submit(task, (CANDIDATES / "vector_add" / "good.py").read_text(), f"warm{i}")
                for i in range(args.workers)]
        for w in warm:
            w.result()
        warm_s = time.monotonic() - warm_s
        # one at a time with one worker, so each time is that candidate's alone
        finished: dict[str, float] = {}
        futures = []
        for name in NAMES:
            submitted = time.monotonic()
            own_task = tasks.get(name.split("/")[0], task)  # hangs/ and vector_add/ are vector_add's
            future = pool.submit(own_task, (CANDIDATES / name).read_text(), Path(name).stem)
            future.add_done_callback(lambda _f, name=name: finished.setdefault(name, time.monotonic()))
            futures.append((name, submitted, future))
            if args.workers == 1:
                future.result()
        for name, submitted, future in futures:
            verdict = future.result()
            results.append({"candidate": name, "seconds": round(finished[name] - submitted, 2),
                            "stage": verdict.stage, "kind": verdict.kind, "reason": verdict.reason})
    report = {"device": args.device, "backend": pool.backend, "workers": args.workers,
              "options": {k: getattr(options, k) for k in ("run_timeout", "run_timeout_factor", "compile_timeout",
                                                           "load_timeout", "call_timeout", "case_timeout",
                                                           "perf_timeout")},
              "warm_up_s": round(warm_s, 2), "total_s": round(time.monotonic() - started, 2), "verdicts": results}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
