"""What `--executor ray` costs and gives on the CPU (issue 33), with Triton's interpreter:

- per-candidate overhead: the same N candidates judged by a local pool of one worker and by a
  one-node Ray cluster of one actor (wrapping the same worker); the difference in wall time per
  candidate is what Ray costs end to end, and each round trip less the time the actor spent
  judging is Ray's transport alone (the rest is Ray's daemons competing for the CPU cores);
- throughput: a two-node local cluster (one simulated GPU, `kw_gpu`, per node) against one node.

    PYTHONPATH=src python benchmarks/ray_overhead.py [--candidates 8] [--out ray_overhead.json]

Each pool is started and warmed by one candidate before the clock starts: worker start-up (torch,
Triton imports) is the same with either executor and is not what is measured. On a machine with
fewer cores than nodes x workers, two nodes share the cores and cannot double the throughput:
the JSON records the machine's core count beside the numbers."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
CANDIDATE = ROOT / "tests" / "candidates" / "vector_add" / "good.py"


def timed(pool, task, source: str, n: int) -> dict:
    """Warm the pool with one candidate, then judge `n` at once; wall time and verdicts."""
    pool.submit(task, source).result()
    started = time.monotonic()
    verdicts = [f.result() for f in [pool.submit(task, source) for _ in range(n)]]
    wall = time.monotonic() - started
    assert all(v.correct for v in verdicts), [v.reason for v in verdicts if not v.correct]
    return {"candidates": n, "wall_s": round(wall, 3), "per_candidate_s": round(wall / n, 3),
            "throughput_per_min": round(60 * n / wall, 2)}


def local_run(task, source: str, n: int, options) -> dict:
    from kernelwright.judge import JudgePool

    with JudgePool("cpu", workers=1, options=options) as pool:
        return timed(pool, task, source, n)


def ray_run(task, source: str, n: int, options, nodes: int) -> dict:
    import ray
    from ray.cluster_utils import Cluster

    from kernelwright.scale.raypool import RayJudgePool

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"kw_gpu": 1}})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1, resources={"kw_gpu": 1})
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        with RayJudgePool(options=options) as pool:
            assert pool.n_workers == nodes
            if nodes > 1:  # warm every actor, not just the first free one
                [f.result() for f in [pool.submit(task, source) for _ in range(nodes)]]
            result = timed(pool, task, source, n)
            handles = [h for h in pool._workers if h is not None]
            judged = sum(h.judged for h in handles)
            # Ray's own part: each round trip less the time the actor spent judging
            result["transport_per_candidate_ms"] = round(
                1000 * sum(h.round_trip_s - h.node_s for h in handles) / judged, 2)
            result["on_node_per_candidate_s"] = round(sum(h.node_s for h in handles) / judged, 3)
            return result
    finally:
        ray.shutdown()
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("ray_overhead.json"))
    args = parser.parse_args()
    from kernelwright.judge import JudgeOptions
    from kernelwright.suites.runner import load_suite_tasks

    task = next(t for t in load_suite_tasks("builtin", None)[0] if t.name == "vector_add")
    source = CANDIDATE.read_text()
    options = JudgeOptions(seeds=1, seed=1)
    local = local_run(task, source, args.candidates, options)
    one = ray_run(task, source, args.candidates, options, nodes=1)
    two = ray_run(task, source, args.candidates, options, nodes=2)
    report = {"cpu_count": os.cpu_count(), "task": task.name, "local_1_worker": local, "ray_1_node": one,
              "ray_2_nodes": two,
              "ray_overhead_per_candidate_s": round(one["per_candidate_s"] - local["per_candidate_s"], 3),
              "ray_transport_per_candidate_ms": one["transport_per_candidate_ms"],
              "two_vs_one_node_throughput": round(two["throughput_per_min"] / one["throughput_per_min"], 2)}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
