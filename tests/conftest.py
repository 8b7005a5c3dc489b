import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CANDIDATES = Path(__file__).resolve().parent / "candidates"
GEAK_EVAL = Path(os.environ.get("KERNELWRIGHT_GEAK_EVAL", ROOT.parent / "shared" / "benchmarks" / "GEAK-eval"))

_EXPECT = re.compile(r'#\s*expect:\s*(\w+)(?:\s+"([^"]*)")?')


# Performance settings short enough for the CPU interpreter (the protocol is the same as on GPUs).
QUICK_PERF = dict(perf=True, perf_blocks=3, block_ms=3, warmup_ms=3, min_calls_per_block=2)


def judge_on_cpu(task, path, **options):
    """Judge one candidate file with a one-worker interpreter pool and JudgeOptions(**options)."""
    from kernelwright.judge import JudgeOptions, JudgePool

    with JudgePool("cpu", workers=1, options=JudgeOptions(**options)) as pool:
        return pool.judge(task, path)


def candidate_expectations(task: str, gpu: bool) -> list[tuple[Path, str, str]]:
    """(file, expected stage, expected reason substring) for every candidate of `task` that can
    run on this kind of machine (`# requires: gpu` marks files that need a real GPU)."""
    found = []
    for path in sorted((CANDIDATES / task).glob("*.py")):
        head = path.read_text().splitlines()[:3]
        match = next((m for m in map(_EXPECT.match, head) if m), None)
        assert match, f"{path} lacks an '# expect: STAGE \"reason\"' header"
        if any("requires: gpu" in line for line in head) and not gpu:
            continue
        found.append((path, match.group(1), match.group(2) or ""))
    return found


def pytest_collection_modifyitems(config, items):
    has_gpu = False
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        pass
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA/ROCm GPU (run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
