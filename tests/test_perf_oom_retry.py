"""A perf shape that runs out of memory while other workers share the GPU is checked again when the
worker has the GPU to itself; one that runs out of memory alone fails the performance stage."""

import pytest

from kernelwright.judge import JudgeOptions, JudgePool
from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
GOOD = (CANDIDATES / "tiny_add" / "good.py").read_text()
OOM = '''

_perf_calls = []


def vector_add(x, y):
    if x.numel() > 10_000:  # perf sizes only
        _perf_calls.append(1)
        if len(_perf_calls) <= LIMIT:
            raise RuntimeError("CUDA out of memory. Tried to allocate 8.00 GiB (simulated)")
    return launch(x.contiguous(), y.contiguous(), torch.empty_like(x))
'''


@pytest.mark.parametrize("limit,stage", [(1, "passed"), (10**9, "performance")])
def test_out_of_memory_at_perf_size(tmp_path, limit, stage):
    path = tmp_path / "candidate.py"
    path.write_text(GOOD.replace("def vector_add(x, y):", "def _unused(x, y):") + OOM.replace("LIMIT", str(limit)))
    options = JudgeOptions(seeds=1, perf=True, perf_blocks=2, block_ms=3, warmup_ms=3, min_calls_per_block=2)
    with JudgePool("cpu", workers=1, options=options) as pool:
        verdict = pool.judge(TASK, path)
    assert verdict.stage == stage, f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    if stage == "passed":
        assert len([c for c in verdict.cases if c.kind == "performance" and c.speedup]) == 2
    else:
        assert "out of memory" in verdict.reason
