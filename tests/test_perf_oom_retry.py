"""A perf shape that runs out of memory while other workers share the GPU is checked again when the
worker has the GPU to itself; one that runs out of memory alone fails the performance stage. The
retry is chosen by the failure's kind (torch.OutOfMemoryError, reported as a class name), never by
the words "out of memory" in a message the candidate can write."""

import pytest

from kernelwright.tasks import load_task_file

from .conftest import CANDIDATES, QUICK_PERF, judge_on_cpu

TASK = load_task_file(CANDIDATES.parent / "tasks" / "tiny_add.py")
GOOD = (CANDIDATES / "tiny_add" / "good.py").read_text()
OOM = '''

_perf_calls = []


def vector_add(x, y):
    if x.numel() > 10_000:  # perf sizes only
        _perf_calls.append(1)
        if len(_perf_calls) <= LIMIT:
            raise ERROR("CUDA out of memory. Tried to allocate 8.00 GiB (simulated)")
    return launch(x.contiguous(), y.contiguous(), torch.empty_like(x))
'''


@pytest.mark.parametrize("limit,error,stage,kind", [
    (1, "torch.OutOfMemoryError", "passed", "passed"),
    (10**9, "torch.OutOfMemoryError", "performance", "out_of_memory"),
    (1, "RuntimeError", "performance", "runtime_error"),  # only the text says "out of memory": no retry
])
def test_out_of_memory_at_perf_size(tmp_path, limit, error, stage, kind):
    path = tmp_path / "candidate.py"
    path.write_text(GOOD.replace("def vector_add(x, y):", "def _unused(x, y):")
                    + OOM.replace("LIMIT", str(limit)).replace("ERROR", error))
    verdict = judge_on_cpu(TASK, path, seeds=1, **dict(QUICK_PERF, perf_blocks=2))
    assert (verdict.stage, verdict.kind) == (stage, kind), f"{verdict.stage}: {verdict.reason}\n{verdict.detail}"
    if stage == "passed":
        assert len([c for c in verdict.cases if c.kind == "performance" and c.speedup]) == 2
    else:
        assert "out of memory" in verdict.reason
