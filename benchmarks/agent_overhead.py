"""The agent's own cost per iteration: everything but waiting for the LLM and for the judge
(building prompts, 1-shot retrieval, parsing answers, the store's writes, bookkeeping).

The real agent runs task-runs one after another (concurrency 1, so wall time is the sum of the
iterations) with the real LLM client against the scripted server and the real judge pool; the
client's `complete` and every verdict wait are timed, and what is left is the orchestration.

    PYTHONPATH=src python benchmarks/agent_overhead.py --device auto --tasks softmax vector_add \
        --iterations 4 --out overhead.json

Setup (loading tasks, the knowledge, the retrieval corpus, the templates: once per run) is
reported apart; the loop's wall time includes writing the run directory's outputs at the end.
Target (issue 16): at most 50 ms per iteration.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


class Timed:
    """Wraps an object's method; adds the seconds spent inside it to `total`."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.total += seconds
            self.count += 1


class TimedLLM:
    def __init__(self, llm, timer: Timed) -> None:
        self.llm, self.timer = llm, timer

    def complete(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self.llm.complete(*args, **kwargs)
        finally:
            self.timer.add(time.perf_counter() - start)


class TimedFuture:
    def __init__(self, future, timer: Timed) -> None:
        self.future, self.timer = future, timer

    def result(self, timeout=None):
        start = time.perf_counter()
        try:
            return self.future.result(timeout)
        finally:
            self.timer.add(time.perf_counter() - start)


class TimedJudge:
    def __init__(self, pool, timer: Timed) -> None:
        self.pool, self.timer = pool, timer

    def submit(self, task, code, candidate_id=None):
        start = time.perf_counter()
        future = self.pool.submit(task, code, candidate_id)
        self.timer.add(time.perf_counter() - start)
        return TimedFuture(future, self.timer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto")
    from kernelwright.cli.options import add_tasks_argument

    add_tasks_argument(parser, default=["softmax", "vector_add"])
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    from kernelwright.agent.app import RunSpec, make_llm, open_run, run_session
    from kernelwright.agent.loop import AgentSettings
    from kernelwright.judge import JudgeOptions, JudgePool
    from kernelwright.llm.testing import ScriptedServer
    from kernelwright.tasks import resolve_task

    tasks = [resolve_task(name) for name in args.tasks]
    # each task's own Triton reference is the scripted answer: correct, so every iteration is a
    # full judge cascade and the optimizer's prompt grows with the history
    rules = [{"match": f"## Task: {t.name}\n", "content": f"## Strategy\nThe reference.\n\n```python\n"
                                                          f"{Path(t.triton_reference).read_text()}```\n"}
             for t in tasks]
    spec = RunSpec("generate", tuple(t.ref for t in tasks), "openai-compatible/scripted",
                   AgentSettings(iterations=args.iterations, seed=1), device=args.device, judge_seeds=1)
    llm_time, judge_time = Timed(), Timed()
    with ScriptedServer({"rules": rules}) as server, tempfile.TemporaryDirectory() as tmp:
        store, spec = open_run(Path(tmp) / "run", spec, resume=False)
        llm = make_llm(spec, store, None, {"base_url": server.openai_base_url, "no_cache": True})
        with JudgePool(args.device, options=JudgeOptions(seeds=1)) as pool:
            pool.start()
            marks = {"start": time.perf_counter()}
            results, errors = run_session(spec, store, TimedLLM(llm, llm_time), TimedJudge(pool, judge_time),
                                          device_info=pool.device_info, backend=pool.backend, concurrency=1,
                                          session_hook=lambda session: marks.setdefault("loop", time.perf_counter()))
            end = time.perf_counter()
            setup, wall = marks["loop"] - marks["start"], end - marks["loop"]
        attempts = len(store.attempts())
        store.close()
    overhead = wall - llm_time.total - judge_time.total
    report = {
        "device": pool.device_info.get("name", pool.backend), "tasks": args.tasks, "iterations": attempts,
        "setup_s": round(setup, 3), "wall_s": round(wall, 3), "llm_s": round(llm_time.total, 3), "llm_calls": llm_time.count,
        "judge_s": round(judge_time.total, 3), "overhead_s": round(overhead, 3),
        "overhead_ms_per_iteration": round(1000 * overhead / max(1, attempts), 2),
        "passed": sum(1 for r in results if r.best is not None), "errors": errors,
        "speedups": {r.task: r.best and r.best["speedup"] for r in results},
    }
    print(json.dumps(report, indent=2))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
