"""The baseline of the throughput benchmark: what GEAK-eval does per candidate, i.e. a fresh
`python` process that imports torch, triton and the candidate, then checks it against the reference
in-process. Same cases and seeds as the judge's correctness stage (float64 reference, allclose).

usage: python fresh_process_check.py TASK_FILE CANDIDATE_FILE SEED [SEED...]
"""

import importlib.util
import sys

import torch

sys.path.insert(0, sys.argv[0].rsplit("/", 2)[0] + "/src")
from kernelwright.tasks import load_task_file  # noqa: E402


def main() -> int:
    task = load_task_file(sys.argv[1])
    spec = importlib.util.spec_from_file_location("candidate", sys.argv[2])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, task.entry_point.name)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for case in task.correctness_cases:
        if device == "cpu" and case.dtype == "bfloat16":
            continue
        tol = task.tolerance_for(case.dtype)
        for seed in map(int, sys.argv[3:]):
            gen = torch.Generator(device=device).manual_seed(seed)
            args = task.make_inputs(case, gen)
            out = fn(*args)
            ref = task.reference(*[a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                                   for a in args])
            torch.cuda.synchronize() if device == "cuda" else None
            if not torch.allclose(out.double(), ref.double(), atol=tol.atol, rtol=tol.rtol):
                print(f"FAIL {case.label} seed {seed}")
                return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
