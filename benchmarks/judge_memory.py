"""Memory in proportion to the work (issue 20, item 7): judge problems of given input sizes and
report each judging process's peak memory against the problem's inputs + outputs.

Two sources of problems:
- synthetic (default): KernelBench-style problems written to a temporary checkout, a sum over
  dim 1 (like L1_47, small outputs) and a ReLU (outputs as large as the inputs), at each `--sizes`
  MiB of inputs, with correct Triton candidates (benchmarks/kernelbench_candidates/);
- `--kernelbench PATH --problems level1/47 level1/19 ...`: the real files of a KernelBench checkout
  at their own sizes, judged with the candidate `benchmarks/kernelbench_candidates/level<L>_<N>.py`.

Per problem it prints (JSON): the verdict's stage and kind (a problem that does not fit the machine
is `problem_too_large`, with its sizes and the memory there is), inputs and outputs (from meta
tensors: `Task.sizes`), and for the reference child, the candidate child and the worker: host peak
RSS growth (VmHWM minus the RSS the process started with: a fork starts out sharing its worker's
pages) and on a GPU torch's peak allocation, each also as a factor of inputs + outputs; wall time.

usage:
  PYTHONPATH=src python benchmarks/judge_memory.py --sizes 64 256 [--perf] [--out FILE]
  PYTHONPATH=src python benchmarks/judge_memory.py --device cuda --kernelbench PATH \\
      --problems level1/19 level1/23 level1/47 level1/1 --out $OUT/memory.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
CANDIDATES = Path(__file__).resolve().parent / "kernelbench_candidates"

SUM_DIM = '''
import torch
import torch.nn as nn

batch_size = {batch}
dim1 = {n}
dim2 = {inner}
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.rand(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
'''

RELU = '''
import torch
import torch.nn as nn

batch_size = {batch}
dim = {n}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''


def synthetic_checkout(root: Path, sizes_mib: list[int]) -> list[tuple[str, Path]]:
    """A miniature KernelBench checkout: per size, a sum over dim 1 (problem 47's shape) and a ReLU
    (problem 19's), numbered 1000 + ...; returns (relpath, candidate file) pairs."""
    level = root / "KernelBench" / "level1"
    level.mkdir(parents=True, exist_ok=True)
    problems = []
    for k, mib in enumerate(sizes_mib):
        floats = mib * (1 << 20) // 4
        inner = 1024
        n = 1024
        batch = max(1, floats // (n * inner))
        name = f"{1000 + 2 * k}_Sum_dim_{mib}MiB.py"
        (level / name).write_text(SUM_DIM.format(batch=batch, n=n, inner=inner))
        problems.append((f"level1/{name}", CANDIDATES / "level1_47.py"))
        name = f"{1001 + 2 * k}_ReLU_{mib}MiB.py"
        (level / name).write_text(RELU.format(batch=max(1, floats // 65536), n=65536))
        problems.append((f"level1/{name}", CANDIDATES / "level1_19.py"))
    return problems


def kernelbench_problems(path: str, wanted: list[str]) -> list[tuple[str, Path]]:
    """`level1/47` (or a file name) -> (relpath, candidate file) for each wanted problem."""
    from kernelwright.suites.kernelbench import benchmark_files, data_root

    root = data_root(path)
    files, _ = benchmark_files(root)
    out = []
    for want in wanted:
        level, _, number = want.partition("/")
        number = number.split("_")[0].removesuffix(".py")
        match = [f for f in files if f.split("/")[0] == level and re.match(rf"{number}_", f.split("/")[1])]
        if not match:
            print(f"no problem {want} in {root}", file=sys.stderr)
            continue
        candidate = CANDIDATES / f"{level}_{number}.py"
        if not candidate.exists():
            print(f"no candidate {candidate.name} for {match[0]}", file=sys.stderr)
            continue
        out.append((match[0], candidate))
    return out


def problem_sizes(task) -> tuple[int | None, int | None]:
    """(input bytes, output bytes) of the task's first correctness case, from meta tensors."""
    try:
        impl = task.load_implementation(str(task.reference_impl), "reference")
        sizes = task.sizes(impl, "correctness", task.correctness_cases[0])
        return sizes if sizes else (None, None)
    except Exception as exc:  # noqa: BLE001
        print(f"{task.name}: sizes unknown ({exc})", file=sys.stderr)
        return None, None


def judge_one(task, candidate: Path, device: str, args) -> dict:
    from kernelwright.judge import JudgeOptions, JudgePool

    perf = args.perf if args.perf is not None else device != "cpu"
    options = JudgeOptions(seeds=args.seeds, seed=7, perf=perf, measure_memory=True, perf_blocks=3,
                           block_ms=5 if device == "cpu" else 20, warmup_ms=5, min_calls_per_block=2,
                           max_perf_cases=1, call_timeout=600, case_timeout=600, perf_timeout=600)
    inputs, outputs = problem_sizes(task)
    started = time.perf_counter()
    with JudgePool(device, workers=1, options=options) as pool:
        verdict = pool.judge(task, candidate)
    wall = time.perf_counter() - started
    work = (inputs or 0) + (outputs or 0)
    row = {"task": task.name, "stage": verdict.stage, "kind": verdict.kind, "reason": verdict.reason[:400],
           "input_bytes": inputs, "output_bytes": outputs, "wall_s": round(wall, 2), "seeds": args.seeds,
           "perf": perf, "fits": verdict.kind != "problem_too_large"}
    for name, report in verdict.memory.items():
        grown = report.get("rss_peak_bytes", 0) - report.get("rss_start_bytes", 0)
        entry = {"host_peak_growth_bytes": grown, **report}
        if work:
            entry["host_factor"] = round(grown / work, 3)
            if report.get("device_peak_bytes"):
                entry["device_factor"] = round(report["device_peak_bytes"] / work, 3)
        row[name] = entry
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu (Triton interpreter), cuda or auto")
    parser.add_argument("--sizes", type=int, nargs="*", default=[64, 256], help="synthetic inputs, MiB each")
    parser.add_argument("--kernelbench", help="a KernelBench checkout: judge its --problems instead")
    parser.add_argument("--problems", nargs="*", default=["level1/19", "level1/23", "level1/47", "level1/1"])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--perf", action=argparse.BooleanOptionalAction, default=None,
                        help="time the candidate too (default: on GPUs only)")
    parser.add_argument("--time-limit", type=float, default=0, help="stop starting problems after this many s")
    parser.add_argument("--out", help="also write the JSON here")
    args = parser.parse_args(argv)

    from kernelwright.suites.kernelbench import kernelbench_task
    from kernelwright.suites.kernelbench import data_root

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kw-memory-") as tmp:
        if args.kernelbench:
            root = data_root(args.kernelbench)
            problems = kernelbench_problems(args.kernelbench, args.problems)
        else:
            problems = synthetic_checkout(Path(tmp), args.sizes)
            root = Path(tmp) / "KernelBench"
        rows = []
        for relpath, candidate in problems:
            if args.time_limit and time.perf_counter() - started > args.time_limit:
                rows.append({"task": relpath, "skipped": "time limit"})
                continue
            task = kernelbench_task(root, relpath)
            row = judge_one(task, candidate, args.device, args)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    result = {"device": args.device, "problems": rows, "wall_s": round(time.perf_counter() - started, 2)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
