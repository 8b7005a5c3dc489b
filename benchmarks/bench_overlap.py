"""Do LLM calls and judging overlap? `kernelwright bench` with the scripted model answering every
call after a fixed delay (a stand-in for a real model's latency), each answer a task's own Triton
reference (correct, so every iteration is a full judge cascade and the optimizer runs).

    PYTHONPATH=src python benchmarks/bench_overlap.py --delay 5 --runs 4 --iterations 3 \
        [--tasks softmax vector_add ...] [--concurrency N] --out OUT_DIR

Reports the wall time against the sum of the model's delays divided by the number of calls in
flight (the time the model alone would take), and the judge meter's utilization and idle
fraction (the share of the run with nothing being judged), from the run's metrics.json.

With --account, bench runs in this process instead of a child, and the orchestration overhead
under bench's own concurrency is measured too: for every task-run (one thread of the session),
its wall time minus the time that thread spent waiting for the LLM client and for verdicts. The
rest, summed over task-runs and divided by the iterations, is the agent's own work per iteration
(prompts, retrieval, parsing, the store, bookkeeping), including what it loses to the other
threads and to the judge pool's threads in the same interpreter (the GIL), which is the honest
measure under concurrency. Target (issue 17): at most 50 ms per iteration.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


class ThreadClock:
    """Seconds each thread spent inside wrapped waits (LLM calls, verdict waits)."""

    def __init__(self) -> None:
        self._local = threading.local()

    def waited(self) -> float:
        return getattr(self._local, "s", 0.0)

    def add(self, seconds: float) -> None:
        self._local.s = self.waited() + seconds

    def timed(self, fn):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(time.perf_counter() - start)
        return wrapper


def install_accounting() -> dict:
    """Wrap, for this process, the LLM client bench makes, the verdict waits and each task-run;
    returns the live totals."""
    from kernelwright.agent import app as agent_app, loop, meter

    clock, totals, lock = ThreadClock(), {"task_runs": 0, "wall_s": 0.0, "waits_s": 0.0, "residuals_ms": []}, threading.Lock()
    make_llm = agent_app.make_llm

    def accounted_llm(*args, **kwargs):
        llm = make_llm(*args, **kwargs)
        llm.complete = clock.timed(llm.complete)
        return llm

    agent_app.make_llm = accounted_llm
    submit = meter.JudgeMeter.submit

    class Waited:
        """A verdict future whose result() wait is counted for the thread that waits."""

        def __init__(self, future):
            self.future = future

        def result(self, timeout=None):
            return clock.timed(self.future.result)(timeout)

    def accounted_submit(self, *args, **kwargs):
        return Waited(clock.timed(submit)(self, *args, **kwargs))

    meter.JudgeMeter.submit = accounted_submit
    execute = loop.TaskRun.execute

    def accounted_execute(self, *args, **kwargs):
        start, waited = time.perf_counter(), clock.waited()
        try:
            return execute(self, *args, **kwargs)
        finally:
            wall, waits = time.perf_counter() - start, clock.waited() - waited
            with lock:
                totals["task_runs"] += 1
                totals["wall_s"] += wall
                totals["waits_s"] += waits
                totals["residuals_ms"].append(1000 * (wall - waits))

    loop.TaskRun.execute = accounted_execute
    return totals


def run_in_process(cmd: list[str]) -> int:
    from kernelwright.cli import app

    try:
        code = app(args=cmd, prog_name="kernelwright", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
    return code if isinstance(code, int) else 0


def main() -> None:
    from kernelwright.llm.testing import ScriptedServer
    from kernelwright.tasks import builtin_task_paths, load_task_file

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=3)
    from kernelwright.cli.options import add_tasks_argument

    add_tasks_argument(parser)
    parser.add_argument("--concurrency", type=int)
    parser.add_argument("--llm-concurrency", type=int, default=64)
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more bench flags")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--account", action="store_true",
                        help="run bench in this process and measure the orchestration overhead per iteration")
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
               "--runs", str(args.runs), "--iterations", str(args.iterations), "--llm-seed", "1",
               "--llm-concurrency", str(args.llm_concurrency), "--out", str(run_dir), "--json"]
        for n in args.tasks or []:
            cmd += ["--tasks", n]
        if args.concurrency:
            cmd += ["--concurrency", str(args.concurrency)]
        cmd += args.extra
        start = time.monotonic()
        if args.account:
            totals = install_accounting()
            code, stderr = run_in_process(cmd[3:]), ""
        else:
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
            code, stderr = proc.returncode, proc.stderr
        wall = time.monotonic() - start
        peak = server.max_in_flight
        calls = len(server.requests)
    metrics = json.loads((run_dir / "metrics.json").read_text()) if (run_dir / "metrics.json").is_file() else {}
    judge = metrics.get("judge", {})
    final = (metrics.get("per_iteration") or [{}])[-1].get("metrics", {})
    report = {
        "command": " ".join(cmd[2:]), "exit": code, "wall_s": round(wall, 1),
        "llm_calls": calls, "llm_delay_s": args.delay, "llm_peak_in_flight": peak,
        "llm_alone_s": round(calls * args.delay / max(1, peak), 1),
        "judge": judge, "execution_accuracy": final.get("execution accuracy", {}).get("value"),
        "geak_speedup": final.get("GEAK speedup", {}).get("value"),
        "stderr_tail": stderr[-1500:] if code else "",
    }
    if args.account:
        iterations = _iterations(run_dir)
        overhead_s = totals["wall_s"] - totals["waits_s"]
        residuals = sorted(totals["residuals_ms"])
        report["orchestration"] = {
            "task_runs": totals["task_runs"], "iterations": iterations,
            "task_run_wall_s": round(totals["wall_s"], 2), "waiting_s": round(totals["waits_s"], 2),
            "overhead_s": round(overhead_s, 3),
            "overhead_ms_per_iteration": round(1000 * overhead_s / max(1, iterations), 2),
            "per_task_run_ms": {"median": round(residuals[len(residuals) // 2], 1) if residuals else None,
                                "max": round(residuals[-1], 1) if residuals else None},
        }
    print(json.dumps(report, indent=2))
    (args.out / "bench_overlap.json").write_text(json.dumps(report, indent=2) + "\n")


def _iterations(run_dir: Path) -> int:
    from kernelwright.agent.memory import Attempt
    from kernelwright.store import RunStore

    store = RunStore(run_dir, create=False, decode=Attempt.from_dict)
    try:
        return len(store.attempts())
    finally:
        store.close()


if __name__ == "__main__":
    main()
