"""`kernelwright bench` on every adapter suite (and the built-in one) with the scripted model, on
miniature checkouts the tests write themselves: metrics.json must count what results.jsonl says
passed. Issue 34: KernelBench's refs carry the problem's path (level1/19_ReLU.py) while its tasks
are named L1_19_ReLU; metrics keyed on the ref's text counted every task as missing. And a
problem too large for this machine ends the task-run with no further model call, exit 3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.agent.app import RunSpec
from kernelwright.agent.loop import AgentSettings
from kernelwright.agent.run_metrics import task_names_of
from kernelwright.llm.testing import ScriptedServer
from kernelwright.suites.geak_source import ROCM_DIR

from .agent_support import PING_ANSWER, ROOT, model_requests
from .test_bench import REFS, ans, bench_flags, kernelwright  # noqa: F401 - kernelwright is a fixture
from .. import test_geak_fake_checkout as geak_fake
from .. import test_kernelbench_adapter as kb_fake
from .. import test_tritonbench_t_adapter as tbt_fake

SEP = "\n" + "#" * 146 + "\n"
ADD_10 = geak_fake.KERNEL.replace("VALUE", "10")
# A ROCm-style pytest file: kernel, separator, parametrized tests that store outputs in result_gold.
ROCM_TEST = '''
import pytest
import torch

result_gold = {}


@pytest.mark.parametrize("n", [100, 1000])
def test_add_value(n, request):
    x = torch.randn(n)
    result_gold[request.node.name] = puzzle1(x)
'''


def _kernelbench(root: Path) -> dict:
    """Two problems: level2/7 is answered right, level1/19 wrong (its kernel scales by 1.5)."""
    for rel in ("level2/7_Linear_ScaledReLU.py", "level1/19_ScaledReLU.py"):
        (root / "KernelBench" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "KernelBench" / rel).write_text(kb_fake.REFERENCE_FILE)
    good = kb_fake.CANDIDATE.replace("SCALE", "self.scale")
    return {"rules": [("level2/7_", good), ("level1/19_", good.replace("self.scale, BLOCK", "self.scale * 1.5, BLOCK"))],
            "passed": {"L2_7_Linear_ScaledReLU"}, "names": {"L2_7_Linear_ScaledReLU", "L1_19_ScaledReLU"}}


def _tritonbench_revised(root: Path) -> dict:
    geak_fake.write_checkout(root, "add_value", ADD_10 + SEP + geak_fake.TEST, "Add 10 to every element.")
    return {"rules": [("", ADD_10)], "passed": {"add_value"}, "names": {"add_value"}}


def _rocm(root: Path) -> dict:
    (root / ROCM_DIR).mkdir(parents=True)
    (root / ROCM_DIR / "add_value.py").write_text(ADD_10 + SEP + ROCM_TEST)
    return {"rules": [("", ADD_10)], "passed": {"add_value"}, "names": {"add_value"}}


def _tritonbench_t(root: Path) -> dict:
    tbt_fake.write_checkout(root)
    good = tbt_fake.CANDIDATE.replace("SHIFT", "shift")
    return {"rules": [("", good)], "passed": {"shifted_tanh"}, "names": {"shifted_tanh"}}


def _builtin(root: Path) -> dict:
    return {"tasks": ["vector_add"], "rules": [("", (REFS / "vector_add.py").read_text())],
            "passed": {"vector_add"}, "names": {"vector_add"}}


SUITES = {"kernelbench": _kernelbench, "tritonbench-revised": _tritonbench_revised, "rocm": _rocm,
          "tritonbench-t": _tritonbench_t, "builtin": _builtin}


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(SUITES))
def test_bench_metrics_agree_with_results_on_every_suite(tmp_path, kernelwright, suite):  # noqa: F811
    root = tmp_path / "checkout"
    root.mkdir()
    fake = SUITES[suite](root)
    script = {"sequence": [PING_ANSWER],
              "rules": [{"match": pattern, **ans(code)} for pattern, code in fake["rules"]]}
    extra = [f for t in fake.get("tasks", ()) for f in ("--tasks", t)]
    if suite != "builtin":
        extra += ["--path", str(root)]
    with ScriptedServer(script) as server:
        flags = bench_flags(server, tmp_path / "run", "--iterations", "1", "--concurrency", "1", *extra)
        flags[flags.index("--suite") + 1] = suite
        code, data, err = kernelwright(*flags)
    assert code == 0, err
    run = tmp_path / "run"
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert {r["task"] for r in results} == fake["names"]
    passed = {r["task"] for r in results if r["passed_runs"]}
    assert passed == fake["passed"]
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["tasks"] == len(fake["names"])
    # a kernel that ran but was wrong counts for call accuracy, not execution accuracy
    ran = passed | {r["task"] for r in results if (r["best_unverified"] or {}).get("kind") == "wrong_values"}
    for point in metrics["per_runs"] + metrics["per_iteration"]:
        for name, hits in (("call accuracy", ran), ("execution accuracy", passed)):
            m = point["metrics"][name]
            assert (m["numerator"], m["denominator"]) == (len(hits), len(results)), (name, m)
            assert "missing" not in m["note"], m["note"]
    again = json.loads((run / "summary.json").read_text())
    assert again["passed_tasks"] == len(passed)


def test_runs_from_before_task_names_count_kernelbench_tasks_by_their_names():
    """A spec stored before it recorded task names: the names follow from each ref."""
    spec = RunSpec("bench", ("kernelbench:/x/KernelBench::level1/19_ReLU.py", "rocm:/g::add_value",
                             "/tasks/tiny_add.py"), "m", AgentSettings())
    assert task_names_of(spec) == ("L1_19_ReLU", "add_value", "tiny_add")
    assert task_names_of(RunSpec.from_dict(dict(spec.to_dict(), task_names=["a", "b", "c"]))) == ("a", "b", "c")


# KernelBench's ReLU at 2**18 x 2**20 float32: 1 TiB of inputs, estimated, never built
HUGE_RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(1 << 18, 1 << 20)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_a_problem_too_large_for_this_machine_costs_no_further_call_and_exits_3(tmp_path, kernelwright_here):
    level = tmp_path / "KernelBench" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(HUGE_RELU)
    candidate = (ROOT / "benchmarks" / "kernelbench_candidates" / "level1_19.py").read_text()
    # a reflector or fixer call would get this same answer: the count below tells them apart
    script = {"sequence": [PING_ANSWER], "default": ans(candidate)}
    with ScriptedServer(script) as server:
        flags = bench_flags(server, tmp_path / "run", "--iterations", "3")
        flags[flags.index("bench")] = "generate"
        flags[flags.index("--suite") + 1] = "kernelbench"
        flags.remove("--json")
        proc = kernelwright_here(*flags, "--path", str(tmp_path), "--task", "L1_19_ReLU")
        calls = len(model_requests(server))
    assert proc.returncode == 3, proc.stderr
    # the console shows the whole reason, what the machine lacks included
    out = " ".join(proc.stdout.split())
    assert "problem_too_large" in out and "of host memory" in out and "available)" in out, out
    assert calls == 1  # the first answer only: no reflector, no fix
    results = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    (result,) = results
    assert result["best_unverified"]["kind"] == "problem_too_large"
    assert result["ended"] == {"0": "the judge could not decide (problem_too_large): no further model call"}
    # the metrics say the judge could not decide, not that the kernel failed
    report = kernelwright_here("bench-report", str(tmp_path / "run"), "--json")
    note = json.loads(report.stdout)["per_runs"][-1]["metrics"]["execution accuracy"]["note"]
    assert note == "1 tasks; 1 judge errors counted as failures", note
