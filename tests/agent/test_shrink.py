"""--shrink F (issue 34, item 2): a KernelBench problem too large for this machine at its own size
(KernelBench's ReLU, a 4096 x 393216 float32 input: about 66 GiB to judge) passes at sizes shrunk
to 1% of its bytes, and the verdict, results.jsonl and metrics.json say it was shrunk; a resumed
run refuses another --shrink. The fixture is written by the test (not copied from KernelBench)."""

from __future__ import annotations

import json

import pytest

from kernelwright.agent.app import RunSpec
from kernelwright.agent.loop import AgentSettings
from kernelwright.cli.agent_runs import refused_flags
from kernelwright.cli.options import AgentOptions
from kernelwright.judge.common.footprint import host_memory_available, memory_need
from kernelwright.llm.testing import ScriptedServer

from .agent_support import PING_ANSWER, ROOT
from .test_bench import ans, bench_flags, kernelwright  # noqa: F401 - kernelwright is a fixture

RELU = """
import torch
import torch.nn as nn

batch_size = 4096
dim = 393216


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
"""
FULL_BYTES = 4096 * 393216 * 4


@pytest.mark.slow
def test_a_problem_too_large_here_passes_shrunk_and_every_record_says_so(tmp_path, kernelwright):  # noqa: F811
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(RELU)
    candidate = (ROOT / "benchmarks" / "kernelbench_candidates" / "level1_19.py").read_text()
    if memory_need(FULL_BYTES, FULL_BYTES, gpu=False)[0] > host_memory_available():
        # at its own size the judge refuses it here (a machine with more memory would judge it)
        code, verdict, _ = kernelwright("eval", str(tmp_path / "cand.py"), "--suite", "kernelbench", "--path",
                                        str(tmp_path), "--task", "L1_19_ReLU", "--device", "cpu", "--json",
                                        cwd=_write(tmp_path / "cand.py", candidate))
        assert code == 3 and verdict["kind"] == "problem_too_large" and verdict["shrink"] is None, verdict
    script = {"sequence": [PING_ANSWER], "default": ans(candidate)}
    with ScriptedServer(script) as server:
        flags = bench_flags(server, tmp_path / "run", "--iterations", "1", "--concurrency", "1", "--path",
                            str(tmp_path), "--shrink", "0.01")
        flags[flags.index("--suite") + 1] = "kernelbench"
        code, report, err = kernelwright(*flags)
    assert code == 0, err
    (result,) = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert result["passed_runs"] and result["best"]["shrink"] == 0.01, result
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["shrink"] == report["shrink"] == 0.01
    assert metrics["settings"] and metrics["per_runs"][-1]["metrics"]["execution accuracy"]["value"] == 1
    speed = metrics["per_runs"][-1]["metrics"]["GEAK speedup"]["note"]
    assert "shrunk by --shrink 0.01" in speed, speed


def _write(path, text):
    path.write_text(text)
    return path.parent


def test_a_resumed_run_refuses_another_shrink():
    spec = RunSpec("bench", ("shrunk:0.01:/t/tiny_add.py",), "m", AgentSettings(), shrink=0.01)
    same = AgentOptions(shrink=0.01, given=frozenset({"shrink"}))
    other = AgentOptions(shrink=0.5, given=frozenset({"shrink"}))
    assert refused_flags(spec, same) == []
    assert refused_flags(spec, other) == ["--shrink (the run's: 0.01)"]
    assert refused_flags(RunSpec("bench", ("/t/tiny_add.py",), "m", AgentSettings()), other) == [
        "--shrink (the run's: None)"]
